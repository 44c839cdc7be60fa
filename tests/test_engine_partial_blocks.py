"""The engine on blocked weights whose logically contiguous dim ends in a partial block (clDNN's
os_is_yx_isv16_osv16 and oneDNN's OIhw16i16o with I % 16 != 0, docs/openvino.md): the whole blocks
are transposed in batches and the last one alone, against a NumPy reference that pads to whole
blocks and permutes the axes, packing and unpacking."""
import numpy as np
import pytest

from npupack.layout import BlockedLayout, Dim


def reference(x, pad_value):
    """(O, I, Y, X) padded with ``pad_value`` to whole 16-blocks, as [O/16][I/16][Y][X][16i][16o]."""
    o, i, y, w = x.shape
    po, pi = -(-o // 16) * 16, -(-i // 16) * 16
    full = np.full((po, pi, y, w), pad_value, dtype=x.dtype)
    full[:o, :i] = x
    return full.reshape(po // 16, 16, pi // 16, 16, y, w).transpose(0, 2, 4, 5, 3, 1).copy().view(np.uint8).ravel()


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float32])
@pytest.mark.parametrize("shape", [(16, 17, 1, 1), (33, 1000, 1, 1), (48, 250, 3, 3), (20, 31, 1, 2), (64, 15, 1, 1),
                                   (1000, 1000, 1, 1), (5, 40, 2, 1)])
@pytest.mark.parametrize("pad_value", [0, 3])
def test_partial_last_block_of_i(dtype, shape, pad_value):
    o, i, y, w = shape
    layout = BlockedLayout([Dim("O", o, (16,)), Dim("I", i, (16,)), Dim("Y", y), Dim("X", w)],
                           [("O", 0), ("I", 0), ("Y", 0), ("X", 0), ("I", 1), ("O", 1)], dtype)
    rng = np.random.default_rng(o * 7 + i)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    packed = layout.pack(x, pad_value=pad_value)
    assert np.array_equal(packed, reference(x, dtype(pad_value)))
    assert np.array_equal(layout.unpack(packed).view(np.uint8), x.view(np.uint8))
    # A strided view of the same values packs the same bytes.
    wide = np.zeros((o, i + 5, y, w), dtype)
    wide[:, :i] = x
    assert np.array_equal(layout.pack(wide[:, :i], pad_value=pad_value), packed)


def test_partial_last_block_streamed():
    """An output of 16 MiB or more takes the streaming stores (docs/design.md §3.12). I's two
    digits (I % 16 != 0) are one loop clipped to I (docs/design.md §3.2), so each row of blocks is
    one wide streaming transpose; the plan is split across threads by O blocks, so no batch runs."""
    from npupack import plan

    o, i = 608, 13999
    layout = BlockedLayout([Dim("O", o, (16,)), Dim("I", i, (16,)), Dim("Y", 1), Dim("X", 1)],
                           [("O", 0), ("I", 0), ("Y", 0), ("X", 0), ("I", 1), ("O", 1)], np.float16)
    text = plan.describe(layout, (o, i, 1, 1), np.float16)
    assert "strategy: transpose" in text and "streaming stores: yes" in text, text
    assert "I/outer*I%16  extent 14000" in text, text
    x = np.random.default_rng(5).integers(-2000, 2000, (o, i, 1, 1)).astype(np.float16)
    packed = layout.pack(x)
    assert np.array_equal(packed, reference(x, np.float16(0)))
    assert np.array_equal(layout.unpack(packed), x)


@pytest.mark.parametrize("buffer", ["new", "aligned", "16 past a line"])
@pytest.mark.parametrize("threads", [1, 2])
def test_column_group_of_64_byte_columns_streamed(buffer, threads):
    """OIhw16i16o f32 past 16 MiB: the column group's 16 rows of 4 bytes make each packed column
    one 64-byte line, streamed where every column starts a line (a new result, an
    npupack.aligned_empty buffer) and stored plainly where not (16 bytes past a line). The same
    bytes every way, the partial last blocks of O and I included, nothing written past nbytes."""
    import npupack
    from npupack import plan

    o, i = 1000, 1030
    layout = BlockedLayout([Dim("O", o, (16,)), Dim("I", i, (16,)), Dim("Y", 3), Dim("X", 3)],
                           [("O", 0), ("I", 0), ("Y", 0), ("X", 0), ("I", 1), ("O", 1)], np.float32)
    text = plan.describe(layout, layout.shape, np.float32)
    assert "strategy: column_group" in text and "streaming stores: yes" in text, text
    x = np.random.default_rng(6).standard_normal(layout.shape).astype(np.float32)
    n = layout.nbytes
    with npupack.num_threads(threads):
        if buffer == "new":
            packed = layout.pack(x, pad_value=0)
            assert packed.ctypes.data % 64 == 0
        else:
            raw = npupack.aligned_empty(n + 64 + 16)
            out = raw[16:] if buffer == "16 past a line" else raw
            out[:] = 0xA5
            packed = layout.pack(x, out=out)
            assert (out[n:] == 0xA5).all()
    assert np.array_equal(packed, reference(x, np.float32(0)))


@pytest.mark.parametrize("buffer", ["new", "aligned", "16 past a line"])
@pytest.mark.parametrize("tag, shape", [("nChw16c", (1, 200, 100, 110)), ("OIhw16i16o", (2100, 1030, 1, 1))])
def test_16_row_blocks_of_4_byte_elements_stream_whole_lines(tag, shape, buffer):
    """From 8 MiB, transposes of 16 rows of float32 (nChw16c's channel blocks over a plane,
    OIhw16i16o's 16x16 blocks of 1x1 weights) write each 64-byte column with streaming stores
    where the output is line-aligned, plain stores where not: the reference bytes every way,
    holes included, nothing past nbytes."""
    import npupack
    from npupack import plan
    from tests.reference import blocked as ref_blocked

    lay = npupack.Layout.parse(tag)
    text = plan.describe(tag, shape, np.float32)
    assert "streaming stores: yes, in whole 64-byte lines" in text, text
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    n = lay.nbytes(shape, np.float32)
    if buffer == "new":
        packed = npupack.pack(x, tag)
        assert packed.ctypes.data % 64 == 0
    else:
        raw = npupack.aligned_empty(n + 64 + 16)
        out = raw[16:] if buffer == "16 past a line" else raw
        out[:] = 0xA5
        packed = npupack.pack(x, tag, out=out)
        assert (out[n:] == 0xA5).all()
    expected = ref_blocked.pack_transpose(x, lay.logical, lay.outer, [(t.dim, t.size, None) for t in lay.tiles])
    assert np.array_equal(packed, expected)
