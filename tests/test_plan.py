"""npupack.plan: the printed plan of the C++ fast path (docs/design.md §3.12).

The strategies expected below follow from the rules of docs/design.md §3.12 applied by hand to
each layout (which loops merge, which pair transposes, which sizes cross a threshold), not from
the engine's output; each case is also packed and unpacked and compared with the per-element
reference path (offset_of, docs/design.md §2.2), so that the plan described is one that gives the
right bytes.
"""
import re
import resource
import time
import tracemalloc

import numpy as np
import pytest

import npupack
from npupack import nvdla, openvino, plan
from npupack.errors import LayoutError

ORDER = ("extended", "single_run", "column_group", "row_group", "tile_blocks", "tiled_nest", "batch_pairs",
         "transpose", "copy_rows", "copy_runs", "reference")


def _strategy_line(text):
    m = re.search(r"^strategy: (\w+) \(entry (\d+) of (\d+)", text, re.M)
    assert m, text
    return m.group(1), int(m.group(2)), int(m.group(3))


def _bound(layout, shape, dtype):
    if isinstance(layout, npupack.BlockedLayout):
        return layout
    if isinstance(layout, str):
        layout = npupack.Layout.parse(layout)
    return layout.bind(shape, dtype)


def _check_bytes(layout, shape, dtype, pad_value=0):
    """Fast path == reference path, both ways, for the described case."""
    bound = _bound(layout, shape, dtype)
    rng = np.random.default_rng(7)
    x = rng.integers(0, 100, size=bound.shape).astype(dtype)
    fast = bound.pack(x, pad_value=pad_value)
    ref = bound.pack(x, pad_value=pad_value, reference=True)
    np.testing.assert_array_equal(fast, ref)
    np.testing.assert_array_equal(bound.unpack(fast), x)


def test_list_order_ends_in_reference():
    assert plan.strategies() == ORDER


# (layout, shape, dtype, strategy when packing, why by the rules of §3.12)
KNOWN = [
    # NCHW to NCHW: every loop merges into one contiguous run.
    ("NCHW", (2, 3, 4, 5), np.int8, "single_run"),
    # A tensor of one element in a 16-channel block: C/16 and c%16 are two digits of one padded
    # dim, contiguous on both sides: one loop over C's elements, clipped to its one element.
    ("NCHW16c", (1, 1, 1, 1), np.int8, "single_run"),
    # NCHW16c with C = 16, fp16: H*W merges; W contiguous logically, c%16 in the packed buffer:
    # a 16 x (H*W) transpose, nothing outside it.
    ("NCHW16c", (1, 16, 32, 32), np.float16, "transpose"),
    # 16x16 blocks of 1x1 weights: i%16 pairs with o%16 (16 x 16 per block), and the loop outside
    # (i/16) steps whole blocks: one batched transpose.
    ("OIHW16i16o", (64, 64, 1, 1), np.float16, "batch_pairs"),
    # 3x3 weights in OIHW16i16o, fp16: y*x and i%16 continue the logical run of o's rows:
    # grouped into one wide transpose per o block.
    ("OIHW16i16o", (64, 64, 3, 3), np.float16, "column_group"),
    # NHWC with 3 channels: rows of 3 elements under a packed-contiguous loop of H*W: transpose.
    ("NHWC", (1, 3, 20, 20), np.uint8, "transpose"),
]


@pytest.mark.parametrize("layout,shape,dtype,expected", KNOWN, ids=[f"{c[0]}-{c[3]}" for c in KNOWN])
def test_known_strategies(layout, shape, dtype, expected):
    text = plan.describe(layout, shape, dtype)
    name, pos, total = _strategy_line(text)
    assert name == expected, text
    assert (pos, total) == (ORDER.index(expected) + 1, len(ORDER))
    assert plan.strategy(layout, shape, dtype) == expected
    _check_bytes(layout, shape, dtype)


@pytest.mark.parametrize("shape", [(60, 70, 1, 1), (64, 70, 1, 1), (60, 64, 1, 1), (33, 17, 1, 1), (5, 40, 1, 1)],
                         ids=str)
@pytest.mark.parametrize("pad_value", [0, 7])
def test_digits_of_a_padded_dim_merge_into_one_clipped_loop(shape, pad_value):
    """I/16 and i%16 of OIHW16i16o with I % 16 != 0 are contiguous on both sides: one loop over I's
    elements, clipped to I, so the pair runs one wide transpose per O block (docs/design.md §3.2);
    the holes past I and O get the pad value, the bytes are NumPy's."""
    from tests.reference import blocked as ref_blocked

    text = plan.describe("OIHW16i16o", shape, np.float16, pad_value=pad_value)
    assert f"I/outer*I%16  extent {-(-shape[1] // 16) * 16}" in text, text
    lay = npupack.Layout.parse("OIHW16i16o")
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float16)
    expected = ref_blocked.pack_transpose(x, lay.logical, lay.outer, [(t.dim, t.size, None) for t in lay.tiles],
                                          np.float16(pad_value))
    assert np.array_equal(npupack.pack(x, "OIHW16i16o", pad_value=pad_value), expected)


@pytest.mark.parametrize("shape", [(1, 16, 500, 300), (1, 12, 500, 300), (1, 5, 997, 1009)], ids=str)
def test_a_lone_pair_splits_its_columns_across_threads(shape):
    """nChw16c of one channel block has no outer loop for the threads: with two threads H*W is cut
    into 4 to 8 equal chunks, an outer loop the threads share (docs/design.md §3.12), where it
    divides so; the bytes are the one-thread bytes and NumPy's."""
    from tests.reference import blocked as ref_blocked

    lay = npupack.Layout.parse("nChw16c")
    x = np.random.default_rng(11).integers(-128, 128, shape).astype(np.int8)
    hw = shape[2] * shape[3]
    divides = any(hw % steps == 0 for steps in range(4, 9))
    with npupack.num_threads(2):
        text = plan.describe("nChw16c", shape, np.int8)
        assert ("threads: 2" in text) == divides, text
        assert "strategy: transpose" in text, text  # the threads run the chunks: never a batch of them
        two = npupack.pack(x, "nChw16c")
    with npupack.num_threads(1):
        assert "threads: 1" in plan.describe("nChw16c", shape, np.int8)
        one = npupack.pack(x, "nChw16c")
    expected = ref_blocked.pack_transpose(x, lay.logical, lay.outer, [(t.dim, t.size, None) for t in lay.tiles], 0)
    assert np.array_equal(one, expected) and np.array_equal(two, expected)


@pytest.mark.parametrize("offset", [0, 16])
def test_a_lone_pair_with_row_gaps_splits_and_zeroes_every_gap(offset):
    """Horizon's aligned C: one pair whose rows leave gaps, zeroed by the pair itself. With two
    threads the rows are cut into chunks the threads share, and each chunk zeroes the gap after
    its last row (the next chunk's rows follow it); an ``out=`` full of other bytes, on a line or
    16 past one, ends up as NumPy's zero-padded tensor."""
    from npupack import horizon

    shape = (1, 160, 160, 300)  # 25,600 rows of 300 bytes, 320 apart: about 8 MB
    x = np.random.default_rng(12).integers(-128, 128, shape).astype(np.int8)
    aligned = horizon.aligned_shape(shape, np.int8, role="input")
    assert aligned == (1, 160, 160, 320)
    expected = np.zeros(aligned, np.int8)
    expected[..., :300] = x
    n = expected.nbytes
    stride = (160 * 160 * 320, 160 * 320, 320, 1)
    with npupack.num_threads(2):
        text = plan.describe(horizon._descriptor(shape, stride, np.dtype(np.int8)), shape, np.int8)
        assert "threads: 2" in text and "gap after each row zeroed" in text, text
        buf = np.full(n + 64, 0xAB, np.uint8)
        got = horizon.pad(x, aligned_shape=aligned, out=buf[offset:offset + n])
    assert np.array_equal(got.view(np.int8).reshape(aligned), expected)


def test_ragged_dc_weights_batch_the_kernels_of_a_group():
    # NVDLA DC weights (docs/nvdla.md §6.1): ragged K and C blocks; R*S is logically contiguous and
    # pairs with the channel block c%64; the kernels of a group (k%32) are the batch.
    lay = nvdla.dc_layout((70, 100, 3, 3), "int8")
    text = plan.describe(lay, lay.shape, np.int8)
    assert _strategy_line(text)[0] == "batch_pairs"
    assert "(full blocks)" in text  # ragged strides are per block
    _check_bytes(lay, lay.shape, np.int8)


def test_short_kernel_group_of_few_channels_runs_peeled():
    # K = 77 in groups of 32 with 6 channels: the full groups and the short one run as two
    # layouts whose kernel and channel loops merge (docs/design.md §3.13); 100 channels (two
    # blocks) have no merge to gain and run whole.
    lay = nvdla.dc_layout((77, 6, 3, 3), "int8")
    text = plan.describe(lay, lay.shape, np.int8)
    assert "peeled (docs/design.md §3.13)" in text and "[0, 64)" in text and "[64, 77)" in text
    _check_bytes(lay, lay.shape, np.int8)
    wide = nvdla.dc_layout((77, 100, 3, 3), "int8")
    assert "peeled" not in plan.describe(wide, wide.shape, np.int8)
    _check_bytes(wide, wide.shape, np.int8)


def test_ragged_dc_weights_1x1_copy_channel_blocks():
    # 1x1 kernels: each kernel's channel block is contiguous on both sides: one row copy each.
    lay = nvdla.dc_layout((70, 100, 1, 1), "fp16")
    text = plan.describe(lay, lay.shape, np.float16)
    assert _strategy_line(text)[0] == "copy_rows"
    assert "rows of 128 bytes" in text  # 64 channels of 2 bytes
    assert "fused into the moves" in text  # fp16: pack_checked tests what the copies move
    _check_bytes(lay, lay.shape, np.float16)


def test_strided_nvdla_feature_batches_the_lines():
    # Feature data with a line stride past the line (docs/nvdla.md §3.1): H no longer merges
    # with W, so the transposes of each line (W x 32 channels) are batched over H.
    lay = nvdla.feature_layout((1, 32, 13, 13), "int8", line_stride=13 * 32 + 64)
    text = plan.describe(lay, lay.shape, np.int8)
    assert _strategy_line(text)[0] == "batch_pairs"
    assert "holes: filled before the walk" in text  # the stride gaps
    # Dense: H and W merge, a single transpose.
    dense = nvdla.feature_layout((1, 32, 13, 13), "int8")
    assert plan.strategy(dense, dense.shape, np.int8) == "transpose"
    _check_bytes(lay, lay.shape, np.int8)


def test_partial_swizzled_block_goes_through_the_extended_copy():
    lay = openvino.parse_format("os_is_yx_osv32_isv4_swizzled_by_2")
    text = plan.describe(lay, (33, 8, 3, 3), np.int8)
    assert _strategy_line(text)[0] == "extended"
    assert "extended layout's plan:" in text
    _check_bytes(lay, (33, 8, 3, 3), np.int8)


def test_short_isv4_rows_are_grouped():
    # os_is_yx_osv16_isv4 on 3x3 kernels: i%4 rows of 4 bytes, continued by o%16 in the packed
    # buffer: folded into one tall transpose.
    lay = openvino.parse_format("os_is_yx_osv16_isv4")
    assert plan.strategy(lay, (32, 8, 3, 3), np.int8) == "row_group"
    _check_bytes(lay, (32, 8, 3, 3), np.int8)


def test_whole_block_tiles_on_sparse_blocks():
    # Activations (batch 2) in os_is_yx_isv16_osv16: 2 of 16 rows of every block valid (at most
    # 1/8): whole blocks built per tile; unpacking has no holes to write and tiles the nest.
    # 56x56 pixels: 16 rows x 16 i%16 x 3136 y*x is past the 64 KiB a column group may hold.
    lay = openvino.parse_format("os_is_yx_isv16_osv16")
    shape = (2, 32, 56, 56)
    text = plan.describe(lay, shape, np.uint8)
    assert _strategy_line(text)[0] == "tile_blocks"
    assert "at most 1/8 of the inner block valid" in text
    assert plan.strategy(lay, shape, np.uint8, direction="unpack") == "tiled_nest"
    _check_bytes(lay, shape, np.uint8)
    _check_bytes(lay, shape, np.uint8, pad_value=5)


@pytest.mark.parametrize("o, i", [(32, 356 % 64 + 16 * 3), (20, 17), (48, 1), (16, 31)])
@pytest.mark.parametrize("dtype", [np.float16, np.int8])
def test_clipped_input_block_joins_the_column_group(o, i, dtype):
    # os_is_yx_isv16_osv16 on 3x3 kernels with I % 16 != 0: i%16 of the last block is clipped; as the
    # group's slowest digit its valid columns are a prefix of the table, so the last block is one
    # narrower transpose, not a fall back to 16 x 9 blocks (docs/design.md §3.12).
    lay = openvino.parse_format("os_is_yx_isv16_osv16")
    shape = (o, i, 3, 3)
    text = plan.describe(lay, shape, dtype)
    assert _strategy_line(text)[0] == "column_group", text
    assert "holes: filled before the walk" in text
    _check_bytes(lay, shape, dtype)
    _check_bytes(lay, shape, dtype, pad_value=3)


@pytest.mark.parametrize("taps", [(3, 3), (5, 5), (7, 7)])
def test_large_dc_weights_keep_whole_taps_per_transpose(taps):
    # NVDLA DC weights past 8 MiB: x is a kernel's taps (9, 25, 49 columns), under the 64 columns
    # that whole-block tiles need; the kernels of a group stay one batched transpose of whole x.
    shape = (1536, 768) + taps if taps == (3, 3) else (512, 704) + taps
    lay = nvdla.dc_layout(shape, "int8")
    assert lay.nbytes >= 8 << 20
    assert plan.strategy(lay, lay.shape, np.int8) == "batch_pairs"


@pytest.mark.parametrize("shape", [(1, 64, 64, 64), (2, 40, 32, 128), (1, 17, 128, 128), (1, 64, 64, 65)])
@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float32])
@pytest.mark.parametrize("layout", ["NCHW16c", "NCHW32c"])
def test_rows_a_multiple_of_4k_apart(shape, dtype, layout):
    # Planes of 4 KiB and multiples (64x64 int8, 32x128, 128x128): the rows of a channel block
    # share L1 sets, and their transposes run staged through a buffer tile by tile
    # (docs/design.md §3.8). Same bytes as the per-element path, both ways, pad values included.
    _check_bytes(layout, shape, dtype)
    _check_bytes(layout, shape, dtype, pad_value=7)


@pytest.mark.parametrize("layout, shape", [("NCHW16c", (1, 64, 64, 64)), ("NCHW16c", (1, 16, 128, 128)),
                                           ("NCHW32c", (2, 64, 64, 64)), ("NCHW16c", (1, 64, 64, 63))])
def test_checked_fp16_packing_of_4k_planes(layout, shape):
    # The fp16 INF/NaN test fused into staged transposes (docs/design.md §3.8, 3.9): clean values
    # give the reference bytes; one NaN anywhere, in the first or last tile, is reported.
    bound = _bound(layout, shape, np.float16)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float16)
    buf = np.empty(bound.nbytes, np.uint8)
    assert bound._pack_finite_fp16_into(x.view(np.uint16), buf) is True
    np.testing.assert_array_equal(buf, bound.pack(x, reference=True))
    for pos in [(0, 0, 0, 0), (0, shape[1] - 1, shape[2] - 1, shape[3] - 1), (0, 5, 40, shape[3] - 2)]:
        y = x.copy()
        y[pos] = np.nan
        assert bound._pack_finite_fp16_into(y.view(np.uint16), buf) is False, pos


def test_pad_value_decides_row_gap_zeroing():
    # Rows with gaps between them (an explicit row stride) and a zero pad: the copy zeroes each gap
    # itself; with another pad value the holes are filled before the walk.
    dims = [npupack.Dim("H", 5), npupack.Dim("W", 7)]
    lay = npupack.BlockedLayout(dims, [("H", 0), ("W", 0)], np.uint8, {("H", 0): 16})
    zero = plan.describe(lay, (5, 7), np.uint8)
    assert _strategy_line(zero)[0] == "copy_rows"
    assert "gap after each row zeroed" in zero and "holes: written by the plan" in zero
    other = plan.describe(lay, (5, 7), np.uint8, pad_value=3)
    assert "holes: filled before the walk" in other
    _check_bytes(lay, (5, 7), np.uint8)
    _check_bytes(lay, (5, 7), np.uint8, pad_value=3)


def test_loops_are_listed_with_their_steps():
    text = plan.describe("NCHW16c", (1, 16, 32, 32), np.float16)
    # H and W merge into one loop of 1024 steps, 2 bytes apart logically, 32 bytes apart packed.
    assert re.search(r"H\*W\s+extent 1024\s+logical 2\s+packed 32", text), text
    assert re.search(r"C%16\s+extent 16\s+logical 2048\s+packed 2", text), text
    assert "unpack plan" in plan.describe("NCHW16c", (1, 16, 32, 32), np.float16, direction="unpack")


def test_describing_never_allocates_the_tensor():
    # A shape of 2**41 bytes: describing must not allocate (nor read, nor write) anything of that
    # size; it builds the descriptor and the plan only.
    shape = (1, 1024, 1 << 15, 1 << 15)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    start = time.perf_counter()
    try:
        text = plan.describe("NCHW16c", shape, np.float16)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 5
    assert peak < 1 << 20
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB: under 64 MiB
    assert "threads:" in text and "streaming stores: yes" in text  # 2 TiB is past every threshold


def test_describe_reads_nothing_it_is_given():
    lay = nvdla.dc_layout((8, 8, 3, 3), "int8")
    axes = lay._core.axes
    plan.describe(lay, lay.shape, np.int8)
    assert lay._core.axes == axes and lay.shape == (8, 8, 3, 3)


@pytest.mark.parametrize("kwargs,error", [
    (dict(direction="both"), ValueError),
    (dict(direction="unpack", pad_value=1), ValueError),
    (dict(pad_value=300), ValueError),
    (dict(pad_value="x"), TypeError),
])
def test_bad_options(kwargs, error):
    with pytest.raises(error):
        plan.describe("NCHW16c", (1, 16, 4, 4), np.int8, **kwargs)


def test_bad_layouts_and_shapes():
    with pytest.raises(TypeError, match="layout"):
        plan.describe(42, (1, 16, 4, 4), np.int8)
    with pytest.raises(LayoutError):
        plan.describe("NCHW16c", (1, 16, 4), np.int8)
    with pytest.raises(TypeError):
        plan.describe("NCHW16c", (1, 16, 4, 4), object)
    lay = nvdla.dc_layout((8, 8, 3, 3), "int8")
    with pytest.raises(LayoutError, match="shape"):
        plan.describe(lay, (8, 8, 3, 4), np.int8)
    with pytest.raises(LayoutError, match="dtype"):
        plan.describe(lay, lay.shape, np.float16)
