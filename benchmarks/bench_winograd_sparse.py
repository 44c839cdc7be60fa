"""NVDLA Winograd weights and sparse compression on ResNet-50's 3x3 shapes: npupack vs the NumPy
reference (tests/reference) vs np.copyto of the same bytes, single thread.
Run: python -m pytest benchmarks -k "winograd or compress"."""
import numpy as np
import pytest

from benchmarks.shapes import resnet50_conv_shapes
from npupack.nvdla import NV_FULL, compress_weights, decompress_weights, pack_weights
from tests.reference import nvdla as ref

IMPLS = ("npupack", "numpy", "memcpy")
SHAPES_3X3 = sorted({s for s in resnet50_conv_shapes() if s[2:] == (3, 3)})  # 64..512 channels
ES = {"int8": 1, "fp16": 2}


def _weights(shape, precision, zeros, seed=0):
    rng = np.random.default_rng(seed)
    if precision == "int8":
        w = rng.integers(-128, 128, shape, dtype=np.int8)
        w[w == 0] = 1
    else:
        w = (rng.standard_normal(shape) + 4).astype(np.float16)
    w[rng.random(shape) < zeros] = 0
    return w


def _copy(nbytes):
    dst, src = np.empty(nbytes, np.uint8), np.ones(nbytes, np.uint8)
    return lambda: np.copyto(dst, src)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("precision", ["int8", "fp16"])
@pytest.mark.parametrize("shape", SHAPES_3X3, ids=str)
def bench_winograd(measure, impl, precision, shape):
    w = _weights(shape, precision, 0.0)
    out = np.empty(pack_weights(w, kind="winograd").weight.size, np.uint8)
    atom, kpg = NV_FULL.atom_elements(precision), NV_FULL.kernels_per_group(precision)
    fn = {"npupack": lambda: pack_weights(w, kind="winograd", out=out),
          "numpy": lambda: ref.pack_winograd_vectorised(w, precision, atom=atom, kpg=kpg),
          "memcpy": _copy(out.size)}[impl]
    measure(f"winograd {precision} {shape}", impl, out.size, fn)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("zeros", [0.0, 0.5, 0.9], ids=lambda z: f"{int(z * 100)}%")
@pytest.mark.parametrize("precision", ["int8", "fp16"])
@pytest.mark.parametrize("shape", [(256, 256, 3, 3), (512, 512, 3, 3)], ids=str)
def bench_compress(measure, impl, precision, zeros, shape):
    """Compression of the packed DC stream; bytes = the uncompressed stream."""
    ws = pack_weights(_weights(shape, precision, zeros))
    stream = ws.weight[:ws.meaningful_bytes]
    group = ws.kernel_group_elements
    fn = {"npupack": lambda: compress_weights(stream, precision=precision, kernel_group_elements=group),
          "numpy": lambda: ref.compress_numpy(stream, ES[precision], group),
          "memcpy": _copy(stream.size)}[impl]
    measure(f"compress {precision} {shape} {int(zeros * 100)}% zeros", impl, stream.size, fn)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("zeros", [0.0, 0.5, 0.9], ids=lambda z: f"{int(z * 100)}%")
@pytest.mark.parametrize("precision", ["int8", "fp16"])
@pytest.mark.parametrize("shape", [(512, 512, 3, 3)], ids=str)
def bench_decompress(measure, impl, precision, zeros, shape):
    """Decompression back to the DC stream (unpacking compressed weights, npupack verify); bytes =
    the uncompressed stream."""
    ws = pack_weights(_weights(shape, precision, zeros))
    stream = ws.weight[:ws.meaningful_bytes]
    data, wmb, _ = compress_weights(stream, precision=precision, kernel_group_elements=ws.kernel_group_elements)
    n = stream.size // ES[precision]
    fn = {"npupack": lambda: decompress_weights(data, wmb, precision=precision, n_elements=n),
          "numpy": lambda: ref.decompress_numpy(data, wmb, ES[precision], n),
          "memcpy": _copy(stream.size)}[impl]
    measure(f"decompress {precision} {shape} {int(zeros * 100)}% zeros", impl, stream.size, fn)
