"""The pack job in other vendors' weight formats (``npupack pack --format openvino:...``): every
surface of the real PP-OCRv4 detector equals an independent NumPy layout of the model's own
weights (read here with onnx.numpy_helper), converted or quantised by our own NumPy formula
(docs/manifest.md §6.2); grouped layers use the format's grouped form or one surface per group;
Conv1d, Gemm and quantised models; read-back round trip; refusals."""
import hashlib
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")  # the musllinux wheels' tests run without onnx
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from npupack.cli import main  # noqa: E402
from npupack.job import pack_model  # noqa: E402
from npupack.manifest import validate_manifest  # noqa: E402
from npupack.nvdla import NV_FULL  # noqa: E402
from npupack.readback import load_packed, verify_packed  # noqa: E402


# ---------------------------------------------------------------------- references from docs/openvino.md

def _pad(w, axis, block):
    n = w.shape[axis]
    pad = [(0, 0)] * w.ndim
    pad[axis] = (0, -n % block)
    return np.pad(w, pad)


def _isv16_osv16(w):
    """os_is_yx_isv16_osv16, (O, I, Y, X): O and I padded to 16, [o/16][i/16][y][x][i%16][o%16]
    (docs/openvino.md §5.6)."""
    p = _pad(_pad(w, 0, 16), 1, 16)
    o, i, y, x = p.shape
    return p.reshape(o // 16, 16, i // 16, 16, y, x).transpose(0, 2, 4, 5, 3, 1)


def _osv16(w):
    """oneDNN Oihw16o = os_iyx_osv16, (O, I, H, W): [o/16][i][h][w][o%16] (docs/openvino.md §8.1)."""
    p = _pad(w, 0, 16)
    o, i, y, x = p.shape
    return p.reshape(o // 16, 16, i, y, x).transpose(0, 2, 3, 4, 1)


def _oyxi(w):
    """oyxi, (O, I, Y, X): [o][y][x][i] (docs/openvino.md §5.5)."""
    return w.transpose(0, 2, 3, 1)


# name -> (reference of one (O, I, Y, X) tensor, its grouped format: None = one surface per group)
FORMATS = {"openvino:os_is_yx_isv16_osv16": (_isv16_osv16, "openvino:g_os_is_yx_isv16_osv16"),
           "onednn:Oihw16o": (_osv16, "onednn:gOihw16o"),
           "openvino:oyxi": (_oyxi, None)}


def _expected_bytes(ref, w, group, grouped_name):
    """The surfaces of (K, C/g, R, S) weights: grouped formats put [g] outermost (§5.7)."""
    k = w.shape[0] // group
    slices = [ref(w[g * k:(g + 1) * k]) for g in range(group)]
    if group == 1 or grouped_name is not None:
        return [b"".join(np.ascontiguousarray(s).tobytes() for s in slices)]
    return [np.ascontiguousarray(s).tobytes() for s in slices]


def _quantise(w, qmax=127):
    """Symmetric per output channel, round half to even, in float32 (docs/manifest.md §6.2)."""
    w = w.astype(np.float32)
    scale = (np.abs(w).reshape(len(w), -1).max(axis=1) / np.float32(qmax)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))[:, None, None, None]
    return np.clip(np.rint(w / safe), -qmax, qmax).astype(np.int8), scale


def _model_weights(path):
    """{node name: (float32 weights, group, op_type, bias or None)} read straight from the ONNX file."""
    model = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    inits.update((n.output[0], numpy_helper.to_array(n.attribute[0].t)) for n in model.graph.node
                 if n.op_type == "Constant" and n.attribute[0].name == "value")  # the detector's weights
    out = {}
    for node in model.graph.node:
        if node.op_type in ("Conv", "ConvTranspose"):
            group = next((a.i for a in node.attribute if a.name == "group"), 1)
            bias = inits[node.input[2]] if len(node.input) > 2 and node.input[2] else None
            out[node.name] = (inits[node.input[1]].astype(np.float32), group, node.op_type, bias)
    return out


def _read(out, part):
    return (out / part["file"]).read_bytes()[part["offset"]:part["offset"] + part["size"]]


@pytest.fixture(scope="module")
def detector(ppocr_det_path):
    return ppocr_det_path, _model_weights(ppocr_det_path)


@pytest.mark.parametrize("precision", ["fp16", "int8"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_every_surface_is_the_numpy_layout_of_the_models_weights(detector, tmp_path, name, precision):
    path, weights = detector
    ref, grouped_name = FORMATS[name]
    manifest = pack_model(path, tmp_path / "out", weight_format=name, precision=precision, progress=False)
    validate_manifest(manifest)
    assert manifest["format"] == name.split(":")[0] and manifest["weight_format"] == name
    grouped_seen = 0
    for e in manifest["layers"]:
        w, group, op, bias = weights[e["name"]]
        if op == "ConvTranspose":
            assert e["status"] == "unsupported" and "transposed" in e["reason"]
            continue
        assert e["status"] == "packed", e.get("reason")
        if precision == "fp16":
            values, scales = w.astype(np.float16), None
        else:
            values, scales = _quantise(w)
            assert e["scales"] == [float(s) for s in scales] and e["quantization"] == "per_filter"
        assert e["logical_shape"] == list(w.shape) and e["dtype"] == str(values.dtype)
        want = _expected_bytes(ref, values, group, grouped_name)
        parts = e.get("group_surfaces") or [e]
        assert [_read(tmp_path / "out", p) for p in parts] == want
        assert e["nbytes"] == sum(map(len, want))
        if group > 1:
            grouped_seen += 1
            assert e["weight_format"] == (grouped_name or name)
            assert len(parts) == (1 if grouped_name else group)
        if bias is not None:
            assert e["bias"]["dtype"] == "float32"
            assert _read(tmp_path / "out", e["bias"]) == bias.astype("<f4").tobytes()
    assert grouped_seen > 0  # the detector's depthwise layers


def _conv1d_gemm_model(path, rng, bad=None):
    """x (1,4,10) -> Conv1d k3 (6,4,3) -> Flatten -> Gemm transB (5, 48) + bias (``bad``: one
    Conv1d weight replaced by that value)."""
    arrays = {"w1": rng.standard_normal((6, 4, 3)), "w2": rng.standard_normal((5, 48)), "b2": rng.standard_normal(5)}
    if bad is not None:
        arrays["w1"][2, 1, 0] = bad
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], name="conv1d"),
             helper.make_node("Flatten", ["c"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
                              [numpy_helper.from_array(a.astype(np.float32), n) for n, a in arrays.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return {k: v.astype(np.float32) for k, v in arrays.items()}


def test_conv1d_and_gemm_pack_as_r1_and_1x1(tmp_path, rng):
    arrays = _conv1d_gemm_model(tmp_path / "m.onnx", rng)
    manifest = pack_model(tmp_path / "m.onnx", tmp_path / "out", weight_format="openvino:os_is_yx_isv16_osv16",
                          precision="fp32", progress=False)
    conv, fc = manifest["layers"]
    assert conv["logical_shape"] == [6, 4, 1, 3] and fc["logical_shape"] == [5, 48, 1, 1]
    assert _read(tmp_path / "out", conv) == np.ascontiguousarray(_isv16_osv16(arrays["w1"][:, :, None, :])).tobytes()
    assert _read(tmp_path / "out", fc) == np.ascontiguousarray(_isv16_osv16(arrays["w2"][:, :, None, None])).tobytes()
    assert _read(tmp_path / "out", fc["bias"]) == arrays["b2"].tobytes()
    assert verify_packed(tmp_path / "out", model=tmp_path / "m.onnx")["problems"] == []


@pytest.mark.parametrize("precision", ["fp16", "int8"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weights_fail_their_layer(tmp_path, rng, bad, precision):
    _conv1d_gemm_model(tmp_path / "m.onnx", rng, bad=bad)
    m = pack_model(tmp_path / "m.onnx", tmp_path / "out", weight_format="openvino:oiyx", precision=precision,
                   progress=False)
    conv, fc = m["layers"]
    assert conv["status"] == "error" and "NaN or inf at index (2, 1, 0, 0)" in conv["reason"]
    assert fc["status"] == "packed"


def _qdq_model(path, q, scale, zp):
    """DequantizeLinear(int8 weights, per-channel scale, zero point) -> Conv."""
    inits = [numpy_helper.from_array(q, "wq"), numpy_helper.from_array(scale, "ws"), numpy_helper.from_array(zp, "wz")]
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["w"], name="dq", axis=0),
             helper.make_node("Conv", ["x", "w"], ["y"], name="conv")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def test_quantised_model_keeps_its_integers(tmp_path, rng):
    q = rng.integers(-127, 128, (20, 3, 3, 3), dtype=np.int8)
    scale = rng.uniform(0.01, 0.1, 20).astype(np.float32)
    _qdq_model(tmp_path / "q.onnx", q, scale, np.zeros(20, np.int8))
    m = pack_model(tmp_path / "q.onnx", tmp_path / "out", weight_format="openvino:os_is_yx_isv16_osv16",
                   precision="int8", progress=False)
    (e,) = m["layers"]
    assert e["quantization"] == "model" and e["scales"] == [float(s) for s in scale]
    assert _read(tmp_path / "out", e) == np.ascontiguousarray(_isv16_osv16(q)).tobytes()
    assert np.array_equal(load_packed(tmp_path / "out")["conv"].unpack(), q)
    # A zero point: integers are packed symmetric only; fp16 packs the dequantised weights.
    _qdq_model(tmp_path / "z.onnx", q, scale, np.full(20, 3, np.int8))
    m = pack_model(tmp_path / "z.onnx", tmp_path / "z8", weight_format="openvino:oiyx", precision="int8",
                   progress=False)
    assert m["layers"][0]["status"] == "unsupported" and "zero point 3" in m["layers"][0]["reason"]
    m = pack_model(tmp_path / "z.onnx", tmp_path / "z16", weight_format="openvino:oiyx", precision="fp16",
                   progress=False)
    want = ((q.astype(np.float32) - 3) * scale[:, None, None, None]).astype(np.float16)
    assert _read(tmp_path / "z16", m["layers"][0]) == want.tobytes()


def test_read_back_round_trip_and_damage(detector, tmp_path):
    path, weights = detector
    out = tmp_path / "out"
    pack_model(path, out, weight_format="openvino:os_is_yx_isv16_osv16", precision="int8", progress=False)
    layers = load_packed(out)
    for key, packed in layers.items():
        w, group, _, _ = weights[key]
        assert np.array_equal(packed.unpack(), _quantise(w)[0])
    report = verify_packed(out, model=path)
    assert report["problems"] == [] and report["layers"] == len(layers)
    # A fill byte that is not 0 and a changed weight, each with a manifest sha256 that matches.
    manifest = json.loads((out / "manifest.json").read_text())
    e = manifest["layers"][0]  # (16, 3, 3, 3): I padded from 3 to 16
    data = bytearray((out / e["file"]).read_bytes())
    original = bytes(data)
    for offset, what in ((3 * 16, "fill byte"), (0, "packed values differ")):
        data[:] = original
        data[offset] ^= 0x01
        (out / e["file"]).write_bytes(bytes(data))
        e["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
        (out / "manifest.json").write_text(json.dumps(manifest))
        problems = verify_packed(out, model=path)["problems"]
        assert len(problems) == 1 and what in problems[0], problems


def test_int32_bias_with_calibration(tmp_path, rng):
    arrays = _conv1d_gemm_model(tmp_path / "m.onnx", rng)
    (tmp_path / "cal.json").write_text(json.dumps({"f": {"scale": 0.05}, "x": {"scale": 0.02}}))
    m = pack_model(tmp_path / "m.onnx", tmp_path / "out", weight_format="onednn:Oihw16o", precision="int8",
                   calibration=tmp_path / "cal.json", progress=False)
    fc = m["layers"][1]
    _, scale = _quantise(arrays["w2"][:, :, None, None])
    want = np.rint(arrays["b2"].astype(np.float64) / (0.05 * scale.astype(np.float64))).astype("<i4")
    assert fc["bias"]["dtype"] == "int32" and fc["bias"]["input_scale"] == 0.05
    assert _read(tmp_path / "out", fc["bias"]) == want.tobytes()


def test_cli_pack_and_pack_many(detector, tmp_path, capsys):
    path, _ = detector
    assert main(["pack", str(path), "--format", "onednn:Oihw16o", "--precision", "fp16", "--quiet",
                 "-o", str(tmp_path / "one")]) == 3  # the two ConvTranspose layers
    assert main(["pack", str(path), "--format", "onednn:Oihw16o", "--precision", "fp16", "--allow-partial",
                 "--quiet", "-o", str(tmp_path / "one")]) == 0
    args = ["pack-many", str(path), "--format", "openvino:oyxi", "--precision", "fp32", "--allow-partial",
            "--quiet", "-o", str(tmp_path / "many")]
    assert main(args) == 0 and main(args) == 0
    assert "1 up to date" in capsys.readouterr().out
    assert verify_packed(tmp_path / "many")["problems"] == []


@pytest.mark.parametrize("argv, message", [
    (["--format", "openvino:os_is_yx_isv16_osv61"], "os_is_yx_isv16_osv16'"),
    (["--format", "openvino:oiyx", "--winograd", "auto"], "--winograd: NVDLA-only"),
    (["--format", "onednn:OIhw16i16o", "--image", "--target", "nv_small"], "--target, --image: NVDLA-only"),
    (["--format", "openvino:b_fs_yx_fsv16"], "not a weight format"),
    (["--format", "onednn:nChw16c"], "not a weight"),
    (["--format", "openvino:os_is_zyx_isv16_osv16"], "3-D convolution weights"),
    (["--precision", "fp32"], "precision"),
], ids=["typo", "winograd", "image-target", "feature-map", "onednn-data-tag", "3-d", "nvdla-fp32"])
def test_refusals_exit_2(detector, tmp_path, capsys, argv, message):
    path, _ = detector
    assert main(["pack", str(path), "-o", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and (argv[1] != "openvino:os_is_yx_isv16_osv61" or "did you mean" in err)
    assert not (tmp_path / "out").exists()


def test_nvdla_stays_the_default_and_old_manifests_validate(tmp_path, rng):
    _conv1d_gemm_model(tmp_path / "m.onnx", rng)
    m = pack_model(tmp_path / "m.onnx", tmp_path / "out", config=NV_FULL, progress=False)
    assert m["format"] == "nvdla" and m["weight_format"] == "nvdla:dc" and m["layers"][1]["kind"] == "dc"
    old = {k: v for k, v in m.items() if k != "weight_format"}
    validate_manifest({**old, "manifest_version": "1.1"})
    with pytest.raises(ValueError, match="winograd: an NVDLA-only option"):
        pack_model(tmp_path / "m.onnx", tmp_path / "x", weight_format="openvino:oiyx", winograd="auto")
    from npupack.bulk import pack_many

    with pytest.raises(ValueError, match="compress: an NVDLA-only option"):
        pack_many([tmp_path / "m.onnx"], tmp_path / "many", weight_format="openvino:oiyx", compress="on")
    assert not (tmp_path / "x").exists() and not (tmp_path / "many").exists()
