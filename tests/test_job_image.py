"""The pack job's SDP operands and its single memory image (--image): a small model with a
biased convolution, a batch-norm and a transposed convolution, with and without calibration, and
the real PP-OCRv4 detector read back surface by surface from image.bin."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from npupack.cli import main
from npupack.job import pack_model
from npupack.model import load_batchnorms, load_onnx
from npupack.nvdla import (NV_FULL, Config, SdpOperand, WeightSurfaces, check_alignment, factorize_scales,
                           quantize_bias, quantize_weights, to_fp16, unpack_sdp, unpack_weights)


def make_model(path, rng):
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    gamma, beta = rng.uniform(0.5, 2, 8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    mean, var = rng.standard_normal(8).astype(np.float32), rng.uniform(0.5, 2, 8).astype(np.float32)
    wt = rng.standard_normal((8, 4, 2, 2)).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for n, a in (("w", w), ("b", b), ("g", gamma), ("be", beta), ("m", mean),
                                                         ("v", var), ("wt", wt))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"], name="bn", epsilon=1e-3),
             helper.make_node("ConvTranspose", ["n", "wt"], ["y"], name="up", strides=[2, 2])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return dict(w=w, b=b, gamma=gamma, beta=beta, mean=mean, var=var, wt=wt)


def read(out_dir, part):
    return np.fromfile(out_dir / part["file"], np.uint8)[part["offset"]:part["offset"] + part["size"]]


def operand_from(entry, data):
    """Rebuild an SdpOperand from its manifest entry (per channel)."""
    sdp = entry["sdp"]
    return SdpOperand(data=data, registers=None, use=sdp["use"], mode=sdp["mode"], precision=sdp["precision"],
                      components=sdp["components"], data_size=sdp["data_size"],
                      elements_per_atom=NV_FULL.atom_elements(sdp["precision"]), shape=tuple(sdp["shape"]),
                      config=NV_FULL)


@pytest.mark.parametrize("image", [False, True])
def test_fp16_operands(tmp_path, rng, image):
    p = make_model(tmp_path / "m.onnx", rng)
    out = tmp_path / "out"
    m = pack_model(tmp_path / "m.onnx", out, config=NV_FULL, precision="fp16", image=image, progress=False)
    conv, up = m["layers"]
    assert np.array_equal(unpack_sdp(operand_from(conv, read(out, conv["sdp"]))).view(np.uint16),
                          to_fp16(p["b"]).view(np.uint16))
    assert "sdp" not in up  # no bias
    (bn,) = m["batchnorms"]
    alu, mul = unpack_sdp(operand_from(bn, read(out, bn["sdp"])))
    sigma = np.sqrt(p["var"].astype(np.float64) + 1e-3)
    want_mul = p["gamma"] / sigma
    assert np.allclose(mul.astype(np.float64), want_mul, rtol=1e-3)
    # (x + alu) * mul == (x - mean) * gamma / sigma + beta
    x = rng.standard_normal(8)
    assert np.allclose((x + alu.astype(np.float64)) * want_mul, (x - p["mean"]) * p["gamma"] / sigma + p["beta"],
                       atol=2e-2)
    assert (out / "image.bin").exists() == image
    if image:
        names = [s["name"] for s in m["image"]["surfaces"]]
        assert names[0].endswith("/weight") and any(n.endswith(".sdp") for n in names)
        for s in m["image"]["surfaces"]:
            check_alignment(s["kind"], address=s["address"])


def test_int8_operands_need_calibration(tmp_path, rng):
    p = make_model(tmp_path / "m.onnx", rng)
    m = pack_model(tmp_path / "m.onnx", tmp_path / "a", config=NV_FULL, precision="int8", progress=False)
    assert m["layers"][0]["sdp"]["status"] == "skipped" and "calibration" in m["layers"][0]["sdp"]["reason"]
    assert m["batchnorms"][0]["sdp"]["status"] == "skipped"
    table = {"x": {"scale": 0.02}, "c": {"min": -6.0, "max": 4.0}, "n": {"scale": 0.05}, "y": {"scale": 0.1}}
    (tmp_path / "cal.json").write_text(json.dumps(table))
    out = tmp_path / "b"
    m = pack_model(tmp_path / "m.onnx", out, config=NV_FULL, precision="int8", calibration=tmp_path / "cal.json",
                   image=True, progress=False)
    conv, up = m["layers"]
    _, sw = quantize_weights(p["w"], mode="per_filter")
    q, left = quantize_bias(p["b"], input_scale=0.02, weight_scales=sw)
    n, right = factorize_scales((np.float32(0.02) * sw / np.float32(6.0 / 127)).astype(np.float32))
    got_b, got_s = unpack_sdp(operand_from(conv, read(out, conv["sdp"])))
    assert np.array_equal(got_b, q) and np.array_equal(got_s, n)
    assert (conv["sdp"]["bias_left_shift"], conv["sdp"]["rescale_truncate"]) == (left, right)
    assert conv["sdp"]["use"] == "bias_rescale" and up["sdp"]["use"] == "bias_rescale"
    assert m["batchnorms"][0]["sdp"]["status"] == "packed"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": {"scale": -1}}))
    with pytest.raises(ValueError, match="finite and > 0"):
        pack_model(tmp_path / "m.onnx", tmp_path / "c", config=NV_FULL, precision="int8", calibration=bad,
                   progress=False)


def image_surfaces(image, out_dir, entry, layer, cfg, part):
    """WeightSurfaces of one surface (or deconvolution set) read from the image."""
    compressed = part["encoding"] == "compressed"
    return WeightSurfaces(
        weight=image[part["offset"]:part["offset"] + part["size"]], kind=entry["kind"], precision=entry["precision"],
        shape=tuple(layer.weights.shape), packed_shape=tuple(entry["packed_shape"]),
        kernel_groups=entry["kernel_groups"], bytes_per_kernel=entry["bytes_per_kernel"],
        meaningful_bytes=entry["meaningful_bytes"], config=cfg, groups=layer.group,
        post_extension=entry["post_extension"], pixel_format=entry["pixel_format"],
        phase=tuple(part["phase"]) if "phase" in part else None, stride=tuple(entry["strides"]),
        wmb=read(out_dir, part["wmb"]) if compressed else None, wgs=read(out_dir, part["wgs"]) if compressed else None)


@pytest.mark.parametrize("precision, compress", [("int8", "auto"), ("fp16", "on")])
def test_real_model_image_round_trips(ppocr_det_path, tmp_path, precision, compress):
    """Every surface of the real model read back from image.bin at its manifest offset unpacks
    to its logical tensor; every start address and size honours the alignment table."""
    m = pack_model(ppocr_det_path, tmp_path, config=NV_FULL, precision=precision, compress=compress, image=True,
                   progress=False)
    assert m["summary"]["packed"] == 64 and m["summary"]["error"] == 0
    image = np.fromfile(tmp_path / "image.bin", np.uint8)
    assert image.size == m["image"]["nbytes"]
    for s in m["image"]["surfaces"]:
        check_alignment(s["kind"], address=s["address"], **({"size": s["reserved"]} if s["kind"] in (
            "weight", "weight_compressed", "wmb", "wgs") else {}))
    spans = sorted((s["offset"], s["offset"] + s["reserved"]) for s in m["image"]["surfaces"])
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    layers = {layer.name: layer for layer in load_onnx(ppocr_det_path)}
    cfg = Config.named("nv_full")
    for entry in m["layers"]:
        layer = layers[entry["name"]]
        axis = 1 if layer.op_type == "ConvTranspose" else 0
        logical = to_fp16(layer.weights) if precision == "fp16" else \
            quantize_weights(layer.weights, mode="per_filter", kernel_axis=axis)[0]

        args = (image, tmp_path, entry, layer, cfg)
        ws = tuple(image_surfaces(*args, s) for s in entry["sets"]) if "sets" in entry else image_surfaces(*args, entry)
        assert np.array_equal(unpack_weights(ws).view(np.uint8), logical.view(np.uint8)), entry["name"]
        if precision == "fp16" and layer.bias is not None:
            got = unpack_sdp(operand_from(entry, read(tmp_path, entry["sdp"])))
            assert np.array_equal(got.view(np.uint16), to_fp16(layer.bias).view(np.uint16))
    assert len(m["batchnorms"]) == len(load_batchnorms(ppocr_det_path)) == 3


def test_cli_image(ppocr_det_path, tmp_path, capsys):
    assert main(["pack", str(ppocr_det_path), "--precision", "fp16", "--image", "-o", str(tmp_path),
                 "--no-progress"]) == 0
    assert "image.bin" in capsys.readouterr().out
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["image"]["file"] == "image.bin" and sorted(p.name for p in tmp_path.iterdir()) == [
        "image.bin", "manifest.json"]
