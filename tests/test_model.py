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


def surfaces_from_manifest(entry, data, layer_shape, group):
    """Rebuild WeightSurfaces from a manifest entry (what a consumer of the output would do)."""
    return WeightSurfaces(weight=data, kind=entry["kind"], precision=entry["precision"], shape=tuple(layer_shape),
                          packed_shape=tuple(entry["packed_shape"]), kernel_groups=entry["kernel_groups"],
                          bytes_per_kernel=entry["bytes_per_kernel"], meaningful_bytes=entry["meaningful_bytes"],
                          config=Config.named("nv_full"), groups=group, post_extension=entry["post_extension"],
                          pixel_format=entry["pixel_format"])


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
    w1, _, w2, _ = make_model(path, as_constant=True, rng=rng)
    out = tmp_path / "out"
    m = pack_model(path, out, config=NV_FULL, precision="int8", progress=False)
    assert m["summary"]["packed"] == 2 and m["summary"]["unsupported"] == 1 and m["summary"]["error"] == 0
    stem, dw, up = m["layers"]
    assert up["status"] == "unsupported" and "ConvTranspose" in up["reason"]
    q, scales = quantize_weights(w1, mode="per_filter")
    assert stem["scales"] == [float(s) for s in scales] and stem["logical_shape"] == [4, 3, 3, 3]
    data = (out / stem["file"]).read_bytes()
    # the stem reads the model input with 3 channels: image-input weights for T_A8B8G8R8
    assert stem["kind"] == "image" and stem["pixel_format"] == "T_A8B8G8R8" and stem["packed_shape"] == [4, 12, 3, 1]
    assert len(data) == stem["size"] == 256 and hashlib.sha256(data).hexdigest() == stem["sha256"]
    ws = surfaces_from_manifest(stem, np.frombuffer(data, np.uint8), (4, 3, 3, 3), 1)
    assert np.array_equal(unpack_weights(ws), q)
    no_image = pack_model(path, tmp_path / "dc", config=NV_FULL, precision="int8", pixel_format=None, progress=False)
    assert no_image["layers"][0]["kind"] == "dc" and no_image["layers"][0]["size"] == 128
    assert dw["packed_shape"] == [4, 4, 3, 3] and dw["group"] == 4
    assert json.loads((out / "manifest.json").read_text()) == m
    # Re-running into the same directory is safe and gives the same bytes; no temporary files remain.
    m2 = pack_model(path, out, config=NV_FULL, precision="int8", progress=False)
    assert [layer.get("sha256") for layer in m2["layers"]] == [layer.get("sha256") for layer in m["layers"]]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


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


# ---------------------------------------------------------------- the real model


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_real_model_every_layer_round_trips(ppocr_det_path, precision, tmp_path):
    layers = load_onnx(ppocr_det_path)
    assert sum(layer.op_type == "Conv" for layer in layers) == 62
    m = pack_model(ppocr_det_path, tmp_path, config=NV_FULL, precision=precision, progress=False)
    assert m["summary"]["packed"] == 62 and m["summary"]["error"] == 0
    assert {layer["name"] for layer in m["layers"] if layer["status"] == "unsupported"} == \
        {layer.name for layer in layers if layer.op_type == "ConvTranspose"}
    by_name = {layer.name: layer for layer in layers}
    for entry in m["layers"]:
        if entry["status"] != "packed":
            continue
        layer = by_name[entry["name"]]
        data = np.fromfile(tmp_path / entry["file"], dtype=np.uint8)
        assert data.size == entry["size"] and data.size % 128 == 0
        if precision == "fp16":
            logical = to_fp16(layer.weights)
        else:
            logical, scales = quantize_weights(layer.weights, precision=precision, mode="per_filter")
            assert np.allclose(entry["scales"], scales)
        ws = surfaces_from_manifest(entry, data, layer.weights.shape, layer.group)
        assert np.array_equal(unpack_weights(ws).view(np.uint8), logical.view(np.uint8)), entry["name"]
        assert not data[entry["meaningful_bytes"]:].any()


def test_cli_main_job_on_real_model(ppocr_det_path, tmp_path, capsys):
    assert main(["pack", str(ppocr_det_path), "--target", "nv_full", "--precision", "int8", "-o", str(tmp_path),
                 "--no-progress"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "64 conv layers" in line and "62 packed" in line and "2 unsupported" in line
    assert main(["inspect", str(ppocr_det_path)]) == 0
    assert "64 convolution layers" in capsys.readouterr().out


def test_real_model_first_layer_as_image_input(ppocr_det_path):
    """PP-OCRv4's first layer (16x3x3x3, stride 2) packed as image-input weights for every RGB
    pixel format equals the loop reference of nvdla.md 8."""
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
