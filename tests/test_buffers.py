"""Caller-given out= buffers that share memory with the input: a packer reads the input while it
writes out, in an order of its own, so an overlap would give garbage and overwrite the caller's
tensor. It is a LayoutError naming both arguments, checked before anything is written; buffers
side by side in one allocation (any strides, negative ones included) are fine."""
import numpy as np
import pytest

import npupack
from npupack import LayoutError, horizon, kneron, nvdla
from npupack import openvino as ov
from tests.test_nvdla_sparse import TAIL_STREAMS

RNG = np.random.default_rng(21)


def inside(raw, start, shape, dtype):
    """A C-contiguous array of ``shape`` over raw[start:]."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return raw[start:start + n].view(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_pack_into_a_buffer_that_overlaps_the_input(dtype):
    shape = (1, 40, 6, 6)
    raw = np.zeros(16384, np.uint8)
    x = inside(raw, 1024, shape, dtype)
    x[...] = RNG.integers(-100, 100, shape)
    before = x.copy()
    calls = [lambda o: nvdla.pack_feature(x, out=o), lambda o: ov.pack(x, "b_fs_yx_fsv16", out=o),
             lambda o: npupack.pack(x, "NCHW16c", out=o), lambda o: nvdla.pack_weights(x, out=o).weight]
    if dtype == np.int8:
        calls.append(lambda o: kneron.pack(x[0], "4W4C8B", chip="kl720", out=o))
    for call in calls:
        for start in (0, 1024 + x.nbytes - 1, 1000):  # out ends inside x, starts at x's last byte, covers it
            with pytest.raises(LayoutError, match="out: overlaps the memory x spans"):
                call(raw[start:])
        assert np.array_equal(x, before)  # nothing was written
        assert raw[:1024].sum() == 0
        # Side by side in the same allocation: packs as into a separate buffer.
        assert np.array_equal(call(raw[1024 + x.nbytes:]), call(np.empty(16384, np.uint8)))


def test_strided_and_reversed_inputs_next_to_out():
    raw = np.zeros(8192, np.uint8)
    x = inside(raw, 0, (1, 32, 8, 8), np.int8)[:, ::-1, :, ::-1]  # negative strides: spans raw[0:2048]
    x[...] = RNG.integers(-100, 100, x.shape)
    assert np.array_equal(nvdla.pack_feature(x, out=raw[2048:]), nvdla.pack_feature(np.ascontiguousarray(x)))
    with pytest.raises(LayoutError, match="overlaps"):
        nvdla.pack_feature(x, out=raw[2047:])


def test_unpack_into_a_tensor_that_overlaps_the_buffer():
    x = RNG.integers(-100, 100, (1, 40, 6, 6)).astype(np.int8)
    lay = npupack.Layout.parse("NCHW16c").bind(x.shape, np.int8)
    raw = np.zeros(8192, np.uint8)
    buf = raw[:lay.nbytes]
    npupack.pack(x, "NCHW16c", out=buf)
    with pytest.raises(LayoutError, match="out: overlaps the memory buf spans"):
        lay.unpack(buf, out=inside(raw, 100, x.shape, np.int8))
    assert np.array_equal(lay.unpack(buf, out=inside(raw, lay.nbytes, x.shape, np.int8)), x)


def _result_bytes(result) -> np.ndarray:
    return result.weight if isinstance(result, nvdla.WeightSurfaces) else result


def test_only_the_result_is_written_into_a_larger_out():
    """``out=`` larger than the result: the packed bytes go to its start and nothing after them
    is written (a caller who lays several surfaces out in one arena relies on it). Sparse DATA is
    the case with a reason to fail: the SIMD compaction stores past the bytes it keeps."""
    w8 = RNG.integers(-100, 100, (40, 70, 3, 3)).astype(np.int8)
    w8[RNG.random(w8.shape) < 0.6] = 0
    tail = TAIL_STREAMS["int16"]  # its compaction stores past the 128-byte DATA surface
    x8 = RNG.integers(-100, 100, (1, 19, 5, 7)).astype(np.int8)
    calls = {
        "pack_feature": lambda o: nvdla.pack_feature(x8, out=o),
        "pack_feature fp16": lambda o: nvdla.pack_feature(x8.astype(np.float16), out=o),
        "pack_weights": lambda o: nvdla.pack_weights(w8, out=o),
        "pack_weights winograd": lambda o: nvdla.pack_weights(w8, kind="winograd", out=o),
        "pack_weights compress": lambda o: nvdla.pack_weights(w8, compress=True, out=o),
        "pack_weights compress auto": lambda o: nvdla.pack_weights(w8, compress="auto", out=o),
        "pack_weights compress int16": lambda o: nvdla.pack_weights(tail.reshape(1, -1, 1, 1), compress=True, out=o),
        "compress_weights": lambda o: nvdla.compress_weights(tail, precision="int16", kernel_group_elements=96,
                                                             out=o)[0],
        "openvino": lambda o: ov.pack(x8, "b_fs_yx_fsv32", out=o),
        "openvino weights": lambda o: ov.pack(w8, "os_is_yx_isv16_osv16", out=o),
        "npupack.pack": lambda o: npupack.pack(x8, "NCHW16c", out=o),
        "kneron": lambda o: kneron.pack(x8[0], "4W4C8B", chip="kl720", out=o),
        "horizon": lambda o: horizon.pad(x8, aligned_shape=(1, 32, 8, 8), out=o),
    }
    for name, call in calls.items():
        want = _result_bytes(call(None)).copy()
        out = np.full(want.size + 256, 0xEE, np.uint8)
        got = _result_bytes(call(out))
        assert np.shares_memory(got, out) and np.array_equal(got, want), name
        assert np.array_equal(out[:want.size], want) and (out[want.size:] == 0xEE).all(), name
