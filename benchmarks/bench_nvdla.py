"""NVDLA packing throughput: npupack vs the NumPy reference (tests/reference) vs np.copyto of the
same number of bytes, single thread. Run: python -m pytest benchmarks"""
import numpy as np
import pytest

from benchmarks.shapes import resnet50_conv_shapes
from npupack.nvdla import pack_feature, pack_weights, quantize_weights
from tests.reference import nvdla as ref

IMPLS = ("npupack", "numpy", "memcpy")


def _weights(shapes, precision, seed=0):
    rng = np.random.default_rng(seed)
    if precision == "int8":
        return [rng.integers(-128, 128, s, dtype=np.int8) for s in shapes]
    return [rng.standard_normal(s).astype(np.float16) for s in shapes]


def _dc_runner(impl, ws):
    kpg = {1: 32, 2: 16}[ws[0].dtype.itemsize]
    outs = [np.empty(pack_weights(w).weight.size, np.uint8) for w in ws]
    srcs = [np.ones(o.size, np.uint8) for o in outs]
    if impl == "npupack":
        return lambda: [pack_weights(w, out=o) for w, o in zip(ws, outs)]
    if impl == "numpy":
        return lambda: [ref.pack_dc_vectorised(w, kpg=kpg, cb=64, tail=128) for w in ws]
    return lambda: [np.copyto(o, s) for o, s in zip(outs, srcs)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("precision", ["int8", "fp16"])
def bench_dc_resnet50_all_layers(measure, impl, precision):
    ws = _weights(resnet50_conv_shapes(), precision)
    nbytes = sum(pack_weights(w).weight.size for w in ws)
    measure(f"dc resnet50 53 layers {precision}", impl, nbytes, _dc_runner(impl, ws))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", [(512, 512, 3, 3), (2048, 512, 1, 1), (64, 3, 7, 7)], ids=str)
def bench_dc_resnet50_layer_int8(measure, impl, shape):
    ws = _weights([shape], "int8")
    measure(f"dc int8 {shape}", impl, pack_weights(ws[0]).weight.size, _dc_runner(impl, ws))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("precision", ["int8", "fp16"])
def bench_dc_ppocr_det_all_layers(measure, impl, precision, ppocr_layers):
    if precision == "int8":
        logical = [quantize_weights(layer.weights, mode="per_filter")[0] for layer in ppocr_layers]
    else:
        logical = [layer.weights.astype(np.float16) for layer in ppocr_layers]
    groups = [layer.group for layer in ppocr_layers]
    outs = [np.empty(pack_weights(w, groups=g).weight.size, np.uint8) for w, g in zip(logical, groups)]
    nbytes = sum(o.size for o in outs)
    kpg = 32 if precision == "int8" else 16
    if impl == "npupack":
        fn = lambda: [pack_weights(w, groups=g, out=o) for w, g, o in zip(logical, groups, outs)]  # noqa: E731
    elif impl == "numpy":
        fn = lambda: [ref.pack_dc_vectorised(ref.densify_groups(w, g), kpg=kpg, cb=64, tail=128)  # noqa: E731
                      for w, g in zip(logical, groups)]
    else:
        srcs = [np.ones(o.size, np.uint8) for o in outs]
        fn = lambda: [np.copyto(o, s) for o, s in zip(outs, srcs)]  # noqa: E731
    measure(f"dc ppocr-det {len(logical)} layers {precision}", impl, nbytes, fn)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("precision", ["int8", "fp16"])
@pytest.mark.parametrize("shape", [(1, 256, 56, 56), (8, 64, 224, 224)], ids=str)
def bench_feature(measure, impl, precision, shape):
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, shape, dtype=np.int8) if precision == "int8" else \
        rng.standard_normal(shape).astype(np.float16)
    out = np.empty(pack_feature(x).size, np.uint8)
    if impl == "npupack":
        fn = lambda: pack_feature(x, out=out)  # noqa: E731
    elif impl == "numpy":
        fn = lambda: ref.pack_feature_vectorised(x, atom_bytes=32)  # noqa: E731
    else:
        src = np.ones(out.size, np.uint8)
        fn = lambda: np.copyto(out, src)  # noqa: E731
    measure(f"feature {precision} {shape}", impl, out.size, fn)


def bench_per_call_overhead_16x16x3x3(measure):
    w = np.ones((16, 16, 3, 3), np.int8)
    out = np.empty(pack_weights(w).weight.size, np.uint8)
    measure("dc int8 (16,16,3,3) per call", "call", out.size, lambda: pack_weights(w, out=out))
