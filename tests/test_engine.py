"""The generic BlockedLayout engine: offset_of against an independent Python formula, the fast
pack/unpack path against the offset_of-per-element reference path, on random layouts."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import npupack
from npupack import LayoutError
from npupack.layout import BlockedLayout, Dim


def python_offset(dims, order, eb, strides, index):
    """Independent offset for layouts without ragged dims (docs/openvino.md §3.2): padded coordinate
    p = i + pad_lo, digit of tile j = (p // div_j) % n_j (default div_j = product of the later
    tiles), outer digit p // T; packed or given byte strides per loop (inner to outer)."""
    digits = {}
    for d, i in zip(dims, index):
        p = i + d.pad_lo
        t = 1
        for lv in range(len(d.tiles), 0, -1):
            div = d.divisors[lv - 1] if d.divisors else t
            digits[(d.name, lv)] = (p // div) % d.tiles[lv - 1]
            t *= d.tiles[lv - 1]
        digits[(d.name, 0)] = p // t
    ext = {}
    for d in dims:
        prod = int(np.prod(d.tiles)) if d.tiles else 1
        padded = -(-(d.pad_lo + d.extent + d.pad_hi) // d.align) * d.align
        ext[(d.name, 0)] = -(-padded // prod)
        for lv, t in enumerate(d.tiles, 1):
            ext[(d.name, lv)] = t
    stride, off = eb, 0
    resolved = {}
    for key in reversed(order):
        resolved[key] = strides.get(key, stride)
        stride = resolved[key] * ext[key]
    for key in order:
        off += digits[key] * resolved[key]
    return off


@st.composite
def layouts(draw, ragged_ok=True, padding=True):
    ndim = draw(st.integers(1, 4))
    dims = []
    for i in range(ndim):
        extent = draw(st.integers(1, 9))
        ragged = ragged_ok and draw(st.booleans())
        ntiles = 1 if ragged else draw(st.integers(0, 3))
        tiles = tuple(draw(st.integers(1, 5)) for _ in range(ntiles))
        pad = dict(pad_lo=draw(st.integers(0, 3)), pad_hi=draw(st.integers(0, 3)), align=draw(st.integers(1, 4)),
                   divisors=swizzle(tiles, draw(st.permutations(range(ntiles))))) \
            if padding and not ragged and draw(st.booleans()) else {}
        dims.append(Dim("abcd"[i], extent, tiles, ragged, **pad))
    parts = [(d.name, lv) for d in dims for lv in range(len(d.tiles) + 1)]
    order = list(draw(st.permutations(parts)))
    # Each dim's parts must be outer to inner: sort every dim's levels into the slots it took.
    for d in dims:
        slots = [i for i, p in enumerate(order) if p[0] == d.name]
        for lv, i in enumerate(slots):
            order[i] = (d.name, lv)
    eb = draw(st.sampled_from([1, 2, 4, 8]))
    return dims, order, eb


def swizzle(tiles, significance):
    """Explicit divisors for tiles ordered by `significance` (a permutation; first = lowest)."""
    if not tiles or list(significance) == list(range(len(tiles)))[::-1]:
        return None
    div, w = [0] * len(tiles), 1
    for j in significance:
        div[j] = w
        w *= tiles[j]
    return tuple(div)


@given(layouts(ragged_ok=False), st.data())
def test_offset_of_matches_independent_formula(spec, data):
    dims, order, eb = spec
    layout = BlockedLayout(dims, order, np.dtype(f"u{eb}"))
    for _ in range(10):
        idx = [data.draw(st.integers(0, d.extent - 1)) for d in dims]
        assert layout.offset_of(idx) == python_offset(dims, order, eb, {}, idx)


@given(layouts(), st.integers(0, 2**32))
def test_fast_path_equals_reference_path(spec, seed):
    dims, order, eb = spec
    dtype = np.dtype(f"u{eb}")
    layout = BlockedLayout(dims, order, dtype)
    x = np.random.default_rng(seed).integers(0, 2**(8 * eb) - 1, size=layout.shape, dtype=dtype, endpoint=True)
    fast = layout.pack(x, pad_value=7)
    ref = layout.pack(x, pad_value=7, reference=True)
    assert np.array_equal(fast, ref)
    assert np.array_equal(layout.unpack(fast), x)
    assert np.array_equal(layout.unpack(fast, reference=True), x)
    # Every element slot is distinct and the rest is padding.
    offsets = {layout.offset_of(i) for i in np.ndindex(*layout.shape)}
    assert len(offsets) == x.size and max(offsets) + eb <= layout.nbytes
    if not layout.has_holes:
        assert layout.nbytes == x.nbytes
    mask = np.ones(layout.nbytes, dtype=bool)
    for o in offsets:
        mask[o:o + eb] = False
    assert np.all(fast.view(np.uint8)[mask].reshape(-1, eb).view(dtype) == 7) if mask.any() else True


@given(layouts(), st.sampled_from([0, 7]), st.integers(0, 2**32))
def test_every_hole_filled_into_a_dirty_buffer(spec, pad_value, seed):
    """Before a walk the pad value goes only into the steps of each padded dim's outer loop that
    can hold holes (docs/design.md §3.5); every hole of a buffer full of garbage must still get
    it, with lower padding, alignment, swizzled digits and ragged dims too, and nothing past
    nbytes is touched."""
    dims, order, eb = spec
    dtype = np.dtype(f"u{eb}")
    layout = BlockedLayout(dims, order, dtype)
    x = np.random.default_rng(seed).integers(0, 2**(8 * eb) - 1, size=layout.shape, dtype=dtype, endpoint=True)
    dirty = np.full(layout.nbytes + 3, 0xAB, np.uint8)
    got = layout.pack(x, pad_value=pad_value, out=dirty)
    assert np.array_equal(got, layout.pack(x, pad_value=pad_value, reference=True))
    assert (dirty[layout.nbytes:] == 0xAB).all()


@given(layouts(ragged_ok=False, padding=False), st.data(), st.integers(0, 2**32))
def test_zero_padding_into_a_dirty_buffer_with_stride_gaps(spec, data, seed):
    """Explicit strides leave gaps; packing with zero padding into a buffer full of garbage must
    still zero every byte that holds no element (the fast path skips its fill pass only when its
    copy loop zeroes the gaps itself)."""
    dims, order, eb = spec
    ext = {(d.name, 0): -(-d.extent // (int(np.prod(d.tiles)) if d.tiles else 1)) for d in dims}
    ext.update({(d.name, lv): t for d in dims for lv, t in enumerate(d.tiles, 1)})
    strides, stride = {}, eb
    for key in reversed(order):
        stride += eb * data.draw(st.integers(0, 3))  # a gap after this loop's inner block
        strides[key] = stride
        stride *= ext[key]
    dtype = np.dtype(f"u{eb}")
    layout = BlockedLayout(dims, order, dtype, strides)
    x = np.random.default_rng(seed).integers(1, 2**(8 * eb) - 1, size=layout.shape, dtype=dtype, endpoint=True)
    dirty = np.full(layout.nbytes + 3, 0xAB, np.uint8)
    got = layout.pack(x, out=dirty)
    assert np.array_equal(got, layout.pack(x, reference=True))
    assert (dirty[layout.nbytes:] == 0xAB).all()


def test_gap_between_two_levels_of_one_dim_is_zeroed():
    """Regression: channel blocks 64 bytes apart holding 32 bytes each (an NVDLA cube with a
    wide line stride and H = W = 1) packed into a dirty buffer."""
    layout = BlockedLayout([Dim("C", 48, (16,)), Dim("H", 1), Dim("W", 1)], [("C", 0), ("H", 0), ("W", 0), ("C", 1)],
                           np.int16, {("C", 0): 64, ("H", 0): 64})
    x = np.arange(1, 49, dtype=np.int16).reshape(48, 1, 1)
    got = layout.pack(x, out=np.full(layout.nbytes, 0xAB, np.uint8)).view(np.int16)
    assert np.array_equal(got, layout.pack(x, reference=True).view(np.int16))
    assert not got[16:32].any() and got[32] == 17


@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 3), st.integers(0, 3), st.integers(0, 2**32))
def test_explicit_strides_and_noncontiguous_input(h, w, extra_line, extra_plane, seed):
    dims = [Dim("H", h), Dim("W", w, (4,))]
    order = [("W", 0), ("H", 0), ("W", 1)]
    line = 4 * 2 + 2 * extra_line
    plane = h * line + 2 * extra_plane
    layout = BlockedLayout(dims, order, np.int16, {("H", 0): line, ("W", 0): plane})
    base = np.random.default_rng(seed).integers(-999, 999, size=(2 * h, 3 * w), dtype=np.int16)
    x = base[::2, ::-3]  # non-contiguous, negative stride
    packed = layout.pack(x)
    for i in np.ndindex(h, w):
        assert layout.offset_of(i) == python_offset(dims, order, 2, {("H", 0): line, ("W", 0): plane}, i)
        assert packed[layout.offset_of(i):layout.offset_of(i) + 2].view(np.int16)[0] == x[i]
    assert np.array_equal(layout.unpack(packed), x)


@st.composite
def peeled_layouts(draw):
    """Layouts whose outermost loop steps over the blocks of a ragged dim, the last block short
    (docs/design.md §3.13), with any other dims inside (padded, swizzled or ragged too)."""
    dims, order, eb = draw(layouts())
    tile = draw(st.integers(2, 6))
    i = draw(st.integers(0, len(dims) - 1))  # the ragged dim: any logical position
    a = dims[i].name
    dims[i] = Dim(a, tile * draw(st.integers(1, 4)) + draw(st.integers(1, tile - 1)), (tile,), True)
    order = [p for p in order if p[0] != a]
    order.insert(draw(st.integers(0, len(order))), (a, 1))
    return dims, [(a, 0)] + order, eb


@given(peeled_layouts(), st.sampled_from([0, 7]), st.booleans(), st.integers(0, 2**32))
def test_short_block_peeled_off_packs_and_unpacks_like_the_reference(spec, pad_value, fortran, seed):
    """The full blocks and the short one are packed as two layouts of their own (docs/design.md
    §3.13): into a dirty buffer, from C- and F-ordered inputs, the bytes and the values read back
    must be the reference path's."""
    dims, order, eb = spec
    dtype = np.dtype(f"u{eb}")
    layout = BlockedLayout(dims, order, dtype)
    x = np.random.default_rng(seed).integers(0, 2**(8 * eb) - 1, size=layout.shape, dtype=dtype, endpoint=True)
    if fortran:
        x = np.asfortranarray(x)
    dirty = np.full(layout.nbytes + 5, 0xAB, np.uint8)
    got = layout.pack(x, pad_value=pad_value, out=dirty)
    assert np.array_equal(got, layout.pack(x, pad_value=pad_value, reference=True))
    assert (dirty[layout.nbytes:] == 0xAB).all()
    back = np.asfortranarray(np.zeros_like(x)) if fortran else np.zeros_like(x)
    assert np.array_equal(layout.unpack(got, out=back), x)


def test_ragged_dc_like_layout_matches_hand_formula():
    # K = 5 in tiles of 2 (ragged), C = 3 in tiles of 2 (ragged), nest K/2, C/2, K2, C2.
    layout = BlockedLayout([Dim("K", 5, (2,), True), Dim("C", 3, (2,), True)],
                           [("K", 0), ("C", 0), ("K", 1), ("C", 1)], np.int8)
    assert layout.nbytes == 15 and not layout.has_holes
    assert [layout.offset_of((k, c)) for k in range(5) for c in range(3)] == \
        [0, 1, 4, 2, 3, 5, 6, 7, 10, 8, 9, 11, 12, 13, 14]


@pytest.mark.parametrize("kwargs, match", [
    (dict(dims=[Dim("a", 0)], order=[("a", 0)]), "extent must be >= 1"),
    (dict(dims=[Dim("a", 3, (0,))], order=[("a", 0), ("a", 1)]), "tile sizes"),
    (dict(dims=[Dim("a", 3, (2, 2), True)], order=[("a", 0), ("a", 1), ("a", 2)]), "exactly one tile"),
    (dict(dims=[Dim("a", 3, (2,))], order=[("a", 1), ("a", 0)]), "outer count first"),
    (dict(dims=[Dim("a", 3, (2,))], order=[("a", 0)]), "every part"),
    (dict(dims=[Dim("a", 3)], order=[("b", 0)]), "unknown dim"),
    (dict(dims=[Dim("a", 3), Dim("b", 2)], order=[("a", 0), ("b", 0)], byte_strides={("a", 0): 1}),
     "smaller than"),
    (dict(dims=[Dim("a", 3, (2,), True), Dim("b", 2)], order=[("a", 0), ("b", 0), ("a", 1)],
          byte_strides={("b", 0): 64}), "ragged"),
    (dict(dims=[Dim("a", 2**40), Dim("b", 2**40)], order=[("a", 0), ("b", 0)]), "overflows"),
])
def test_bad_descriptors(kwargs, match):
    with pytest.raises(LayoutError, match=match):
        BlockedLayout(dtype=np.int8, **kwargs)


def test_pack_argument_errors():
    layout = BlockedLayout([Dim("a", 4, (4,))], [("a", 0), ("a", 1)], np.int16)
    with pytest.raises(LayoutError, match="dimensions"):
        layout.pack(np.zeros((4, 1), np.int16))
    with pytest.raises(LayoutError, match="extent"):
        layout.pack(np.zeros(5, np.int16))
    with pytest.raises(LayoutError, match="4-byte elements"):
        layout.pack(np.zeros(4, np.int32))
    with pytest.raises(LayoutError, match="needed"):
        layout.pack(np.zeros(4, np.int16), out=np.zeros(7, np.uint8))
    ro = np.zeros(8, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(LayoutError, match="read-only"):
        layout.pack(np.zeros(4, np.int16), out=ro)
    with pytest.raises(TypeError, match="uint8"):
        layout.pack(np.zeros(4, np.int16), out=np.zeros(8, np.int8))
    with pytest.raises(LayoutError, match="holds 7 bytes"):
        layout.unpack(np.zeros(7, np.uint8))
    with pytest.raises(LayoutError, match="out of range"):
        layout.offset_of([4])


@given(st.sampled_from([1, 2, 4, 8]), st.integers(1, 40), st.integers(1, 40), st.integers(0, 6),
       st.booleans(), st.integers(0, 2**32))
def test_transposing_layouts_hit_simd_blocks(eb, rows, cols, tile, unpack_strided, seed):
    """(a, b) stored b-major: the engine runs this as a blocked 2-D transpose; sizes up to 40 cover
    the SIMD blocks (16x8, 8x8, 4x4) and their scalar edges, with and without a padded tile."""
    dtype = np.dtype(f"u{eb}")
    dims = [Dim("a", rows, (tile,) if tile else ()), Dim("b", cols)]
    order = [("a", 0), ("b", 0), ("a", 1)] if tile else [("b", 0), ("a", 0)]
    layout = BlockedLayout(dims, order, dtype)
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**(8 * eb) - 1, size=(rows, cols), dtype=dtype, endpoint=True)
    packed = layout.pack(x)
    assert np.array_equal(packed, layout.pack(x, reference=True))
    if not tile:
        assert np.array_equal(packed.view(dtype), x.T.reshape(-1))
    out = np.zeros((rows, 2 * cols), dtype)[:, ::2] if unpack_strided else None
    back = layout.unpack(packed, out=out)
    assert np.array_equal(back, x)


@given(st.sampled_from([1, 2, 4]), st.sampled_from([4, 8, 16]), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**32))
def test_grouped_transpose_columns(eb, t, ob, ib, y, x, seed):
    """[O/t][I/t][Y][X][I%t][O%t] with exact blocks: the logical side is contiguous over i%t, y, x
    (several loops), which the engine transposes as one group through a column table."""
    dtype = np.dtype(f"u{eb}")
    dims = [Dim("O", ob * t, (t,)), Dim("I", ib * t, (t,)), Dim("Y", y), Dim("X", x)]
    order = [("O", 0), ("I", 0), ("Y", 0), ("X", 0), ("I", 1), ("O", 1)]
    layout = BlockedLayout(dims, order, dtype)
    v = np.random.default_rng(seed).integers(0, 2**(8 * eb) - 1, size=layout.shape, dtype=dtype, endpoint=True)
    packed = layout.pack(v)
    assert np.array_equal(packed, layout.pack(v, reference=True))
    assert np.array_equal(layout.unpack(packed), v)


@pytest.mark.parametrize("eb", [1, 2])
@pytest.mark.parametrize("cols", range(8, 18))
def test_narrow_transposes_every_width_and_row_count(eb, cols):
    """Rows of 9..16 columns (3x3 kernels: 9 taps) take the whole-row transpose network: every
    width around it, row counts around its 8/16/32-row blocks, contiguous and padded row strides
    (the last row's read must end at its last element), against the reference path and NumPy."""
    dtype = np.dtype(f"u{eb}")
    layout_of = {}
    rng = np.random.default_rng(cols)
    for rows in (8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100):
        if rows not in layout_of:
            layout_of[rows] = BlockedLayout([Dim("a", rows), Dim("b", cols)], [("b", 0), ("a", 0)], dtype)
        layout = layout_of[rows]
        for extra in (0, 3):
            full = rng.integers(0, 2**(8 * eb) - 1, size=(rows, cols + extra), dtype=dtype, endpoint=True)
            x = full[:, :cols]
            packed = layout.pack(x)
            assert np.array_equal(packed.view(dtype), x.T.reshape(-1)), (rows, extra)
            assert np.array_equal(packed, layout.pack(x, reference=True))
            assert np.array_equal(layout.unpack(packed), x)


def test_wide_byte_transposes_of_16_to_31_rows():
    """Byte matrices of 16..31 rows (b_fs_yx_fsv16 int8 activations: 16 channels x H*W) and 32
    columns or more take the AVX2 wide steps (a 32-byte load per row, columns j and j + 16 in one
    register): row counts across the range, column counts around the 32-column step (the last step
    overlaps the previous one), contiguous and padded row strides, against the reference path and
    NumPy, and back."""
    rng = np.random.default_rng(5)
    for rows in (16, 17, 23, 31):
        for cols in (31, 32, 33, 47, 63, 64, 65, 100):
            layout = BlockedLayout([Dim("a", rows), Dim("b", cols)], [("b", 0), ("a", 0)], np.dtype("u1"))
            for extra in (0, 5):
                x = rng.integers(0, 255, size=(rows, cols + extra), dtype=np.uint8, endpoint=True)[:, :cols]
                packed = layout.pack(x)
                assert np.array_equal(packed, x.T.reshape(-1)), (rows, cols, extra)
                assert np.array_equal(packed, layout.pack(x, reference=True))
                assert np.array_equal(layout.unpack(packed), x)


@pytest.mark.parametrize("eb, row_counts", [(1, (32, 33, 40, 47, 63, 64, 65, 100)),
                                             (2, (16, 17, 23, 24, 31, 32, 33, 40))])
def test_tall_transposes(eb, row_counts):
    """Transposes with many rows and 8 columns or more take the AVX2 tall steps (32 rows of bytes
    or 16 rows of halves, two networks in one register, one store per column): row and column
    counts around the step, contiguous and padded row strides, against the reference path and
    NumPy."""
    dtype = np.dtype(f"u{eb}")
    rng = np.random.default_rng(3)
    for rows in row_counts:
        for cols in (8, 9, 15, 16, 17, 33):
            layout = BlockedLayout([Dim("a", rows), Dim("b", cols)], [("b", 0), ("a", 0)], dtype)
            for extra in (0, 5):
                full = rng.integers(0, 2**(8 * eb) - 1, size=(rows, cols + extra), dtype=dtype, endpoint=True)
                x = full[:, :cols]
                packed = layout.pack(x)
                assert np.array_equal(packed.view(dtype), x.T.reshape(-1)), (rows, cols, extra)
                assert np.array_equal(packed, layout.pack(x, reference=True))
                assert np.array_equal(layout.unpack(packed), x)


@pytest.mark.parametrize("o_extent, pad_lo", [(64, 0), (96, 0), (33, 0), (31, 0), (1, 0), (64, 3), (30, 2)])
@pytest.mark.parametrize("threads", [1, 2])
def test_swizzled_dims_whole_and_partial(o_extent, pad_lo, threads):
    """Swizzled digits (o%4 above (o/4)%8, as clDNN's *_swizzled_by_4): the fast path runs a
    swizzled dim stored as whole blocks directly and one with a partial block or padding through
    a copy extended to whole blocks and filled with the pad value. Against the offset_of path,
    into a dirty buffer, with a pad value, one and two threads (the tensor is large enough to be
    split), and back."""
    dims = [Dim("o", o_extent, (4, 8), pad_lo=pad_lo, divisors=(1, 4)), Dim("i", 40, (8, 4)),
            Dim("y", 13), Dim("x", 29)]
    order = [("o", 0), ("i", 0), ("y", 0), ("x", 0), ("o", 1), ("i", 1), ("o", 2), ("i", 2)]
    layout = BlockedLayout(dims, order, np.int16)
    x = np.random.default_rng(o_extent).integers(-2**15, 2**15, layout.shape).astype(np.int16)
    expected = layout.pack(x, pad_value=7, reference=True)
    with npupack.num_threads(threads):
        dirty = np.full(layout.nbytes + 1, 0xAB, np.uint8)[1:]
        wide = np.zeros(x.shape[:3] + (2 * x.shape[3],), np.int16)
        wide[..., ::2] = x
        got = layout.pack(wide[..., ::2], pad_value=7, out=dirty)  # a strided view
        assert np.array_equal(got, expected)
        assert np.array_equal(layout.unpack(got), x)


@pytest.mark.parametrize("dtype, inner", [(np.uint8, 2), (np.uint8, 4), (np.uint8, 8), (np.uint16, 4), (np.uint32, 2)])
@pytest.mark.parametrize("o_extent", [32, 37])
def test_short_contiguous_inner_block_moves_as_one_element(dtype, inner, o_extent):
    """An innermost block of 2..8 bytes contiguous on both sides (i%4 of clDNN's 1x1 isv4
    weights) is moved as one wider element: o%16 x i/4 becomes a transpose of those elements.
    A partial o block is padded with a multi-byte pad value (repeated to the wider element);
    against the offset_of path, into a dirty buffer, and back."""
    dims = [Dim("o", o_extent, (16,)), Dim("i", 3 * inner, (inner,))]
    layout = BlockedLayout(dims, [("o", 0), ("i", 0), ("o", 1), ("i", 1)], dtype)
    x = np.random.default_rng(inner).integers(1, 200, layout.shape).astype(dtype)
    pad = {1: 0xA7, 2: 0x1234, 4: 0x12345678}[np.dtype(dtype).itemsize]
    expected = layout.pack(x, pad_value=pad, reference=True)
    dirty = np.full(layout.nbytes + 1, 0xAB, np.uint8)[1:]
    assert np.array_equal(layout.pack(x, pad_value=pad, out=dirty), expected)
    assert np.array_equal(layout.pack(x, reference=True), layout.pack(x))
    assert np.array_equal(layout.unpack(expected), x)
