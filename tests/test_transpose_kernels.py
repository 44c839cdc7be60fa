"""The batched transpose under every kernel path, against NumPy: the narrow kernels (9..16
columns, the shape of 3x3 kernels' taps in DC weights and clDNN's weight formats) have an AVX-512
and an AVX2 variant of the 3x3 rotation kernel; the CPU picks one and the tests force the others
(a CPU without a variant runs the next one down). Every matrix's last row ends exactly at the end
of the source buffer and the destination starts dirty, so a read past the matrix or a write
outside a column shows as a wrong byte or, under AddressSanitizer, as an error."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npupack import LayoutError, _core

PATHS = ["auto", "avx512", "avx2", "ssse3", "scalar"]


def _batch(rng, rows, cols, count, eb, src_stride, src_step):
    """A source buffer holding `count` rows x cols matrices of eb-byte elements, the last
    matrix's last row ending at the buffer's end; and the matrices as an int array
    (count, rows, cols) of element values, read through NumPy strides (the reference)."""
    size = (count - 1) * src_step + (rows - 1) * src_stride + cols * eb
    src = rng.integers(0, 256, size, dtype=np.uint8)
    dt = np.dtype(f"<u{eb}")
    view = np.lib.stride_tricks.as_strided(src, (count, rows, cols * eb), (src_step, src_stride, 1))
    return src, view.copy().view(dt).reshape(count, rows, cols)


def _expected(mats, eb, dst_stride, dst_step, size, fill):
    """The destination a correct transpose leaves: column c of matrix i at i * dst_step +
    c * dst_stride, its rows back to back; every other byte keeps `fill`."""
    out = np.full(size, fill, np.uint8)
    count, rows, cols = mats.shape
    cols_bytes = np.ascontiguousarray(mats.transpose(0, 2, 1)).view(np.uint8).reshape(count, cols, rows * eb)
    view = np.lib.stride_tricks.as_strided(out, (count, cols, rows * eb), (dst_step, dst_stride, 1), writeable=True)
    view[...] = cols_bytes
    return out


def _check(rows, cols, count, eb, path, *, row_pad=0, col_pad=0, gap=0, seed=0):
    src_stride = cols * eb + row_pad
    dst_stride = rows * eb + col_pad
    _check_strides(rows, cols, count, eb, path, src_stride, rows * src_stride + gap, dst_stride,
                   cols * dst_stride + gap, seed)


def _check_strides(rows, cols, count, eb, path, src_stride, src_step, dst_stride, dst_step, seed):
    rng = np.random.default_rng(seed)
    src, mats = _batch(rng, rows, cols, count, eb, src_stride, src_step)
    size = (count - 1) * dst_step + (cols - 1) * dst_stride + rows * eb + 64
    dst = np.full(size, 0xA5, np.uint8)
    before = src.copy()
    _core.transpose_batch(src, src_stride, src_step, dst, dst_stride, dst_step, rows, cols, count, eb, path=path)
    np.testing.assert_array_equal(dst, _expected(mats, eb, dst_stride, dst_step, size, 0xA5),
                                  err_msg=f"rows={rows} cols={cols} count={count} eb={eb} path={path}")
    assert np.array_equal(src, before)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("eb", [1, 2])
def test_3x3_taps_every_row_count(path, eb):
    """Nine columns, rows back to back (the 3x3 rotation kernels: 64-row blocks of bytes or 32 of
    halves under AVX-512, 32 / 16 under AVX2): every row count up to past three AVX-512 blocks,
    so each kernel meets a matrix shorter than its block, exactly its block, and an overlapping
    last block; one, two and three matrices per batch (pairs of 16-row byte matrices)."""
    for rows in range(1, 200):
        for count in (1, 2, 3):
            _check(rows, 9, count, eb, path, seed=rows * 7 + count)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("eb", [1, 2])
def test_3x3_taps_in_a_strided_batch(path, eb):
    """DC weights' batches: the matrices of a kernel group lie a whole kernel apart (gap), and the
    columns of another layout may lie further apart than the rows (col_pad); rows that are not
    back to back (row_pad) take the network kernels instead of the rotation."""
    for rows in (16, 31, 32, 33, 63, 64, 65, 96, 128, 130):
        for gap, col_pad, row_pad in ((0, 0, 0), (1152, 0, 0), (40, 0, 0), (0, 24, 0), (0, 0, 3), (17, 7, 1)):
            _check(rows, 9, 3, eb, path, row_pad=row_pad, col_pad=col_pad, gap=gap, seed=rows + gap)


@pytest.mark.parametrize("path", PATHS)
def test_narrow_columns_other_than_nine(path):
    """10..16 columns (kernels of other widths) on both element sizes, through the same dispatch."""
    for cols in range(10, 17):
        for eb in (1, 2):
            for rows in (8, 15, 16, 17, 32, 33, 64, 65):
                _check(rows, cols, 2, eb, path, seed=cols * 100 + rows)


@settings(max_examples=150, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 24), count=st.integers(1, 4), eb=st.sampled_from([1, 2, 4, 8]),
       row_pad=st.integers(0, 9), col_pad=st.integers(0, 9), gap=st.integers(0, 200), path=st.sampled_from(PATHS),
       seed=st.integers(0, 2**32 - 1))
def test_random_batches(rows, cols, count, eb, row_pad, col_pad, gap, path, seed):
    _check(rows, cols, count, eb, path, row_pad=row_pad, col_pad=col_pad, gap=gap, seed=seed)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("eb", [1, 2])
def test_short_matrices_whose_columns_continue_from_one_to_the_next(path, eb):
    """DC weights' short channel block: per kernel of a group a few channels x taps, rows back to
    back in the source, and each column continued by the next matrix's (dst_step = rows). Byte
    matrices are gathered side by side and moved as one tall matrix, in slices of 32 KiB
    (docs/design.md §3.3); 300 matrices of 31 x 25 take several slices."""
    for rows in (1, 2, 3, 9, 17, 31):
        for cols in (2, 9, 25):
            for count in (1, 2, 4, 32, 33, 300):
                for gap, col_pad in ((0, 0), (5, 3), (2961, 64)):
                    _check_strides(rows, cols, count, eb, path, cols * eb, rows * cols * eb + gap,
                                   count * rows * eb + col_pad, rows * eb, seed=rows * cols + count + gap)


@pytest.mark.parametrize("path", PATHS)
def test_fp16_watch_of_the_3x3_kernels(path):
    """transpose_batch_finite16 moves the halves as transpose_batch does and reports whether one
    of them was INF or NaN (1 all finite, 0 not); shapes no testing kernel takes (fewer than 16
    rows, or not 9 columns back to back, or no AVX2) return -1 and write nothing."""
    rng = np.random.default_rng(5)
    for rows in (8, 15, 16, 31, 32, 33, 64, 100):
        count = 3
        halves = rng.standard_normal((count, rows, 9)).astype(np.float16)
        expected_cols = np.ascontiguousarray(halves.transpose(0, 2, 1))
        for bad in (None, np.inf, -np.inf, np.nan):
            src = halves.copy()
            if bad is not None:
                src[count - 1, rows - 1, 8] = bad  # the last half read
            dst = np.full((count, 9, rows), 7, np.float16)
            got = _core.transpose_batch(src.view(np.uint8).ravel(), 18, rows * 18, dst.view(np.uint8).ravel(), rows * 2,
                                        rows * 18, rows, 9, count, 2, finite16=True, path=path)
            if got == -1:
                assert rows < 16 or path in ("ssse3", "scalar")
                assert np.all(dst == 7)
                continue
            assert got == (1 if bad is None else 0), (rows, bad)
            want = expected_cols.copy()
            if bad is not None:
                want[count - 1, 8, rows - 1] = bad
            np.testing.assert_array_equal(dst.view(np.uint16), want.view(np.uint16))


def test_bad_batches_are_refused_before_anything_is_written():
    src = np.zeros(64 * 9, np.uint8)
    dst = np.full(64 * 9, 3, np.uint8)
    with pytest.raises(LayoutError, match="smaller than the batch"):
        _core.transpose_batch(src, 9, 576, dst, 64, 576, 64, 9, 2, 1)
    with pytest.raises(LayoutError, match="smaller than the batch"):
        _core.transpose_batch(src, 9, 0, dst[:-1], 64, 0, 64, 9, 1, 1)
    with pytest.raises(LayoutError, match="stride"):
        _core.transpose_batch(src, 8, 0, dst, 64, 0, 64, 9, 1, 1)
    with pytest.raises(LayoutError, match="eb"):
        _core.transpose_batch(src, 9, 0, dst, 64, 0, 64, 9, 1, 3)
    with pytest.raises(LayoutError, match="overflows"):
        _core.transpose_batch(src, 9, 2**62, dst, 64, 0, 64, 9, 4, 1)
    with pytest.raises(LayoutError, match="unknown kernel path"):
        _core.transpose_batch(src, 9, 0, dst, 64, 0, 64, 9, 1, 1, path="avx1024")
    with pytest.raises(LayoutError, match="read-only"):
        ro = dst.copy()
        ro.flags.writeable = False
        _core.transpose_batch(src, 9, 0, ro, 64, 0, 64, 9, 1, 1)
    assert np.all(dst == 3)


def test_fp16_watch_refuses_rows_off_the_half_boundary():
    # The watch reads its rows as halves: a source, row stride or matrix step at an odd byte is refused.
    src = np.zeros(2 * 16 * 18 + 1, np.uint8)
    dst = np.zeros(2 * 16 * 18, np.uint8)
    for s, stride, step in ((src[1:], 18, 16 * 18), (src[:-1], 19, 16 * 19), (src[:-1], 18, 16 * 18 + 1)):
        with pytest.raises(LayoutError, match="2-byte boundaries"):
            _core.transpose_batch(s, stride, step, dst, 32, 16 * 18, 16, 9, 1, 2, finite16=True)
