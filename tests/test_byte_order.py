"""Big-endian input: every packed layout stores multi-byte elements little-endian (docs/design.md §6.1,
docs/nvdla.md §2.1, docs/openvino.md), so a big-endian array must pack to the same bytes as its
little-endian copy (the same values), and unpacking into a big-endian dtype must give the same
values. The little-endian path is checked against the NumPy references in the other test files."""
import numpy as np
import pytest

import npupack
from npupack import horizon, kneron, nvdla
from npupack import openvino as ov
from tests.reference import blocked as ref_blocked
from tests.reference import nvdla as ref

RNG = np.random.default_rng(11)


def big(a):
    b = a.astype(a.dtype.newbyteorder(">"))
    assert b.dtype.byteorder == ">" and np.array_equal(b, a)
    return b


def same_bytes(a, b):
    return np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


@pytest.mark.parametrize("dtype", [np.int16, np.uint16, np.float16, np.float32, np.int32, np.float64])
def test_generic_layouts(dtype):
    x = RNG.integers(-300, 300, (2, 20, 3, 5)).astype(dtype)
    for layout in ("NCHW16c", "nChw8c", "NHWC"):
        assert same_bytes(npupack.pack(big(x), layout), npupack.pack(x, layout))
    lay = npupack.Layout.parse("NCHW16c")
    tiles = [(t.dim, t.size, None) for t in lay.tiles]
    assert same_bytes(npupack.pack(big(x), lay), ref_blocked.pack_transpose(x, lay.logical, lay.outer, tiles))
    if np.dtype(dtype).itemsize <= 2 or dtype == np.float32:
        assert same_bytes(ov.pack(big(x), "b_fs_yx_fsv16", pad_lo=(0, 1, 1, 0)),
                          ov.pack(x, "b_fs_yx_fsv16", pad_lo=(0, 1, 1, 0)))
    buf = npupack.pack(x, "NCHW16c", pad_value=7)
    assert same_bytes(npupack.pack(big(x), "NCHW16c", pad_value=7), buf)
    back = npupack.unpack(buf, "NCHW16c", x.shape, np.dtype(dtype).newbyteorder(">"))
    assert np.array_equal(back, x)


@pytest.mark.parametrize("dtype", [np.int16, np.float16, np.float32])
def test_nvdla_weights_and_feature(dtype):
    w = RNG.integers(-300, 300, (20, 8, 3, 3)).astype(dtype)
    precision = None if dtype != np.float32 else "fp16"
    expect = nvdla.pack_weights(w, precision=precision).weight
    assert same_bytes(nvdla.pack_weights(big(w), precision=precision).weight, expect)
    assert same_bytes(nvdla.pack_weights(big(w), precision=precision).weight, expect)  # the cached plan too
    assert same_bytes(nvdla.pack_weights_many([big(w)], precision=precision)[0].weight, expect)
    if dtype != np.float32:
        assert same_bytes(expect, ref.pack_dc_vectorised(w, kpg=16, cb=64, tail=128))
    if dtype == np.float16:
        wino = nvdla.pack_weights(w, kind="winograd").weight
        assert same_bytes(nvdla.pack_weights(big(w), kind="winograd").weight, wino)
    x = RNG.integers(-300, 300, (1, 20, 5, 7)).astype(dtype)
    assert same_bytes(nvdla.pack_feature(big(x), precision=precision), nvdla.pack_feature(x, precision=precision))
    if dtype != np.float32:
        assert same_bytes(nvdla.pack_feature(big(x)), ref.pack_feature_vectorised(x, atom_bytes=32))
    b = RNG.integers(-300, 300, 64).astype(np.int16)
    assert same_bytes(nvdla.pack_bias(big(b), pipeline="int8").data, nvdla.pack_bias(b, pipeline="int8").data)


def test_nvdla_pixels_16_bit():
    img = RNG.integers(0, 60000, (6, 8, 4)).astype(np.uint16)
    a, b = nvdla.pack_pixels(img, "T_A16B16G16R16"), nvdla.pack_pixels(big(img), "T_A16B16G16R16")
    planes = (lambda r: r.planes) if hasattr(a, "planes") else (lambda r: [r])
    assert all(same_bytes(p, q) for p, q in zip(planes(a), planes(b)))


def test_kneron_and_horizon():
    x = RNG.integers(-3000, 3000, (3, 8, 8)).astype(np.int16)
    assert same_bytes(kneron.pack(big(x), "8W1C16B", chip="kl720"), kneron.pack(x, "8W1C16B", chip="kl720"))
    y = RNG.integers(-50, 50, (1, 13, 13, 425)).astype(np.int32)
    aligned = horizon.aligned_shape(y.shape, "S32", layout="NHWC", role="output")
    assert same_bytes(horizon.pad(big(y), aligned_shape=aligned), horizon.pad(y, aligned_shape=aligned))


def test_engine_refuses_big_endian_arrays():
    # The Python layer converts; an array that reaches the core big-endian is a TypeError, never
    # packed as garbage.
    lay = npupack.Layout.parse("NCHW16c").bind((1, 20, 3, 5), np.float16)
    x = big(np.ones((1, 20, 3, 5), np.float16))
    with pytest.raises(TypeError, match="big-endian"):
        lay._pack_into(x, np.empty(lay.nbytes, np.uint8))
    with pytest.raises(TypeError, match="big-endian"):
        lay._core.unpack(np.zeros(lay.nbytes, np.uint8), x.copy(), False)


def test_conversions_and_readback():
    w = RNG.standard_normal((8, 4, 3, 3)).astype(np.float32)
    q, s = nvdla.quantize_weights(w, precision="int8")
    q_be, s_be = nvdla.quantize_weights(big(w), precision="int8")
    assert np.array_equal(q_be, q) and np.array_equal(s_be, s)
    assert same_bytes(nvdla.to_fp16(big(w)), nvdla.to_fp16(w))
    h = w.astype(np.float16)
    h[0, 0, 0, 0] = np.inf
    assert same_bytes(nvdla.to_fp16(big(h)), nvdla.to_fp16(h))
    assert np.array_equal(nvdla.prune(big(w), 0.5), nvdla.prune(w, 0.5))
    y = RNG.integers(-50, 50, (1, 4, 4, 40)).astype(np.int32)
    aligned = horizon.aligned_shape(y.shape, "S32", layout="NHWC", role="output")
    buf = horizon.pad(y, aligned_shape=aligned)
    assert np.array_equal(horizon.strip(buf, y.shape, np.dtype(">i4"), aligned_shape=aligned), y)
