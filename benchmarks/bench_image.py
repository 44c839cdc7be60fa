"""SDP operands and the memory image: packing every bias / batch-norm operand and assembling the
whole-model image (ResNet-50 int8 shapes, the real PP-OCRv4 detector in fp16) - npupack vs a NumPy
implementation vs np.copyto of the image's bytes, single thread."""
import numpy as np
import pytest

from benchmarks.shapes import resnet50_conv_shapes
from npupack.nvdla import NV_FULL, MemoryPlan, pack_batchnorm, pack_bias, pack_weights
from npupack.nvdla.rules import alignment_rules

IMPLS = ("npupack", "numpy", "memcpy")


def _resnet_surfaces():
    """Packed int8 weights, int16 bias + rescale pairs and int16 batch-norm pairs of ResNet-50."""
    rng = np.random.default_rng(0)
    items = []
    for i, shape in enumerate(resnet50_conv_shapes()):
        k = shape[0]
        w = rng.integers(-128, 128, shape, dtype=np.int8)
        items.append((f"conv{i}/weight", "weight", pack_weights(w).weight))
        b = rng.integers(-2**15, 2**15, k, dtype=np.int16)
        s = rng.integers(1, 2**15, k, dtype=np.int16)
        items.append((f"conv{i}/sdp", "bias", (b, s)))
        items.append((f"bn{i}/sdp", "batchnorm", (b, s)))
    return items


def _operands(items):
    out = []
    for name, kind, payload in items:
        if kind == "bias":
            out.append((name, kind, pack_bias(payload[0], mul=payload[1], precision="int8").data))
        elif kind == "batchnorm":
            out.append((name, kind, pack_batchnorm(*payload, precision="int8").data))
        else:
            out.append((name, kind, payload))
    return out


def _numpy_operand(a, b, e=32):
    """Per-channel pair by NumPy alone: interleave, pad to whole atoms."""
    pair = np.stack([a, b], axis=-1).reshape(-1).view(np.uint8)
    size = -(-a.size // e) * e * 4
    return np.concatenate([pair, np.zeros(size - pair.size, np.uint8)])


def _numpy_image(surfaces):
    """Offsets by the alignment table, then one zeroed buffer and slice copies."""
    rules = alignment_rules(NV_FULL)
    offsets, end = [], 0
    for _, kind, data in surfaces:
        rule = rules[kind]
        start = -(-end // rule.address) * rule.address
        offsets.append(start)
        end = start + -(-data.size // (rule.size or 1)) * (rule.size or 1)
    img = np.zeros(end, np.uint8)
    for off, (_, _, data) in zip(offsets, surfaces):
        img[off:off + data.size] = data
    return img


def _plan(surfaces):
    plan = MemoryPlan(NV_FULL)
    for name, kind, data in surfaces:
        plan.add(name, data, kind=kind)
    return plan


@pytest.fixture(scope="module")
def resnet():
    items = _resnet_surfaces()
    surfaces = _operands(items)
    return items, surfaces, _plan(surfaces).nbytes


@pytest.mark.parametrize("impl", IMPLS)
def bench_resnet50_image_int8(measure, impl, resnet):
    """Planning and assembling the whole-model image from packed surfaces; target < 2x memcpy."""
    _, surfaces, nbytes = resnet
    out = np.empty(nbytes, np.uint8)
    src = np.ones(nbytes, np.uint8)
    fn = {"npupack": lambda: _plan(surfaces).image(out=out),
          "numpy": lambda: _numpy_image(surfaces),
          "memcpy": lambda: np.copyto(out, src)}[impl]
    measure("image resnet50 int8 (plan + assemble)", impl, nbytes, fn)


@pytest.mark.parametrize("impl", IMPLS)
def bench_resnet50_operands_int8(measure, impl, resnet):
    """Packing every bias+rescale and batch-norm pair of ResNet-50 (INT8 pipeline, int16)."""
    items, surfaces, _ = resnet
    pairs = [payload for _, kind, payload in items if kind != "weight"]
    nbytes = sum(d.size for _, kind, d in surfaces if kind != "weight")
    outs = [np.empty(_numpy_operand(*p).size, np.uint8) for p in pairs]
    srcs = [np.ones(o.size, np.uint8) for o in outs]
    fn = {"npupack": lambda: [pack_bias(a, mul=b, precision="int8", out=o) for (a, b), o in zip(pairs, outs)],
          "numpy": lambda: [_numpy_operand(a, b) for a, b in pairs],
          "memcpy": lambda: [np.copyto(o, s) for o, s in zip(outs, srcs)]}[impl]
    measure("sdp operands resnet50 int8 (106 pairs)", impl, nbytes, fn)


@pytest.mark.parametrize("impl", IMPLS)
def bench_ppocr_det_image_fp16(measure, impl, ppocr_layers):
    """The real model: fp16 weights, fp16 biases, plan + assemble."""
    from npupack.nvdla import to_fp16

    surfaces = []
    for i, layer in enumerate(ppocr_layers):
        surfaces.append((f"l{i}/weight", "weight", pack_weights(layer.weights, groups=layer.group).weight))
        if layer.bias is not None:
            surfaces.append((f"l{i}/sdp", "bias", pack_bias(layer.bias, precision="fp16").data))
    nbytes = _plan(surfaces).nbytes
    out, src = np.empty(nbytes, np.uint8), np.ones(nbytes, np.uint8)
    biases = [(layer.bias, to_fp16(layer.bias)) for layer in ppocr_layers if layer.bias is not None]
    fn = {"npupack": lambda: ([pack_bias(b, precision="fp16") for b, _ in biases], _plan(surfaces).image(out=out)),
          "numpy": lambda: ([np.concatenate([h.view(np.uint8), np.zeros(-h.size % 16 * 2, np.uint8)])
                             for _, h in biases], _numpy_image(surfaces)),
          "memcpy": lambda: np.copyto(out, src)}[impl]
    measure("image ppocr-det fp16 (biases + plan + assemble)", impl, nbytes, fn)
