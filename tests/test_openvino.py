"""OpenVINO GPU (clDNN) formats (docs/openvino.md): the table, the name grammar, the published listings,
the worked examples, every supported format against the 3.2 reference on shapes with tails,
transcribed OpenCL index functions, and oneDNN's reorder as a real peer."""
import itertools
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import npupack
from npupack import LayoutError, UnsupportedError
from npupack import openvino as ov
from npupack.cli import main
from tests.onednn_oracle import Oracle
from tests.reference import blocked as ref
from tests.reference import opencl as cl

SUPPORTED = [f for f in ov.formats() if f.supported]
# The index listings of OpenVINO's memory-format documentation (source named in the file).
LISTINGS = json.loads((Path(__file__).parent / "data" / "openvino_listings.json").read_text(encoding="utf-8"))


def ref_pack(info, x, lo=None, hi=None):
    lay = info.layout
    return ref.pack(x, lay.logical, lay.outer, [(t.dim, t.size, t.divisor) for t in lay.tiles], dict(lay.align),
                    lo, hi)


def assert_packs_like_reference(info, x, check_padding=True):
    """Pack ``x`` into a dirty, misaligned ``out`` buffer: equal to the reference (on the engine's
    shape, engine_shape) byte for byte, and unpacked back to ``x``."""
    n = ov.nbytes(info.name, x.shape, x.dtype)
    out = np.full(n + 1, 0xA5, np.uint8)[1:]
    got = ov.pack(x, info.name, out=out)
    assert np.array_equal(got, ref_pack(info, x.reshape(engine_shape(info, x.shape)))), x.shape
    assert np.array_equal(ov.unpack(got, info.name, x.shape, x.dtype, check_padding=check_padding), x), x.shape


def dirty_out(n, shift):
    """A buffer of n bytes filled with 0xA5 that starts `shift` bytes past a 64-byte boundary: the
    streamed stores' 16-byte head, 32-byte body and tail depend on where out= starts."""
    base = np.full(n + 128, 0xA5, np.uint8)
    at = -base.ctypes.data % 64 + shift
    return base[at:at + n]


def engine_shape(info, shape):
    """The shape the engine sees: merged yx for gs_oi_yxs_* formats."""
    return shape[:3] + (shape[3] * shape[4],) if "yx" in info.layout.logical else shape


def blocked_extents(info):
    """(the block or alignment of each logical dim, whether y and x are merged, the logical dims the
    caller shapes: y and x apart for yx-merged formats)."""
    lay = info.layout
    total = {d: 1 for d in lay.logical}
    for t in lay.tiles:
        total[t.dim] *= t.size
    for d, n in lay.align:
        total[d] = max(total[d], n)
    merged = "yx" in lay.logical
    return total, merged, list(lay.logical[:3]) + ["y", "x"] if merged else list(lay.logical)


def boundary_shapes(info):
    """Every blocked (or aligned) dim across 1..2x its block (tails included); others small."""
    total, merged, logical = blocked_extents(info)
    options = []
    for d in logical:
        T = total.get(d, 1)
        if merged and d in ("o", "i"):
            options.append([1])
        elif merged and d in ("y", "x"):
            options.append([1, 2, 3])
        elif T > 1:
            options.append(sorted({1, T - 1, T, T + 1, 2 * T} - {0}))
        else:
            options.append([2] if d in "bfoig" else [1, 2])
    return [tuple(s) for s in itertools.product(*options)]


def test_table_counts_and_left_out_reasons():
    fs = ov.formats()
    assert len(fs) == 141 and len(SUPPORTED) == 123
    for f in fs:
        if not f.supported:
            assert f.reason
            with pytest.raises(UnsupportedError, match="not supported"):
                ov.pack(np.zeros((1, 1, 1, 1), np.int8), f.name)


def test_name_grammar_regenerates_the_table():
    for f in SUPPORTED:
        if "swizzled" in f.name:
            with pytest.raises(UnsupportedError):
                ov.parse_name(f.name)
            continue
        lay = ov.parse_name(f.name)
        assert lay.describe() == f.nesting, f.name
        assert "".join(lay.logical) == f.logical, f.name
        assert f.layout.describe() == f.nesting, f.name
        assert lay.to_onednn() == f.layout.to_onednn()


def test_onednn_column():
    for f in SUPPORTED:
        mine = f.layout.to_onednn()
        if f.onednn is None:
            assert "swizzled" in f.name or "yx" in f.layout.logical or f.name.endswith("__ai32"), f.name
        elif f.name.endswith("__ai8"):  # equivalent tag (docs/openvino.md §8.2)
            assert mine is None
        else:
            assert mine == f.onednn, f.name


def test_published_listing_b_fs_yx_fsv16():
    """Every line of OpenVINO's published listing: the physical coordinates exactly; the logical
    element where the listing's fsv < f = 2 (docs/openvino.md §7, item 9: its `f=1` at 18, 34, ... is a typo for f=2)."""
    from npupack.explain import explain_lines

    lines = list(explain_lines(ov.parse_format("b_fs_yx_fsv16"), (2, 2, 2, 2)))
    assert "[b:2; fs:1; y:2; x:2; fsv:16] = 128 elements" in lines[0]
    assert len(lines) == 129
    ours = {int(m.group(1)): (m.group(2), m.group(3)) for m in
            (re.match(r"i = (\d+) => (.*) == \[(.*)\];", ln) for ln in lines[1:])}
    listed = LISTINGS["b_fs_yx_fsv16"]
    assert len(listed) == 32  # the listing elides the rest with "..."; all 128 lines are produced above
    for i, left, right in listed:
        got_left, got_right = ours[int(i)]
        assert got_right == right
        fsv = int(right.split("fsv=")[1])
        if fsv < 2:
            assert got_left == f"[{left}]"
        else:
            assert got_left == "padding"


def test_published_listing_bfyx():
    from npupack.explain import explain_lines

    planar = LISTINGS["bfyx"]
    assert len(planar) == 16
    lines = list(explain_lines(ov.parse_format("bfyx"), (2, 2, 2, 2)))[1:]
    for i, left in planar:
        assert lines[int(i)].startswith(f"i = {i} => [{left}] == ")


def test_worked_examples():
    # 10.1
    x = np.arange(1, 17, dtype=np.int8).reshape(2, 2, 2, 2)
    buf = ov.pack(x, "b_fs_yx_fsv16")
    assert buf.size == 128 and list(np.flatnonzero(buf)) == [0, 1, 16, 17, 32, 33, 48, 49, 64, 65, 80, 81, 96, 97,
                                                             112, 113]
    # 10.2
    kw = dict(pad_lo=(0, 1, 1, 0), pad_hi=(0, 0, 1, 0))
    assert ov.packed_shape("b_fs_yx_fsv16", (1, 20, 2, 2), **kw) == (1, 2, 4, 2, 16)
    assert [ov.offset_of("b_fs_yx_fsv16", (1, 20, 2, 2), i, **kw) for i in
            [(0, 0, 0, 0), (0, 14, 1, 1), (0, 15, 0, 0), (0, 19, 1, 1)]] == [33, 95, 160, 212]
    # 10.3
    name, shape = "os_is_yx_isv8_osv16_isv2", (20, 18, 2, 1)
    assert ov.packed_shape(name, shape) == (2, 2, 2, 1, 8, 16, 2)
    assert [ov.offset_of(name, shape, i) for i in [(0, 1, 0, 0), (1, 0, 0, 0), (0, 2, 0, 0), (0, 16, 0, 0),
                                                   (16, 0, 0, 0), (17, 13, 1, 0), (19, 17, 1, 0)]] == \
        [1, 2, 32, 512, 1024, 1475, 1799]
    w = np.ones(shape, np.int8)
    assert np.count_nonzero(ov.pack(w, name)) == 720 and ov.nbytes(name, shape, np.int8) == 2048
    # 10.4
    assert ov.offset_of("os_is_yx_osa4_isa8_osv8_isv4_swizzled_by_4", (32, 32, 1, 1), (5, 0, 0, 0)) == 260
    assert ov.offset_of("os_is_yx_osa4_isa8_osv8_isv4", (32, 32, 1, 1), (5, 0, 0, 0)) == 20
    assert ov.offset_of("os_is_yx_osv32_isv4_swizzled_by_2", (32, 4, 1, 1), (3, 0, 0, 0)) == 68


@pytest.mark.parametrize("info", SUPPORTED, ids=lambda f: f.name)
def test_every_format_on_boundary_shapes(info):
    rng = np.random.default_rng(0)
    for shape in boundary_shapes(info):
        x = rng.integers(1, 120, shape).astype(np.int8)
        buf = ov.pack(x, info.name)
        expected = ref_pack(info, x.reshape(engine_shape(info, shape)))
        assert np.array_equal(buf, expected), shape
        assert buf.size == ov.nbytes(info.name, shape, np.int8)
        assert np.array_equal(ov.unpack(buf, info.name, shape, np.int8, check_padding=True), x)


def random_shape(info, data):
    """A hypothesis-drawn logical shape: each blocked (or aligned) dim a whole number of blocks, one
    element either side of one, or any size up to 3x its block (so that the fast kernels' row
    counts, 16, 32 and more, are reached); the others small, 3x3 taps favoured; yx-merged formats
    keep o and i at 1 as in boundary_shapes. At most 150k elements."""
    total, merged, logical = blocked_extents(info)
    shape = []
    for d in logical:
        T = total.get(d, 1)
        if merged and d in ("o", "i"):
            shape.append(1)
        elif T > 1:
            # Whole blocks (the kernels' row counts: 16, 32 ...) and tails next to them, or any size.
            sizes = st.sampled_from(sorted({T - 1, T, T + 1, 2 * T, 2 * T + 1} - {0})) | st.integers(1, 3 * T)
            shape.append(data.draw(sizes, label=d))
        else:
            small = 3 if len(logical) > 5 or d in "bgoi" else 7
            shape.append(data.draw(st.sampled_from([1, 3]) | st.integers(1, small), label=d))
    assume(math.prod(shape) <= 150_000)
    return tuple(shape)


@given(st.sampled_from(SUPPORTED), st.data(), st.sampled_from([np.int8, np.uint8, np.float16, np.float32, np.float64]))
def test_every_format_on_random_shapes(info, data, dtype):
    """Every supported format (data, weights, grouped, swizzled) on drawn shapes and dtypes: equal
    to the reference byte for byte through a dirty, misaligned ``out``, and unpacked back."""
    shape = random_shape(info, data)
    x = np.random.default_rng(math.prod(shape)).integers(1, 100, shape).astype(dtype)
    assert_packs_like_reference(info, x)


DOUBLE_BLOCKED = [f for f in SUPPORTED if len(f.layout.logical) == 4 and "yx" not in f.layout.logical
                  and len({t.dim for t in f.layout.tiles}) >= 2]


@pytest.mark.parametrize("info", DOUBLE_BLOCKED, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_double_blocked_on_large_spatial_extents(info, dtype):
    """Large y*x: the engine cuts the spatial loop into tiles when a block loop interleaves with
    it in the packed buffer (isv inside osv of y*x); tiles, their last partial one, padded blocks."""
    rng = np.random.default_rng(1)
    block = {d: 1 for d in info.layout.logical}
    for t in info.layout.tiles:
        block[t.dim] *= t.size
    b, f = (block[d] for d in info.layout.logical[:2])
    # Whole blocks (the interleaving loop must run its full extent to be tiled), y*x of several
    # tiles and a partial last one; then a padded outer block, which is not tiled.
    for shape in [(b, f, 37, 61), (2 * b, f, 19, 67), (b + 1, f - 1, 9, 70)]:
        x = rng.integers(1, 120, shape).astype(dtype)
        buf = ov.pack(x, info.name)
        assert np.array_equal(buf, ref_pack(info, x)), shape
        assert np.array_equal(ov.unpack(buf, info.name, shape, dtype, check_padding=True), x)


@pytest.mark.parametrize("info", DOUBLE_BLOCKED, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_double_blocked_outputs_of_several_mib(info, dtype):
    """Outputs of 4 MiB and more: where a block loop and the innermost tile make up each y*x
    column's whole block, the engine builds tiles of blocks in a buffer and streams them out with
    non-temporal stores, and skips the separate fill pass when the tiles cover every byte. A
    dirty, misaligned out= buffer shows any byte left unwritten; one and two threads; partial
    blocks filled with a non-zero pad value."""
    rng = np.random.default_rng(2)
    block = {d: 1 for d in info.layout.logical}
    for t in info.layout.tiles:
        block[t.dim] *= t.size
    b, f = (block[d] for d in info.layout.logical[:2])
    itemsize = np.dtype(dtype).itemsize
    for bf in [(b, f), (1, f - 1), (b + 1, 3)]:
        x_extent = -(-(9 << 19) // (itemsize * b * f * 31 * -(-bf[0] // b) * -(-bf[1] // f)))
        shape = (*bf, 31, x_extent)
        assert ov.nbytes(info.name, shape, dtype) >= 4 << 20
        x = rng.integers(1, 120, shape).astype(dtype)
        expected = ref_pack(info, x)
        for threads, shift in ((1, 1), (2, 17)):  # 16- and 32-byte aligned after the head
            out = dirty_out(expected.size, shift)
            with npupack.num_threads(threads):
                got = ov.pack(x, info.name, out=out)
            assert np.array_equal(got, expected), (shape, threads)
    # The last shape's blocks are partial: its holes are the zeros of `expected` (x has none).
    holes = expected.view(dtype) == 0
    assert holes.any()
    expected = expected.view(dtype).copy()
    expected[holes] = -3
    got = ov.pack(x, info.name, pad_value=-3, out=dirty_out(expected.nbytes, 1))
    assert np.array_equal(got, expected.view(np.uint8)), "pad value"
    if info.kind == "data":  # padding before blocking: whole blocks of it, which no tile visits
        lo, hi = (b + 1, 2, 0, 0), (2, f + 1, 0, 0)
        expected = ref_pack(info, x, lo, hi)
        out = np.full(expected.size + 1, 0xA5, np.uint8)[1:]
        assert np.array_equal(ov.pack(x, info.name, pad_lo=lo, pad_hi=hi, out=out), expected), "padded"


@pytest.mark.parametrize("name", ["os_is_yx_isv16_osv16", "os_is_yx_osv16_isv16", "bs_fs_yx_bsv16_fsv32",
                                  "bs_fs_yx_bsv32_fsv16"])
@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_whole_double_blocks_of_8_mib_and_more(name, dtype):
    """Outputs of 8 MiB and more whose y*x columns each hold one whole double block: the engine
    builds them in tiles of blocks whatever share of each block is valid, prefetching the rows of
    the tiles ahead. Against the NumPy reshape/transpose reference: whole and half-valid outer
    blocks, y*x not a multiple of a tile, a dirty misaligned out= buffer, one and two threads,
    a non-zero pad value."""
    info = next(f for f in SUPPORTED if f.name == name)
    lay = info.layout
    tiles = [(t.dim, t.size, None) for t in lay.tiles]
    block = {d: 1 for d in lay.logical}
    for t in lay.tiles:
        block[t.dim] *= t.size
    b, f = (block[d] for d in lay.logical[:2])
    rng = np.random.default_rng(4)
    for outer in [(b, 2 * f), (b // 2, 2 * f)]:
        yx = -(-(8 << 20) // (b * 2 * f * np.dtype(dtype).itemsize)) + 37
        shape = (*outer, 1, yx)
        assert ov.nbytes(name, shape, dtype) >= 8 << 20
        x = rng.integers(1, 120, shape).astype(dtype)
        expected = ref.pack_transpose(x, lay.logical, lay.outer, tiles)
        for threads, shift in ((1, 1), (2, 17)):
            with npupack.num_threads(threads):
                got = ov.pack(x, name, out=dirty_out(expected.size, shift))
            assert np.array_equal(got, expected), (shape, threads)
    expected = ref.pack_transpose(x, lay.logical, lay.outer, tiles, pad_value=-3)
    assert np.array_equal(ov.pack(x, name, pad_value=-3, out=dirty_out(expected.size, 1)), expected), "pad value"


@pytest.mark.parametrize("name", ["b_fs_yx_fsv8", "b_fs_yx_fsv16", "b_fs_yx_fsv32"])
@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_blocked_outputs_past_the_caches(name, dtype):
    """Outputs of 16 MiB and more: where packed columns are back to back and 16 or 32 bytes, the
    engine writes them with non-temporal stores and prefetches the rows. Against the reference:
    y*x not a multiple of the kernels' 8 or 64 columns, a partial last channel block, an aligned
    and a misaligned (unstreamed) out= buffer, one and two threads."""
    info = next(f for f in SUPPORTED if f.name == name)
    rng = np.random.default_rng(3)
    fsv = info.layout.tiles[-1].size
    shape = (2, 2 * fsv + 3, 409, 2 * (16 << 20) // (2 * 2 * fsv * 409 * np.dtype(dtype).itemsize) + 5)
    assert ov.nbytes(name, shape, dtype) >= 16 << 20
    x = rng.integers(1, 120, shape).astype(dtype)
    expected = ref_pack(info, x)
    for offset, threads in [(0, 1), (64, 2), (1, 1)]:
        out = np.full(expected.size + offset, 0xA5, np.uint8)[offset:]
        with npupack.num_threads(threads):
            got = ov.pack(x, name, out=out)
        assert np.array_equal(got, expected), (offset, threads)


@pytest.mark.parametrize("fs", [2, 3, 4, 5])
@pytest.mark.parametrize("yx", [(3, 3), (2, 5), (4, 4), (1, 1)], ids=str)
def test_fsv16_weights_with_whole_feature_blocks(fs, yx):
    """b_fs_yx_fsv16 int8 weights whose C is a whole number of 16-blocks: the blocks of one
    kernel are 16-row matrices transposed two at a time side by side (an odd last one alone), for
    even and odd block counts, into a dirty buffer, against the reference."""
    info = next(f for f in SUPPORTED if f.name == "b_fs_yx_fsv16")
    x = np.random.default_rng(fs).integers(-128, 128, (3, 16 * fs) + yx).astype(np.int8)
    n = ov.nbytes(info.name, x.shape, np.int8)
    out = np.full(n + 1, 0xA5, np.uint8)[1:]
    got = ov.pack(x, info.name, out=out)
    assert np.array_equal(got, ref_pack(info, x))
    assert np.array_equal(ov.unpack(got, info.name, x.shape, np.int8), x)


@pytest.mark.parametrize("name", ["os_is_yx_isv16_osv16", "is_os_yx_isv16_osv16", "os_is_yx_osv16_isv16"])
@pytest.mark.parametrize("yx", [(3, 3), (2, 5), (4, 4), (3, 4)], ids=str)
@pytest.mark.parametrize("oi", [(16, 16), (32, 48), (33, 32), (16, 17)], ids=str)
def test_isv16_osv16_weights_on_kernels_of_9_to_16_taps(name, yx, oi):
    """[isv][osv] blocks of 3x3-like kernels: int8 packing gives each isv step's 16 x taps matrix
    to the narrow kernels as one batch (two 16-row matrices per register), 16-bit and unpacking
    transpose the isv steps together as one group. Whole and partial o and i blocks, a dirty
    buffer, int8 and fp16, against the reference."""
    info = next(f for f in SUPPORTED if f.name == name)
    for dtype in (np.int8, np.float16):
        x = np.random.default_rng(sum(oi)).integers(-100, 100, oi + yx).astype(dtype)
        assert_packs_like_reference(info, x)


SHORT_INNER_TILE = [f for f in SUPPORTED if f.kind == "weights" and f.rank == 4 and len(f.layout.tiles) >= 2
                    and f.layout.tiles[-1].size < 16]


@pytest.mark.parametrize("info", SHORT_INNER_TILE, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_short_inner_tile_weights_on_larger_kernels(info, dtype):
    """isv2 / isv4 weights (4 or 8 bytes of i per tap): the engine folds the block loops that
    continue those bytes in the packed buffer (o%16, (i/4)%8, ...) into one tall transpose over a
    table of source rows. Kernels of 4 to 25 taps (the SIMD blocks need 8 and more), whole and
    partial o and i blocks, a dirty buffer, against the reference, and back."""
    block = {d: 1 for d in info.layout.logical}
    for t in info.layout.tiles:
        block[t.dim] *= t.size
    bo, bi = block["o"], block["i"]
    rng = np.random.default_rng(bo + bi)
    for shape in [(bo, bi, 3, 3), (bo, 2 * bi, 3, 3), (bo + 1, 2 * bi - 1, 3, 3), (2 * bo, 3 * bi, 4, 4),
                  (bo, 2 * bi, 2, 5), (bo, 3, 5, 5), (bo, 2 * bi, 2, 2)]:
        x = rng.integers(-100, 100, shape).astype(dtype)
        n = ov.nbytes(info.name, shape, dtype)
        out = np.full(n + 1, 0xA5, np.uint8)[1:]
        got = ov.pack(x, info.name, out=out)
        assert np.array_equal(got, ref_pack(info, x)), shape
        assert np.array_equal(ov.unpack(got, info.name, shape, dtype, check_padding=True), x), shape


@pytest.mark.parametrize("name", ["b_fs_yx_fsv2", "b_fs_yx_fsv4", "bs_fs_yx_bsv16_fsv2", "bs_fs_yx_bsv16_fsv4",
                                  "bs_fs_yx_bsv8_fsv2", "bs_fs_yx_bsv4_fsv4"])
@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_fsv2_fsv4_blocks_as_interleaves(name, dtype):
    """2 or 4 feature rows per block are interleaved 16 bytes of each row at a time: back-to-back
    columns (fsv2 / fsv4) and columns a bsv block apart (a partial b block, so b%16 cannot join the
    rows), whole and partial feature blocks (pad rows), x of whole steps plus a remainder; a dirty
    buffer, int8 and fp16, against the reference, and back."""
    info = next(f for f in SUPPORTED if f.name == name)
    rng = np.random.default_rng(7)
    for shape in [(3, 8, 2, 37), (5, 7, 3, 16), (2, 6, 1, 45)]:
        x = rng.integers(-100, 100, shape).astype(dtype)
        assert_packs_like_reference(info, x)


@pytest.mark.parametrize("name", ["ioyx", "gioyx", "giozyx"])
@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_planar_swaps_move_whole_kernels(name, dtype):
    """ioyx-like swaps move each kernel's y*x taps as one row of 5..31 bytes (two overlapping
    moves) or of other sizes (4, 8, 16 and from 32 bytes on); a dirty buffer, against the
    reference, and back."""
    info = next(f for f in SUPPORTED if f.name == name)
    rng = np.random.default_rng(11)
    for yx in [(3, 3), (5, 5), (2, 3), (1, 7), (2, 2), (4, 4), (1, 1), (7, 7)]:
        shape = {4: (6, 5), 5: (2, 3, 4), 6: (2, 3, 4, 1)}[info.rank] + yx
        x = rng.integers(-100, 100, shape).astype(dtype)
        assert_packs_like_reference(info, x, check_padding=False)


@pytest.mark.parametrize("name", ["o_is_yx_isv4", "os_is_yx_isv8_osv16_isv2", "os_is_yx_osv16_isv4"])
@pytest.mark.parametrize("dtype", [np.int8, np.float16])
def test_short_blocks_of_few_taps_as_a_batch(name, dtype):
    """Matrices of 2 or 4 rows of 8..15 bytes (i%4 x 3x3 taps in o_is_yx_isv4; i%2 or i%4 where
    a partial o block keeps o%16 out of the rows) run as one batch, each row read whole and the
    last one read to end at its last byte: back-to-back and spread columns, whole and partial
    blocks, a dirty buffer, against the reference, and back."""
    info = next(f for f in SUPPORTED if f.name == name)
    rng = np.random.default_rng(13)
    for oi in [(3, 8), (17, 16), (5, 7)]:
        for yx in [(3, 3), (2, 5), (3, 5), (1, 8), (2, 2), (2, 3), (1, 7)]:
            shape = oi + yx
            x = rng.integers(-100, 100, shape).astype(dtype)
            assert_packs_like_reference(info, x)


@pytest.mark.parametrize("dtype", [np.int8, np.float16])
@pytest.mark.parametrize("batch", [1, 2, 3])
def test_weight_format_on_small_batch_activations(batch, dtype):
    """os_is_yx_isv16_osv16 on activations of batch 1..3: one or two osv rows of each y*x
    column's 16x16 block hold data. The engine fills each tile of blocks, scatters the valid
    elements into it, and (outputs of 4 MiB and more) streams the tile out past the caches:
    against the reference, with partial last tiles, and with a non-zero pad value."""
    info = next(f for f in SUPPORTED if f.name == "os_is_yx_isv16_osv16")
    rng = np.random.default_rng(batch)
    for shape in [(batch, 32, 37, 61), (batch, 16, 9, 7), (batch, 48, 1, 1), (batch, 16, 131, 131)]:
        x = rng.integers(1, 120, shape).astype(dtype)
        buf = ov.pack(x, info.name)
        assert np.array_equal(buf, ref_pack(info, x)), shape
        assert np.array_equal(ov.unpack(buf, info.name, shape, dtype, check_padding=True), x)
    assert ov.nbytes(info.name, (1, 16, 131, 131), np.int8) >= 4 << 20  # the streamed case
    # A non-zero pad value, into a dirty out= buffer, both below and above the streaming size.
    lay = ov.parse_format(info.name)
    tiles = [(t.dim, t.size, None) for t in lay.tiles]
    for shape in [(batch, 32, 41, 43), (batch, 16, 131, 131)]:
        x = rng.integers(1, 120, shape).astype(dtype)
        n = ov.nbytes(info.name, shape, dtype)
        expected = ref.pack_transpose(x, lay.logical, lay.outer, tiles, pad_value=-3)
        for shift in (1, 17):  # misaligned: the streamed stores' head, 16-byte step and tail
            got = ov.pack(x, info.name, pad_value=-3, out=dirty_out(n, shift))
            assert np.array_equal(got, expected), (shape, shift)
    # Zero padding, batch 1: whole blocks are shuffled out of each column's values (SpreadPlan), with
    # 32-byte, 16-byte or plain stores as the start of out= allows, streamed or not.
    for shape in [(batch, 32, 41, 43), (batch, 16, 131, 131)]:
        x = rng.integers(1, 120, shape).astype(dtype)
        n = ov.nbytes(info.name, shape, dtype)
        expected = ref_pack(info, x)
        for shift in (0, 16, 8, 1):
            assert np.array_equal(ov.pack(x, info.name, out=dirty_out(n, shift)), expected), (shape, shift)


def _index_coded(name, shape):
    x = (np.arange(int(np.prod(shape)), dtype=np.int32) + 1).reshape(shape)
    buf = ov.pack(x, name).view(np.int32)
    return x, buf


@pytest.mark.parametrize("name, shape, fn", [
    ("b_fs_yx_fsv16", (2, 20, 3, 2), lambda b, f, y, x, s: cl.b_fs_yx_fsv(b, f, y, x, s, (0,) * 4, (0,) * 4, 16)),
    ("b_fs_yx_fsv32", (1, 33, 2, 3), lambda b, f, y, x, s: cl.b_fs_yx_fsv(b, f, y, x, s, (0,) * 4, (0,) * 4, 32)),
    ("fs_b_yx_fsv32", (3, 40, 2, 2), lambda b, f, y, x, s: cl.fs_b_yx_fsv32(b, f, y, x, s, (0,) * 4, (0,) * 4)),
    ("bs_fs_zyx_bsv16_fsv32", (17, 33, 2, 1, 2),
     lambda b, f, z, y, x, s: cl.bs_fs_zyx_bsv_fsv(b, f, z, y, x, s, (0,) * 5, (0,) * 5, 16, 32)),
    ("os_is_yx_isv16_osv16", (17, 20, 3, 3),
     lambda o, i, y, x, s: cl.os_is_zyx_isv_osv(o, i, 0, y, x, (s[0], s[1], 1, s[2], s[3]), 16, 16)),
    ("os_is_zyx_isv16_osv16", (17, 20, 2, 3, 1),
     lambda o, i, z, y, x, s: cl.os_is_zyx_isv_osv(o, i, z, y, x, s, 16, 16)),
    ("os_is_yx_osv16_isv16", (33, 5, 1, 2),
     lambda o, i, y, x, s: cl.os_is_zyx_osv_isv(o, i, 0, y, x, (s[0], s[1], 1, s[2], s[3]), 16, 16)),
    ("os_is_zyx_osv32_isv16", (40, 17, 2, 1, 1),
     lambda o, i, z, y, x, s: cl.os_is_zyx_osv_isv(o, i, z, y, x, s, 32, 16)),
    ("os_is_yx_isa8_osv8_isv4", (9, 40, 2, 2),
     lambda o, i, y, x, s: cl.g_os_is_zyx_isa_osv_isv(0, o, i, 0, y, x, (1, s[0], s[1], 1, s[2], s[3]), 8, 8, 4)),
    ("os_is_yx_isv8_osv16_isv2", (20, 32, 2, 1),  # I % 16 == 0 (docs/openvino.md §7, item 5)
     lambda o, i, y, x, s: cl.g_os_is_zyx_isa_osv_isv(0, o, i, 0, y, x, (1, s[0], s[1], 1, s[2], s[3]), 8, 16, 2)),
    ("g_os_is_yx_isv8_osv16_isv2", (2, 32, 16, 1, 2),
     lambda g, o, i, y, x, s: cl.g_os_is_zyx_isa_osv_isv(g, o, i, 0, y, x, (s[0], s[1], s[2], 1, s[3], s[4]), 8, 16,
                                                         2)),
    ("os_is_yx_osa4_isa8_osv8_isv4", (40, 33, 1, 2),
     lambda o, i, y, x, s: cl.os_is_zyx_osa4_isa8_osv8_isv4(o, i, 0, y, x, (s[0], s[1], 1, s[2], s[3]), False)),
    ("os_is_yx_osa4_isa8_osv8_isv4_swizzled_by_4", (40, 33, 1, 2),
     lambda o, i, y, x, s: cl.os_is_zyx_osa4_isa8_osv8_isv4(o, i, 0, y, x, (s[0], s[1], 1, s[2], s[3]), True)),
    ("os_is_zyx_osa4_isa8_osv8_isv4_swizzled_by_4", (33, 40, 2, 1, 1),
     lambda o, i, z, y, x, s: cl.os_is_zyx_osa4_isa8_osv8_isv4(o, i, z, y, x, s, True)),
    ("os_is_yx_osv32_isv4_swizzled_by_2", (40, 6, 2, 1),
     lambda o, i, y, x, s: cl.os_is_yx_osv32_isv4_swizzled_by_2(o, i, y, x, s)),
    ("os_zyxi_osv16", (20, 3, 2, 1, 2), lambda o, i, z, y, x, s: cl.os_zyxi_osv16(o, i, z, y, x, s)),
    ("gs_oi_yxs_gsv16_yxsv4", (20, 1, 1, 3, 3), lambda g, o, i, y, x, s: cl.gs_oi_yxs_gsv_yxsv4(g, y, x, s, 16)),
    ("gs_oi_yxs_gsv4_yxsv4", (5, 1, 1, 2, 3), lambda g, o, i, y, x, s: cl.gs_oi_yxs_gsv_yxsv4(g, y, x, s, 4)),
    ("g_os_zyx_is_osv16_isv4", (2, 17, 6, 1, 2, 2),
     lambda g, o, i, z, y, x, s: cl.g_os_zyx_is_osv_isv(g, o, i, z, y, x, s, 16, 4)),
    ("g_os_zyx_is_osv32_isv16", (1, 33, 17, 2, 1, 1),
     lambda g, o, i, z, y, x, s: cl.g_os_zyx_is_osv_isv(g, o, i, z, y, x, s, 32, 16)),
    ("is_os_yx_osa8_isv16_osv4", (33, 17, 2, 1), lambda o, i, y, x, s: cl.is_os_yx_osa8_isv16_osv4(o, i, y, x, s)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_opencl_index_functions(name, shape, fn):
    x, buf = _index_coded(name, shape)
    idx = np.indices(shape)
    where = fn(*idx, shape)
    assert np.array_equal(buf[where], x)


@given(st.sampled_from([f for f in SUPPORTED if f.kind == "data" and f.rank >= 4]), st.data(),
       st.sampled_from([np.int8, np.float16, np.float32]))
def test_data_padding_round_trip(info, data, dtype):
    shape = tuple(data.draw(st.integers(1, 5 if i > 1 else 20)) for i in range(info.rank))
    lo = [data.draw(st.integers(0, 3)) for _ in shape]
    hi = [data.draw(st.integers(0, 3)) for _ in shape]
    if info.name == "fs_b_yx_fsv32":
        lo[0] = hi[0] = 0
    x = (np.random.default_rng(1).integers(1, 100, shape)).astype(dtype)
    buf = ov.pack(x, info.name, padding=(lo, hi), pad_value=0)
    assert np.array_equal(buf, ref_pack(info, x, lo, hi))
    assert np.array_equal(ov.unpack(buf, info.name, shape, dtype, pad_lo=lo, pad_hi=hi, check_padding=True), x)


def test_fully_connected_formats_flatten_4d():
    x = np.arange(2 * 3 * 2 * 2, dtype=np.int16).reshape(2, 3, 2, 2)
    for name in ("bs_fs_fsv8_bsv8", "bs_f_bsv16", "os_i_osv16__ai8"):
        assert np.array_equal(ov.pack(x, name), ov.pack(x.reshape(2, 12), name))
        assert np.array_equal(ov.unpack(ov.pack(x, name), name, x.shape, np.int16), x)
    assert ov.nbytes("os_i_osv16__ai8", (20, 5), np.int8) == 2 * 8 * 16
    assert ov.packed_shape("os_iyx_osv32__ai32", (33, 5, 1, 1)) == (2, 32, 1, 1, 32)


@pytest.fixture(scope="module")
def onednn():
    oracle = Oracle.load()
    if oracle is None:
        if os.environ.get("CI"):
            pytest.fail("oneDNN (onednn-cpu-gomp==2023.2.0) is not installed; CI installs tests/requirements.txt")
        pytest.skip("oneDNN oracle not installed")
    return oracle


@pytest.mark.parametrize("info", [f for f in SUPPORTED if f.onednn], ids=lambda f: f.name)
def test_against_onednn_reorder(onednn, info):
    rng = np.random.default_rng(5)
    shapes = boundary_shapes(info)
    for shape in shapes[:: max(1, len(shapes) // 6)]:
        for dtype in (np.int8, np.float16):
            x = rng.integers(1, 100, shape).astype(dtype)
            if info.rank == 2 and x.ndim != 2:
                x = x.reshape(x.shape[0], -1)
            expected = onednn.reorder(x, info.onednn)
            assert np.array_equal(ov.pack(x, info.name), expected), (shape, dtype)


def test_onednn_padding_equals_padded_tensor(onednn):
    x = np.random.default_rng(2).integers(1, 100, (2, 20, 3, 2)).astype(np.int8)
    lo, hi = (1, 3, 1, 0), (0, 2, 1, 2)
    padded = np.pad(x, list(zip(lo, hi)))
    assert np.array_equal(ov.pack(x, "b_fs_yx_fsv16", pad_lo=lo, pad_hi=hi), onednn.reorder(padded, "aBcd16b"))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: ov.pack(np.zeros((1, 1, 1, 1)), "b_fs_qq_fsv16"), LayoutError, "unknown clDNN format"),
    (lambda: ov.pack(np.zeros((1, 1, 1, 1)), "nv12"), UnsupportedError, "image2d"),
    (lambda: ov.pack(np.zeros((1, 1, 1)), "b_fs_yx_fsv16"), LayoutError, "rank 4"),
    (lambda: ov.pack(np.zeros((1, 1, 1, 1)), "b_fs_yx_fsv16", pad_lo=(0, -1, 0, 0)), LayoutError,
     "pad_lo: every entry must be >= 0"),
    (lambda: ov.pack(np.zeros((1, 1, 1, 1)), "os_iyx_osv16", pad_lo=(1, 0, 0, 0)), UnsupportedError, "no padding"),
    (lambda: ov.pack(np.zeros((1, 40, 1, 1)), "fs_b_yx_fsv32", pad_lo=(1, 0, 0, 0)), UnsupportedError, "batch"),
    (lambda: ov.pack(np.zeros((4, 2, 1, 3, 3)), "gs_oi_yxs_gsv4_yxsv4"), UnsupportedError, "O = I = 1"),
    (lambda: ov.pack(np.zeros((1, 17, 1, 1), np.int8), "b_fs_yx_fsv16", out=np.zeros(10, np.uint8)), LayoutError,
     "10 bytes"),
    (lambda: ov.pack(np.zeros((1, 1, 1, 1), np.int8), "b_fs_yx_fsv16", padding=((0,) * 4,)), TypeError, "padding"),
    (lambda: ov.unpack(np.full(64, 9, np.uint8), "b_fs_yx_fsv16", (1, 1, 2, 2), np.int8, check_padding=True),
     LayoutError, "is padding"),
    (lambda: ov.pack(np.zeros((1, 1, 1, 1)), "os_is_yx_osv32_isv2"), UnsupportedError, "int4"),
    (lambda: ov.unpack(np.zeros(64, np.uint8), "b_fs_yx_fsv16", (1, 1.0, 2, 2), np.int8), TypeError,
     "shape: dimensions must be integers"),
    (lambda: ov.nbytes("b_fs_yx_fsv16", (1, 3.5, 2, 2), np.int8), TypeError, "shape: dimensions must be integers"),
    (lambda: ov.unpack(np.zeros(64, np.uint8), "b_fs_yx_fsv16", (1, 1, 2, 2), "half-float"), TypeError,
     "dtype: 'half-float'"),
    (lambda: ov.pack(np.zeros((1, 1, 1, 1), np.uint8), "b_fs_yx_fsv16", pad_value=-1), ValueError,
     "pad_value: -1 does not fit uint8"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_cli_explain_and_formats(capsys):
    assert main(["explain", "b_fs_yx_fsv16", "--shape", "2,2,2,2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "i = 0 => [b=0; f=0; y=0; x=0] == [b=0; fs=0; y=0; x=0; fsv=0];"
    assert out[17] == "i = 16 => [b=0; f=0; y=0; x=1] == [b=0; fs=0; y=0; x=1; fsv=0];"
    assert out[3] == "i = 2 => padding == [b=0; fs=0; y=0; x=0; fsv=2];"
    assert main(["explain", "nChw16c", "--shape", "1,2,1,1", "--limit", "2"]) == 0
    assert "more" in capsys.readouterr().out
    assert main(["formats"]) == 0
    out = capsys.readouterr().out
    assert "os_is_yx_isv8_osv16_isv2" in out and "left out" in out
    assert main(["explain", "nonsense", "--shape", "1"]) == 2
