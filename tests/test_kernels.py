"""The kernel tester (docs/design.md §4.9): every transpose microkernel of the list that this CPU
runs, called by name whatever the dispatch would choose, against NumPy's transpose. The source
counts up (an iota of bytes, so every misplaced byte shows); the destination starts 0xA5 with
guard bytes before and after and columns further apart than the rows, so a byte written outside
a column, or outside the buffer, shows; the edge sizes of each kernel's tile (1, tile - 1, tile,
tile + 1, 2 * tile + 3) and source rows further apart than their bytes are tried wherever the
kernel takes them. Then every forced kernel path of the public batch transpose gives the same
bytes. The list's other sections: tests/test_kernel_sections.py."""
import itertools

import numpy as np
import pytest

from npupack import LayoutError, _core

ALL = _core.kernel_list()
KERNELS = [k for k in ALL if k["op"].startswith("transpose")]
RUNS = [k for k in KERNELS if k["runs"]]
PATHS = ["auto", "avx512", "avx2", "ssse3", "scalar"]
GUARD = 48
FILL = 0xA5
# Sizes for a dimension the kernel takes a run-time count of (tile 0): around every tile edge of
# the list's kernels (2..7 gathered columns, 9..16 narrow columns, 3..7 spread rows, 9 and 25
# taps).
COUNTS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 16, 17, 20, 24, 25, 26, 33]


def _edges(tile):
    if tile == 0:
        return COUNTS
    return sorted({n for n in (1, tile - 1, tile, tile + 1, 2 * tile + 3) if n >= 1})


def _iota(n):
    return (np.arange(n) % 251).astype(np.uint8)


def _expected(src, rows, cols, count, eb, src_stride, src_step, dst_stride, dst_step, size):
    """The destination a correct transpose leaves (NumPy's transpose of the matrices read through
    strides), every other byte FILL."""
    dt = np.dtype(f"V{eb}")
    mats = np.lib.stride_tricks.as_strided(src, (count, rows, cols * eb), (src_step, src_stride, 1))
    elems = np.ascontiguousarray(mats).view(dt).reshape(count, rows, cols)
    cols_bytes = np.ascontiguousarray(elems.transpose(0, 2, 1)).view(np.uint8).reshape(count, cols, rows * eb)
    out = np.full(size, FILL, np.uint8)
    view = np.lib.stride_tricks.as_strided(out[GUARD:], (count, cols, rows * eb), (dst_step, dst_stride, 1),
                                           writeable=True)
    view[...] = cols_bytes
    return out, elems


def _run(k, rows, cols, count, *, row_pad=0, col_pad=0, gap=0, dst_stride=None, dst_step=None, shift=None,
         stream=False):
    """Runs kernel k on one case; None when the kernel does not take it, else checks the bytes and
    returns True. The destination starts `shift` bytes past a 64-byte line (None: wherever NumPy
    puts it, GUARD bytes into a new array)."""
    eb = k["elem"]
    src_stride = cols * eb + row_pad
    dst_stride = rows * eb + col_pad if dst_stride is None else dst_stride
    src_step = rows * src_stride + gap
    dst_step = cols * dst_stride + gap if dst_step is None else dst_step
    src_extent = (count - 1) * src_step + (rows - 1) * src_stride + cols * eb
    dst_extent = (count - 1) * dst_step + (cols - 1) * dst_stride + rows * eb
    src_full = _iota(src_extent + 2 * GUARD)
    src = src_full[GUARD:GUARD + src_extent]
    before = src_full.copy()
    raw = np.full(dst_extent + 2 * GUARD + 64, FILL, np.uint8)
    at = 0 if shift is None else (-(raw.ctypes.data + GUARD) % 64 + shift) % 64  # GUARD bytes before stay FILL
    dst_full = raw[at:at + dst_extent + 2 * GUARD]
    try:
        got = _core.kernel_run(k["name"], src, src_stride, dst_full[GUARD:GUARD + dst_extent], dst_stride, rows, cols,
                               count, src_step, dst_step, stream)
    except LayoutError as e:  # the kernel's takes, or for a stream the binding's own alignment rule
        assert "does not take" in str(e) or (stream and "stream needs" in str(e)), e
        return None
    want, elems = _expected(src, rows, cols, count, eb, src_stride, src_step, dst_stride, dst_step, dst_full.size)
    case = (f"{k['name']} rows={rows} cols={cols} count={count} row_pad={row_pad} col_pad={col_pad} gap={gap} "
            f"dst_stride={dst_stride} dst_step={dst_step} shift={shift} stream={stream}")
    np.testing.assert_array_equal(dst_full, want, err_msg=case)
    assert np.array_equal(src_full, before), case
    if k["op"] == "transpose-finite":
        halves = elems.view(np.uint16) if elems.dtype.itemsize == 2 else None
        finite = not np.any((halves & 0x7C00) == 0x7C00)
        assert got == (1 if finite else 0), case
    return True


@pytest.mark.parametrize("k", RUNS, ids=[k["name"] for k in RUNS])
def test_every_kernel_against_numpy(k):
    """Edge sizes of the kernel's tile on both sides, back-to-back and padded rows and columns,
    one matrix and a batch of three (a gap between matrices); at least one case must be taken."""
    taken = 0
    for rows, cols in itertools.product(_edges(k["tile_rows"]), _edges(k["tile_cols"])):
        for count, row_pad, col_pad, gap in ((1, 0, 0, 0), (1, 5, 3, 0), (3, 0, 0, 0), (3, 0, 7, 11), (3, 2, 7, 11)):
            taken += bool(_run(k, rows, cols, count, row_pad=row_pad, col_pad=col_pad, gap=gap))
    assert taken > 0, f"{k['name']} took none of its edge sizes"


def test_streamed_kernels_against_numpy():
    """transpose_stream's kernels with non-temporal stores: back-to-back columns, a 16-byte
    aligned destination; each streaming kernel must take some of these shapes."""
    streamed = set()
    for k in RUNS:
        eb = k["elem"]
        for rows, cols in itertools.product((8, 16, 32), (8, 9, 16, 17, 32, 33, 40)):
            src = _iota(rows * cols * eb)
            size = rows * cols * eb
            raw = np.full(size + 2 * GUARD + 64, FILL, np.uint8)
            at = GUARD + (-(raw.ctypes.data + GUARD)) % 64
            dst = raw[at:at + size]
            try:
                got = _core.kernel_run(k["name"], src, cols * eb, dst, rows * eb, rows, cols, stream=True)
            except LayoutError as e:
                assert "does not take" in str(e), e
                continue
            streamed.add(k["name"])
            want = np.full(raw.size, FILL, np.uint8)
            want[at:at + size] = np.ascontiguousarray(
                src.view(f"V{eb}").reshape(rows, cols).T).view(np.uint8).ravel()
            np.testing.assert_array_equal(raw, want, err_msg=f"{k['name']} {rows}x{cols} streamed")
            assert got in (0, 1)
    expected = {n for n in ("transpose_x8_32x16_avx2", "transpose_x8_32x8_avx2", "transpose_x8_16x32_avx2",
                            "transpose_x16_16x8_avx2", "transpose-finite_x16_16x8_avx2", "transpose_x8_16x8_sse2",
                            "transpose_x16_8x8_sse2", "transpose_x16_32xn_avx512vbmi",
                            "transpose-finite_x16_32xn_avx512vbmi", "transpose_x16_16x9_avx2",
                            "transpose-finite_x16_16x9_avx2", "transpose_x32_4x4_sse2")
                if any(k["name"] == n for k in RUNS)}
    assert streamed == expected


# name -> (row counts, column counts) of the kernels that stream whole-line columns.
WHOLE_LINES = {"transpose_x8_64xn_avx512vbmi": ((64, 128), (9, 25)),
               "transpose_x16_32xn_avx512vbmi": ((32, 64), (9, 25)),
               "transpose-finite_x16_32xn_avx512vbmi": ((32, 64), (9, 25)), "transpose_x8_32x9_avx2": ((64, 128), (9,)),
               "transpose_x16_16x9_avx2": ((32, 64), (9,)), "transpose-finite_x16_16x9_avx2": ((32, 64), (9,)),
               "transpose_x32_4x4_sse2": ((16,), (18,))}
WHOLE_LINE_RUNS = [k for k in RUNS if k["name"] in WHOLE_LINES]


@pytest.mark.parametrize("k", WHOLE_LINE_RUNS, ids=[k["name"] for k in WHOLE_LINE_RUNS])
def test_whole_line_kernels_stream_batches_of_line_aligned_columns(k):
    """The kernels that write each column of a block as whole 64-byte lines (tap rotation: DC
    weights' 9 or 25 columns of one channel block per kernel; 4x4 of 4-byte elements: 16 rows)
    stream a batch (columns 2048 bytes apart, matrices 64 bytes apart) where every column starts a
    line, and refuse it streamed otherwise (a misaligned destination, a stride or step that is
    not a multiple of 64, a row count that leaves a partial line); they still take all of these
    unstreamed."""
    counts, widths = WHOLE_LINES[k["name"]]
    for cols in widths:
        _whole_lines_case(k, counts, cols)


def _whole_lines_case(k, counts, cols):
    for rows in counts:
        for count in (1, 3):
            assert _run(k, rows, cols, count, dst_stride=4096, dst_step=rows * k["elem"], stream=True, shift=0), \
                (rows, count)
    # Back-to-back columns of one matrix 16 bytes past a line: the binding lets them stream (as
    # transpose_stream does), so the kernel's own rule must refuse them.
    back_to_back = counts[0] * k["elem"]
    assert _run(k, counts[0], cols, 1, dst_stride=back_to_back, stream=True, shift=0)
    assert _run(k, counts[0], cols, 1, dst_stride=back_to_back, stream=True, shift=16) is None
    assert _run(k, counts[0], cols, 1, dst_stride=back_to_back, shift=16)
    for change in (dict(shift=16), dict(shift=32), dict(dst_stride=4096 + 16), dict(dst_step=80),
                   dict(rows=counts[0] + 1)):
        case = {"rows": counts[0], "dst_stride": 4096, "dst_step": 128, "shift": 0, **change}  # no overlaps
        rows = case.pop("rows")
        assert _run(k, rows, cols, 3, stream=True, **case) is None, change
        assert _run(k, rows, cols, 3, **case), change


FINITE_RUNS = [k for k in RUNS if k["op"] == "transpose-finite"]


@pytest.mark.parametrize("k", FINITE_RUNS, ids=[k["name"] for k in FINITE_RUNS])
def test_finite_kernels_tell_finite_from_not(k):
    """The iota sources above hold INF / NaN halves, so there a finite kernel must report 0; here a
    batch of finite halves must report 1 and the same batch with one INF or NaN (first, middle or
    last half) 0, with the bytes moved either way, plain and, for the whole-line kernels,
    streamed into line-aligned columns."""
    import npupack

    rows, cols = (WHOLE_LINES[k["name"]][0][0], WHOLE_LINES[k["name"]][1][0]) if k["name"] in WHOLE_LINES \
        else (max(k["tile_rows"], 16), k["tile_cols"] or 9)
    count = 3 if k["name"] in WHOLE_LINES else 1  # the 16x8 kernel takes single matrices only
    finite = np.random.default_rng(8).standard_normal(count * rows * cols).astype(np.float16)
    forms = [(rows * 2, cols * rows * 2, False)]  # (dst_stride, dst_step, stream)
    if k["name"] in WHOLE_LINES:
        forms.append((4096, rows * 2, True))
    for bad in (None, 0, finite.size // 2, finite.size - 1):
        halves = finite.copy()
        if bad is not None:
            halves[bad] = np.inf if bad % 2 == 0 else np.nan
        src = halves.view(np.uint8)
        want = halves.reshape(count, rows, cols).transpose(0, 2, 1)
        for dst_stride, dst_step, stream in forms:
            raw = npupack.aligned_empty((count - 1) * dst_step + (cols - 1) * dst_stride + rows * 2)
            got = _core.kernel_run(k["name"], src, cols * 2, raw, dst_stride, rows, cols, count, rows * cols * 2,
                                   dst_step, stream)
            moved = np.lib.stride_tricks.as_strided(raw.view(np.float16), (count, cols, rows),
                                                    (dst_step, dst_stride, 2))
            assert np.array_equal(moved.view(np.uint16), want.view(np.uint16)), (bad, stream)
            assert got == (1 if bad is None else 0), (bad, stream)


def test_kernel_list_follows_the_grammar():
    """<operation>_<element>_<tile>_<isa>, the element size and tile matching the entry, and the
    plain C++ kernels last (the list ends in the reference)."""
    for k in KERNELS:
        op, elem, tile, isa = k["name"].split("_")
        assert op == k["op"] and elem == f"x{8 * k['elem']}" and isa == k["isa"], k
        if isa == "scalar":
            assert tile == "any"
        else:
            r, c = tile.split("x")
            assert r == (str(k["tile_rows"]) if k["tile_rows"] else "n"), k
            assert c == (str(k["tile_cols"]) if k["tile_cols"] else "n"), k
    assert [k["isa"] for k in KERNELS[-4:]] == ["scalar"] * 4
    assert len({k["name"] for k in KERNELS}) == len(KERNELS)


def test_kernel_run_refusals():
    src = np.zeros(64 * 9, np.uint8)
    dst = np.zeros(64 * 9, np.uint8)
    with pytest.raises(LayoutError, match="unknown kernel"):
        _core.kernel_run("transpose_x8_1x1_avx1024", src, 9, dst, 64, 64, 9)
    with pytest.raises(LayoutError, match="does not take"):
        _core.kernel_run("transpose_x8_8x8_sse2" if any(k["name"] == "transpose_x8_8x8_sse2" for k in RUNS)
                         else "transpose_x8_any_scalar", src, 9, dst, 64, 64, 9, stream=True)
    with pytest.raises(LayoutError, match="smaller than the batch"):
        _core.kernel_run("transpose_x8_any_scalar", src, 9, dst[:-1], 64, 64, 9)
    with pytest.raises(LayoutError, match="stride"):
        _core.kernel_run("transpose_x8_any_scalar", src, 8, dst, 64, 64, 9)
    with pytest.raises(LayoutError, match="read-only"):
        ro = dst.copy()
        ro.flags.writeable = False
        _core.kernel_run("transpose_x8_any_scalar", src, 9, ro, 64, 64, 9)
    missing = [k for k in KERNELS if not k["runs"]]
    if missing:
        with pytest.raises(LayoutError, match="this CPU lacks"):
            _core.kernel_run(missing[0]["name"], src, 9, dst, 64, 64, 9)


@pytest.mark.parametrize("eb", [1, 2, 4, 8])
def test_every_forced_path_gives_the_same_bytes(eb):
    """The public batch transpose under every kernel path (each CPU-less path falls back to the
    next narrower one) over shapes that reach every kernel of the list: identical bytes, and
    those of NumPy."""
    rows_set = (1, 2, 3, 4, 7, 8, 16, 17, 32, 33, 64, 65) if eb <= 2 else (1, 3, 4, 5, 9)
    cols_set = (1, 2, 3, 7, 8, 9, 12, 16, 17, 32, 33) if eb <= 2 else (1, 4, 5, 9)
    for rows, cols, count, pad in itertools.product(rows_set, cols_set, (1, 2), (0, 3)):
        src_stride, dst_stride = cols * eb + pad, rows * eb + pad
        src_step, dst_step = rows * src_stride, cols * dst_stride
        src = _iota((count - 1) * src_step + (rows - 1) * src_stride + cols * eb)
        size = (count - 1) * dst_step + (cols - 1) * dst_stride + rows * eb
        want, _ = _expected(src, rows, cols, count, eb, src_stride, src_step, dst_stride, dst_step, size + 2 * GUARD)
        for path in PATHS:
            dst = np.full(size + 2 * GUARD, FILL, np.uint8)
            _core.transpose_batch(src, src_stride, src_step, dst[GUARD:GUARD + size], dst_stride, dst_step, rows, cols,
                                  count, eb, path=path)
            np.testing.assert_array_equal(dst, want, err_msg=f"{rows}x{cols} count={count} pad={pad} path={path}")
