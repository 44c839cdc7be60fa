"""ONNX ingestion, the pack job and the command line, on small models built here and on the real
PP-OCRv4 detector."""
import hashlib
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from npupack.cli import main
from npupack.job import pack_model
from npupack.model import load_onnx
from npupack.nvdla import NV_FULL, Config, WeightSurfaces, pack_weights, quantize_weights, to_fp16, unpack_weights


def _read(out_dir, part):
    return None if part is None else np.fromfile(out_dir / part["file"], dtype=np.uint8)


def surfaces_from_manifest(entry, data, layer_shape, group, out_dir=None):
    """Rebuild WeightSurfaces from a manifest entry (what a consumer of the output would do);
    ``entry`` is a layer or, for deconvolution, one of its sets merged into the layer entry."""
    compressed = entry.get("encoding") == "compressed"
    return WeightSurfaces(weight=data, kind=entry["kind"], precision=entry["precision"], shape=tuple(layer_shape),
                          packed_shape=tuple(entry["packed_shape"]), kernel_groups=entry["kernel_groups"],
                          bytes_per_kernel=entry["bytes_per_kernel"], meaningful_bytes=entry["meaningful_bytes"],
                          config=Config.named("nv_full"), groups=group, post_extension=entry["post_extension"],
                          pixel_format=entry["pixel_format"], phase=tuple(entry["phase"]) if "phase" in entry else None,
                          stride=tuple(entry["strides"]),
                          wmb=_read(out_dir, entry["wmb"]) if compressed else None,
                          wgs=_read(out_dir, entry["wgs"]) if compressed else None)


def layer_surfaces(entry, out_dir, layer_shape, group):
    """All surfaces of a packed layer entry, read from ``out_dir`` (a tuple for deconvolution)."""
    if "sets" in entry:
        return tuple(surfaces_from_manifest({**entry, **s}, np.fromfile(out_dir / s["file"], dtype=np.uint8),
                                            layer_shape, group, out_dir) for s in entry["sets"])
    return surfaces_from_manifest(entry, np.fromfile(out_dir / entry["file"], dtype=np.uint8), layer_shape, group,
                                  out_dir)


def make_model(path, *, as_constant: bool, rng):
    """x -> Conv(w1 via initializer or Constant, bias) -> Conv(depthwise, groups=4) -> ConvTranspose."""
    w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b1 = rng.standard_normal(4).astype(np.float32)
    w2 = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    wt = rng.standard_normal((4, 2, 2, 2)).astype(np.float32)
    tensors = {n: numpy_helper.from_array(a, n) for n, a in (("w1", w1), ("b1", b1), ("w2", w2), ("wt", wt))}
    nodes, inits = [], []
    if as_constant:
        nodes += [helper.make_node("Constant", [], [n], value=t) for n, t in tensors.items()]
    else:
        inits = list(tensors.values())
    nodes += [
        helper.make_node("Conv", ["x", "w1", "b1"], ["y1"], name="stem", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["y1", "w2"], ["y2"], name="", group=4, pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["y2", "wt"], ["y3"], name="up", strides=[2, 2]),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y3", TensorProto.FLOAT, None)], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return w1, b1, w2, wt


@pytest.mark.parametrize("as_constant", [False, True], ids=["initializers", "constant-nodes"])
def test_load_onnx(tmp_path, rng, as_constant):
    path = tmp_path / "m.onnx"
    w1, b1, w2, wt = make_model(path, as_constant=as_constant, rng=rng)
    layers = load_onnx(path)
    assert [(layer.name, layer.op_type, layer.group) for layer in layers] == \
        [("stem", "Conv", 1), ("Conv_1", "Conv", 4), ("up", "ConvTranspose", 1)]
    stem = layers[0]
    assert np.array_equal(stem.weights, w1) and stem.weights.dtype == np.float32 and np.array_equal(stem.bias, b1)
    assert stem.strides == (2, 2) and stem.pads == (1, 1, 1, 1) and stem.dilations == (1, 1)
    assert np.array_equal(layers[1].weights, w2) and layers[1].bias is None
    assert np.array_equal(layers[2].weights, wt)


def test_load_onnx_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_onnx(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match="not a readable ONNX model"):
        load_onnx(bad)


def test_pack_job_and_rerun(tmp_path, rng):
    path = tmp_path / "m.onnx"
    w1, _, w2, wt = make_model(path, as_constant=True, rng=rng)
    out = tmp_path / "out"
    m = pack_model(path, out, config=NV_FULL, precision="int8", progress=False)
    assert m["summary"]["packed"] == 3 and m["summary"]["unsupported"] == 0 and m["summary"]["error"] == 0
    stem, dw, up = m["layers"]
    q, scales = quantize_weights(w1, mode="per_filter")
    assert stem["scales"] == [float(s) for s in scales] and stem["logical_shape"] == [4, 3, 3, 3]
    data = (out / stem["file"]).read_bytes()
    # the stem reads the model input with 3 channels: image-input weights for T_A8B8G8R8
    assert stem["kind"] == "image" and stem["pixel_format"] == "T_A8B8G8R8" and stem["packed_shape"] == [4, 12, 3, 1]
    assert len(data) == stem["size"] == 256 and hashlib.sha256(data).hexdigest() == stem["sha256"]
    assert stem["encoding"] == "uncompressed" and "wmb" not in stem
    ws = surfaces_from_manifest(stem, np.frombuffer(data, np.uint8), (4, 3, 3, 3), 1)
    assert np.array_equal(unpack_weights(ws), q)
    no_image = pack_model(path, tmp_path / "dc", config=NV_FULL, precision="int8", pixel_format=None, progress=False)
    assert no_image["layers"][0]["kind"] == "dc" and no_image["layers"][0]["size"] == 128
    assert dw["packed_shape"] == [4, 4, 3, 3] and dw["group"] == 4
    # ConvTranspose (C_in=4, K_out=2, 2x2, stride 2): four sets, quantised per output channel
    qt, st = quantize_weights(wt, mode="per_filter", kernel_axis=1)
    assert up["kind"] == "deconv" and len(up["scales"]) == 2 and np.allclose(up["scales"], st)
    assert [s["phase"] for s in up["sets"]] == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert up["packed_shape"] == [2, 4, 1, 1] and "file" not in up
    assert np.array_equal(unpack_weights(layer_surfaces(up, out, wt.shape, 1)), qt)
    assert json.loads((out / "manifest.json").read_text()) == m
    # Re-running into the same directory is safe and gives the same bytes; no temporary files remain.
    m2 = pack_model(path, out, config=NV_FULL, precision="int8", progress=False)
    assert [layer.get("sha256") for layer in m2["layers"]] == [layer.get("sha256") for layer in m["layers"]]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_pack_job_unsupported_deconvolution(tmp_path, rng):
    wt = rng.standard_normal((4, 1, 2, 2)).astype(np.float32)
    nodes = [helper.make_node("ConvTranspose", ["x", "wt"], ["y"], name="up", strides=[2, 2], group=4)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(wt, "wt")])
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(graph), path)
    m = pack_model(path, tmp_path / "o", config=NV_FULL, progress=False)
    assert m["layers"][0]["status"] == "unsupported" and "grouped deconvolution" in m["layers"][0]["reason"]


def test_failed_layer_leaves_no_file(tmp_path):
    w = np.ones((2, 2, 1, 1), np.float32)
    w[0, 0, 0, 0] = np.nan
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="bad")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w")])
    path = tmp_path / "nan.onnx"
    onnx.save(helper.make_model(graph), path)
    out = tmp_path / "out"
    for precision in ("fp16", "int8"):
        m = pack_model(path, out, config=NV_FULL, precision=precision, progress=False)
        assert m["layers"][0]["status"] == "error" and "NaN" in m["layers"][0]["reason"]
        assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]
    assert main(["pack", str(path), "-o", str(out), "--precision", "fp16", "--no-progress"]) == 1


def test_cli_errors(tmp_path, capsys):
    assert main(["pack", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o")]) == 2
    assert "no such model file" in capsys.readouterr().err
    assert main(["pack", str(tmp_path / "missing.onnx"), "--target", "nv_tiny", "-o", str(tmp_path / "o")]) == 2
    assert "unknown NVDLA configuration" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["pack", "x.onnx", "--precision", "int4", "-o", "o"])
    assert main(["explain", "horizon:NHWC", "--dtype", "int9", "--shape", "1,2,3,4"]) == 2
    assert "dtype: 'int9' is neither an hbDNNDataType name" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["explain", "b_fs_yx_fsv16", "--shape", "1,16,2,2", "--limit", "-1"])
    assert "--limit: expected a count >= 0, got '-1'" in capsys.readouterr().err


def test_cli_output_directory_that_is_a_file(tmp_path, rng, capsys):
    path = tmp_path / "m.onnx"
    make_model(path, as_constant=False, rng=rng)
    (tmp_path / "taken").write_text("a file")
    assert main(["pack", str(path), "--precision", "int8", "-o", str(tmp_path / "taken")]) == 2
    assert "exists and is not a directory" in capsys.readouterr().err
    assert main(["pack", str(path), "--precision", "int8", "-o", str(tmp_path / "taken" / "sub")]) == 2
    assert "npupack: error:" in capsys.readouterr().err  # an OSError from mkdir, reported, no traceback
    assert (tmp_path / "taken").read_text() == "a file"


# ---------------------------------------------------------------- the real model


@pytest.mark.parametrize("precision, winograd, compress", [("int8", "off", "off"), ("int16", "auto", "auto"),
                                                          ("fp16", "auto", "on")])
def test_real_model_every_layer_round_trips(ppocr_det_path, precision, winograd, compress, tmp_path):
    layers = load_onnx(ppocr_det_path)
    assert sum(layer.op_type == "Conv" for layer in layers) == 62
    m = pack_model(ppocr_det_path, tmp_path, config=NV_FULL, precision=precision, winograd=winograd,
                   compress=compress, progress=False)
    assert m["summary"]["packed"] == 64 and m["summary"]["error"] == 0 and m["summary"]["unsupported"] == 0
    kinds = [entry["kind"] for entry in m["layers"]]
    assert kinds.count("deconv") == 2 and kinds.count("image") == 1
    assert kinds.count("winograd") == (5 if winograd == "auto" else 0)  # the five 24x96x3x3 stride-1 layers
    by_name = {layer.name: layer for layer in layers}
    encodings = set()
    for entry in m["layers"]:
        layer = by_name[entry["name"]]
        axis = 1 if layer.op_type == "ConvTranspose" else 0
        if precision == "fp16":
            logical = to_fp16(layer.weights)
        else:
            logical, scales = quantize_weights(layer.weights, precision=precision, mode="per_filter",
                                               kernel_axis=axis)
            assert np.allclose(entry["scales"], scales)
        for part in entry.get("sets", [entry]):
            data = np.fromfile(tmp_path / part["file"], dtype=np.uint8)
            assert data.size == part["size"] and data.size % 128 == 0
            assert hashlib.sha256(data).hexdigest() == part["sha256"]
            encodings.add(part["encoding"])
        ws = layer_surfaces(entry, tmp_path, layer.weights.shape, layer.group)
        if entry["kind"] == "winograd":
            # fp16: the float32 weights enter the transform unrounded (docs/nvdla.md §9.5)
            kw = {"scale": entry["winograd_scale"]} if precision == "int16" else {}
            want = pack_weights(layer.weights if precision == "fp16" else logical, kind="winograd", **kw)
            assert np.array_equal(unpack_weights(ws, logical=False), unpack_weights(want, logical=False))
            continue
        assert np.array_equal(unpack_weights(ws).view(np.uint8), logical.view(np.uint8)), entry["name"]
        if entry.get("encoding") == "uncompressed":
            data = np.fromfile(tmp_path / entry["file"], dtype=np.uint8)
            assert not data[entry["meaningful_bytes"]:].any()
    assert encodings == ({"uncompressed"} if compress == "off" else
                         {"compressed"} if compress == "on" else {"compressed", "uncompressed"})


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_real_model_pruned_compression(ppocr_det_path, precision, record_property):
    """Every layer of the real model at 0 %, 50 % and 90 % magnitude sparsity: compressed and
    uncompressed surfaces round-trip; the compressed sizes are reported (and must shrink as
    sparsity grows)."""
    from npupack.nvdla import analyze_sparsity, prune

    layers = [layer for layer in load_onnx(ppocr_det_path) if layer.op_type == "Conv" and layer.group == 1]
    totals = {}
    for sparsity in (0.0, 0.5, 0.9):
        plain = compressed = 0
        for layer in layers:
            w = prune(layer.weights, sparsity, precision=precision)
            q = to_fp16(w) if precision == "fp16" else quantize_weights(w, mode="per_filter")[0]
            ws = pack_weights(q, compress=True)
            assert np.array_equal(unpack_weights(ws).view(np.uint8), q.view(np.uint8))
            report = analyze_sparsity(pack_weights(q))
            assert report.compressed_bytes == ws.total_bytes
            plain += report.uncompressed_bytes
            compressed += ws.total_bytes
        totals[sparsity] = (plain, compressed)
        record_property(f"{precision}_sparsity_{sparsity}", f"{plain} -> {compressed} bytes")
    assert totals[0.0][1] > totals[0.0][0] > totals[0.5][1] > totals[0.9][1]


def test_cli_main_job_on_real_model(ppocr_det_path, tmp_path, capsys):
    assert main(["pack", str(ppocr_det_path), "--target", "nv_full", "--precision", "int8", "-o", str(tmp_path),
                 "--no-progress"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "64 layers" in line and "Conv: 62 packed; ConvTranspose: 2 packed;" in line and "unsupported" not in line
    assert main(["pack", str(ppocr_det_path), "--precision", "fp16", "--winograd", "auto", "--compress", "auto",
                 "-o", str(tmp_path / "wg"), "--no-progress"]) == 0
    manifest = json.loads((tmp_path / "wg" / "manifest.json").read_text())
    assert manifest["winograd"] == "auto" and manifest["compress"] == "auto"
    assert main(["pack", str(ppocr_det_path), "--target", "nv_small", "--compress", "on", "-o", str(tmp_path / "x"),
                 "--no-progress"]) == 2
    assert "compression" in capsys.readouterr().err
    assert main(["inspect", str(ppocr_det_path)]) == 0
    assert "64 convolution layers" in capsys.readouterr().out


def test_real_model_first_layer_as_image_input(ppocr_det_path):
    """PP-OCRv4's first layer (16x3x3x3, stride 2) packed as image-input weights for every RGB
    pixel format equals the loop reference of docs/nvdla.md §8."""
    from npupack.nvdla import PIXEL_FORMATS, post_extension_factor, quantize_weights
    from tests.reference import nvdla as ref

    first = load_onnx(ppocr_det_path)[0]
    assert first.reads_graph_input and first.weights.shape == (16, 3, 3, 3) and first.strides == (2, 2)
    q, _ = quantize_weights(first.weights, mode="per_filter")
    for name, fmt in PIXEL_FORMATS.items():
        if fmt.comps < 3 or fmt.kind == "fp16":
            continue
        precision = "int8" if fmt.kind == "8bit" else "int16"
        w = q if precision == "int8" else q.astype(np.int16)
        ws = pack_weights(w, kind="image", pixel_format=name, stride=(2, 2), precision=precision)
        f = post_extension_factor(fmt.comps, 3, 3, 2, 64)
        kpg = NV_FULL.kernels_per_group(precision)
        assert ws.post_extension == f
        assert np.array_equal(ws.weight, ref.pack_image_weights(w, fmt.comps, f, kpg=kpg, cb=64, tail=128)), name


@pytest.mark.parametrize("options, error, match", [
    (dict(config="nv_full"), TypeError, "config: expected an npupack.nvdla.Config, got str"),
    (dict(config=None), TypeError, "config: expected an npupack.nvdla.Config, got NoneType"),
    (dict(quantize="per_tensor"), ValueError, "quantize: expected one of \\('per_kernel', 'per_filter'\\), got"),
    (dict(quantize=None), ValueError, "quantize: expected one of"),
    (dict(pixel_format="RGBA"), ValueError, "pixel_format: expected 'auto', None or a name of"),
    (dict(pixel_format=3), ValueError, "pixel_format: expected 'auto', None or a name of"),
    (dict(pixel_format=["T_R8"]), ValueError, "pixel_format: expected 'auto', None or a name of"),
    (dict(winograd=None), ValueError, "winograd: expected one of \\('off', 'auto'\\)"),
    (dict(compress={}), ValueError, "compress: expected one of \\('off', 'on', 'auto'\\)"),
    (dict(image="yes"), TypeError, "image: expected True or False"),
    (dict(progress=1), TypeError, "progress: expected True or False"),
])
def test_pack_job_checks_its_options_first(tmp_path, rng, options, error, match):
    """Each option is checked before the model is read or anything is written. A bad quantize used
    to fail every layer one by one, an unknown pixel format raised KeyError in the first image
    layer, and a config that is not a Config raised AttributeError."""
    path = tmp_path / "m.onnx"
    make_model(path, as_constant=False, rng=rng)
    with pytest.raises(error, match=match):
        pack_model(path, tmp_path / "out", **{"config": NV_FULL, "progress": False, **options})
    assert not (tmp_path / "out").exists()
