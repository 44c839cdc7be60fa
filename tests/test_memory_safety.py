"""No crash from any argument (docs/design.md §2.7): dtypes that are not plain numbers are refused
everywhere the engine is reachable (object elements are pointers; copied as bytes they break
reference counts, unpacked they are forged), the private bindings check their own sizes without
overflow, size checks run before allocation, and the work memory of prune, explain and bind
stays bounded (a quadratic bind, a full explain for three lines, float64 copies in prune)."""
import gc
import time
import tracemalloc

import numpy as np
import pytest

import npupack
from npupack import LayoutError, _core, horizon, kneron, nvdla
from npupack import openvino as ov
from npupack.explain import explain_lines, vendor_explain_lines
from npupack.layout import BlockedLayout, Dim

RNG = np.random.default_rng(4242)

# Every kind of element that is not a plain number, with a 1-, 2-, 4- or 8-byte itemsize where
# one exists (so no size check can refuse it first).
NON_NUMERIC = ["O", "U1", "S1", "S2", "V2", [("a", "i1"), ("b", "i1")], "M8[s]", "m8[ms]", "V8"]


def _non_numeric(shape, dtype):
    a = np.empty(shape, dtype)
    if a.dtype.kind == "O":
        a[...] = 7  # small ints: their pointers would be packed as bytes
    return a


@pytest.mark.parametrize("dtype", NON_NUMERIC, ids=str)
def test_engine_entries_refuse_non_numeric_dtypes(dtype):
    lay = npupack.Layout.parse("NCHW16c")
    with pytest.raises(TypeError, match="not a number"):
        BlockedLayout([Dim("C", 20, (16,)), Dim("W", 3)], [("C", 0), ("W", 0), ("C", 1)], dtype)
    with pytest.raises(TypeError, match="not a number|cannot be packed"):
        lay.bind((1, 20, 3, 5), dtype)
    x = _non_numeric((1, 20, 3, 5), dtype)
    with pytest.raises(TypeError):
        npupack.pack(x, lay)
    buf = np.full(lay.nbytes((1, 20, 3, 5), np.int8) * 8, 0x41, np.uint8)  # forged pointers if unpacked
    with pytest.raises(TypeError):
        npupack.unpack(buf, lay, (1, 20, 3, 5), dtype)


@pytest.mark.parametrize("dtype", NON_NUMERIC, ids=str)
def test_vendor_entries_refuse_non_numeric_arrays(dtype):
    calls = [
        lambda: ov.pack(_non_numeric((1, 20, 3, 5), dtype), "b_fs_yx_fsv16"),
        lambda: ov.unpack(np.zeros(4096, np.uint8), "b_fs_yx_fsv16", (1, 20, 3, 5), dtype),
        lambda: kneron.pack(_non_numeric((20, 3, 5), dtype), "16W1C8B", chip="kl720"),
        lambda: horizon.pad(_non_numeric((1, 3, 4, 5), dtype), aligned_shape=(1, 3, 4, 16)),
        lambda: horizon.strip(np.zeros(4096, np.uint8), (1, 3, 4, 5), dtype, aligned_shape=(1, 3, 4, 16)),
        lambda: nvdla.pack_feature(_non_numeric((1, 20, 3, 5), dtype)),
        lambda: nvdla.unpack_feature(np.zeros(4096, np.uint8), (1, 20, 3, 5), dtype),
        lambda: nvdla.pack_weights(_non_numeric((8, 4, 3, 3), dtype)),
        lambda: nvdla.pack_weights(_non_numeric((8, 2, 3, 3), dtype), groups=2, precision="int8"),
        lambda: nvdla.pack_weights(_non_numeric((8, 4, 3, 3), dtype), kind="winograd", precision="int8"),
        lambda: nvdla.compress_weights(_non_numeric(64, dtype), precision="int8", kernel_group_elements=8),
        lambda: nvdla.decompress_weights(_non_numeric(64, dtype), np.zeros(8, np.uint8), precision="int8",
                                         n_elements=64),
        lambda: nvdla.analyze_sparsity(_non_numeric(64, dtype), precision="int8", kernel_group_elements=8),
        lambda: nvdla.prune(_non_numeric((8, 4, 3, 3), dtype), 0.5),
        lambda: nvdla.pack_pixels(_non_numeric((4, 5, 4), dtype), "T_A8B8G8R8"),
        lambda: nvdla.pack_bias(_non_numeric(8, dtype), precision="int8"),
        lambda: nvdla.pack_eltwise(_non_numeric((8, 3, 5), dtype), precision="int8"),
    ]
    for i, call in enumerate(calls):
        with pytest.raises((TypeError, ValueError)):
            call()


@pytest.mark.parametrize("dtype", ["O", "V8", "M8[s]", "U2"], ids=str)
def test_bindings_refuse_non_numeric_arrays(dtype):
    """The bindings check for themselves: the Python layer is not the only caller."""
    core = npupack.Layout.parse("NCHW").bind((2, 3, 4, 5), np.int64)._core
    x = _non_numeric((2, 3, 4, 5), dtype)
    out = np.zeros(2 * 3 * 4 * 5 * 8, np.uint8)
    calls = [
        lambda: core.pack(x, out),
        lambda: core.unpack(out, x),
        lambda: _core.pack_many([(core, x, out)]),
        lambda: _core.transpose_batch(_non_numeric(64, dtype), 8, 0, np.zeros(1024, np.uint8), 64, 0, 2, 2, 1, 8),
        lambda: _core.grouped_pack(_non_numeric((4, 2, 1, 1), dtype), np.zeros(256, np.uint8), 2, 4, 8),
        lambda: _core.sparse_count(_non_numeric(64, dtype), 8, 1, 8),
        lambda: _core.sparse_compress(_non_numeric(64, dtype), 8, 1, np.zeros(8, np.uint8), np.zeros(256, np.uint8)),
        lambda: _core.sparse_decompress(_non_numeric(64, dtype), np.zeros(8, np.uint8), 8, 1, np.zeros(64, np.uint8)),
        lambda: _core.pack_pixel_lines(_non_numeric((2, 2, 1), dtype), [0], np.zeros(256, np.uint8), 64, 0),
    ]
    for call in calls:
        with pytest.raises((TypeError, ValueError)):
            call()
    assert x.dtype.kind != "O" or all(v == 7 for v in x.ravel())  # the objects are intact


def test_sparse_bindings_check_sizes_without_overflow():
    stream = RNG.integers(-2, 3, 64).astype(np.int8).view(np.uint8)
    for n in (2**62, 2**63 - 1, 2**63 // 2 + 1):
        with pytest.raises(LayoutError, match="shorter than n"):
            _core.sparse_count(stream, n, 2, 1)
        with pytest.raises(LayoutError):
            _core.sparse_decompress(stream, np.zeros(8, np.uint8), n, 2, np.zeros(128, np.uint8))
        with pytest.raises(LayoutError):
            _core.sparse_group_popcount(np.zeros(8, np.uint8), n, 8)
    # A group of up to 2^63 - 1 elements: one group, counted against NumPy.
    assert _core.sparse_count(stream, 64, 1, 2**63 - 1).tolist() == [int(np.count_nonzero(stream))]
    wmb = np.packbits(stream != 0, bitorder="little")
    assert _core.sparse_group_popcount(wmb, 64, 2**63 - 1).tolist() == [int(np.count_nonzero(stream))]


def test_pixel_bindings_refuse_negative_offsets():
    """A negative x offset would write before the plane buffers."""
    yuv = np.zeros((2, 4, 3), np.uint8)
    y, uv = np.zeros(256, np.uint8), np.zeros(512, np.uint8)
    for y_pre, uv_pre in ((-64, 0), (0, -64)):
        with pytest.raises(LayoutError):
            _core.split_yuv444(yuv, y, 64, y_pre, uv, 128, uv_pre, False)
    with pytest.raises(LayoutError):
        _core.split_yuv444(yuv, y, 2**62, 0, uv, 128, 0, False)  # h * stride overflows
    with pytest.raises(LayoutError):
        _core.pack_pixel_lines(np.zeros((2, 4, 1), np.uint8), [0], np.zeros(256, np.uint8), 64, -8)


def test_a_tiny_buffer_with_a_huge_shape_is_a_layout_error_before_allocation():
    """prod(shape) is about 10^12 elements: allocating the result first would be a MemoryError."""
    tiny = np.zeros(64, np.uint8)
    huge = (1, 10**6, 1000, 1000)
    calls = [
        lambda: npupack.unpack(tiny, "NCHW16c", huge, np.int8),
        lambda: npupack.Layout.parse("NCHW16c").bind(huge, np.int8).unpack(tiny),
        lambda: ov.unpack(tiny, "b_fs_yx_fsv16", huge, np.int8),
        lambda: horizon.strip(tiny, (1, 1000, 1000, 10**6), "S8", aligned_shape=(1, 1000, 1000, 10**6)),
        lambda: kneron.unpack(tiny, "1W16C8B", huge, chip="kl720"),
        lambda: nvdla.unpack_feature(tiny, huge, np.int8),
    ]
    for call in calls:
        with pytest.raises(LayoutError):
            call()


def test_binding_a_long_layout_is_linear_in_its_tiles():
    """40 KB of layout text, 20000 unit tiles: the digit divisors are one pass, not one product
    per tile. Timed against 2000 tiles (best of a few rounds each): about 10x when binding is
    linear in the tiles, about 100x when quadratic; a ratio, so that a slow or sanitized build
    passes alike. The collector is off while timing: a full collection over the objects of earlier
    tests, triggered by the many the parse makes, is not binding. The bytes are those of plain
    NCHW (unit tiles move nothing), from NumPy."""
    def bind(tiles, rounds):
        text, best = "NCHW" + "1c" * tiles, float("inf")
        gc.collect()
        gc.disable()
        try:
            for _ in range(rounds):
                t0 = time.perf_counter()
                bound = npupack.Layout.parse(text).bind((1, 3, 4, 5), np.int8)
                best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
        return best, bound

    small, _ = bind(2000, 3)
    large, bound = bind(20000, 3)
    assert large / small < 40, (large, small)
    x = RNG.integers(-100, 100, (1, 3, 4, 5)).astype(np.int8)
    assert bytes(bound.pack(x)) == x.tobytes()


EXPLAINED = [("NCHW16c", (2, 20, 3, 5), None, None), ("nChw8c", (1, 12, 2, 3), (0, 1, 1, 0), (0, 0, 1, 2)),
             ("OIHW8i16o2i", (20, 18, 3, 3), None, None), ("NHWC", (1, 3, 4, 5), None, None),
             ("ABcd8b8a4b", (9, 17, 2, 2), None, None),
             # clDNN swizzles (explicit digit divisors) and alignment
             ("os_is_yx_osa4_isa8_osv8_isv4_swizzled_by_4", (40, 35, 2, 2), None, None),
             ("os_is_yx_osv32_isv4_swizzled_by_2", (40, 9, 1, 2), None, None),
             ("os_iyx_osv32__ai32", (40, 9, 2, 1), None, None)]


@pytest.mark.parametrize("text,shape,lo,hi", EXPLAINED)
def test_explain_with_a_limit_prints_the_first_lines_of_the_full_listing(text, shape, lo, hi):
    from npupack.explain import resolve_layout

    lay = resolve_layout(text)
    full = list(explain_lines(lay, shape, pad_lo=lo, pad_hi=hi))
    for limit in (0, 1, 7, 50, len(full) - 2, len(full) - 1, len(full) + 5):
        got = list(explain_lines(lay, shape, pad_lo=lo, pad_hi=hi, limit=limit))
        assert got[:-1] == full[:len(got) - 1]
        assert got[-1] == full[len(got) - 1] or got[-1] == f"... ({len(full) - 1 - limit} more)"


@pytest.mark.parametrize("fmt,shape,kw", [
    ("kneron:1W16C8B", (1, 20, 3, 5), dict(chip="kl730", stride=[240, 1, 80, 16])),
    ("horizon:NHWC", (1, 3, 4, 5), {}), ("horizon:NCHW", (1, 5, 3, 7), {})])
def test_explain_strided_with_a_limit_matches_the_full_listing(fmt, shape, kw):
    full = list(vendor_explain_lines(fmt, shape, **kw))
    for limit in (3, 40):
        got = list(vendor_explain_lines(fmt, shape, limit=limit, **kw))
        assert got[:-1] == full[:len(got) - 1]


def test_explain_with_a_limit_computes_only_what_it_prints():
    from npupack.explain import resolve_layout

    tracemalloc.start()
    try:
        lines = list(explain_lines(resolve_layout("b_fs_yx_fsv16"), (1, 16, 4000, 4000), limit=3))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(lines) == 5 and lines[-1] == f"... ({16 * 4000 * 4000 - 3} more)"
    assert peak < 1 << 20  # the full listing packs 2 GB of int64 codes


def _prune_reference(w, sparsity, kpg, axis):
    """docs-level definition: per group of kpg kernels, zero the floor(s*n + 0.5) smallest
    magnitudes, ties by position (a stable sort of float64 magnitudes; NaN largest)."""
    moved = np.moveaxis(w, axis, 0).copy()
    flat = moved.reshape(moved.shape[0], -1)
    for k0 in range(0, flat.shape[0], kpg):
        block = flat[k0:k0 + kpg].reshape(-1)
        drop = int(np.floor(sparsity * block.size + 0.5))
        order = np.argsort(np.abs(block.astype(np.float64)), kind="stable")
        block[order[:drop]] = 0
        flat[k0:k0 + kpg] = block.reshape(flat[k0:k0 + kpg].shape)
    return np.moveaxis(moved, 0, axis)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16, np.float16, np.float32, np.float64])
def test_prune_matches_a_stable_argsort(dtype, monkeypatch):
    from npupack.nvdla import sparse

    monkeypatch.setattr(sparse, "_CHUNK", 37)  # several chunks per group, ties across chunk edges
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    for shape, axis, precision in [((40, 6, 3, 3), 0, None), ((6, 40, 2, 2), 1, "fp16"), ((3, 5, 1, 1), 0, None)]:
        if info is not None:
            w = RNG.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(dtype)
            w.flat[::7] = info.min  # |-128| = 128 must sort last, not first
            w.flat[::5] = 3  # ties
        else:
            w = (RNG.integers(-4, 5, shape) / 2).astype(dtype)
            w.flat[::11] = np.nan
            w.flat[::13] = -0.0
        precision = precision or ("fp16" if w.dtype.kind == "f" else "int8" if w.dtype.itemsize == 1 else "int16")
        kpg = nvdla.NV_FULL.kernels_per_group(precision)
        for s in (0.0, 0.1, 0.37, 0.5, 0.95, 1.0):
            got = nvdla.prune(w, s, kernel_axis=axis, precision=precision)
            want = _prune_reference(w, s, kpg, axis)
            np.testing.assert_array_equal(got, want, err_msg=f"{dtype} {shape} {s}")


def test_prune_peak_memory_is_bounded():
    w = RNG.integers(-128, 128, (16, 64, 64, 64)).astype(np.int8)  # one kernel group of 4 MB
    tracemalloc.start()
    try:
        nvdla.prune(w, 0.5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The result and one magnitude copy of the group; a float64 copy alone was 8x the input.
    assert peak <= 2.5 * 2 * w.nbytes - w.nbytes
