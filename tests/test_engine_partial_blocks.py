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
    """An output of 16 MiB or more takes the streaming stores (docs/design.md §3.12): the whole
    blocks of each row of blocks go through one batched streaming transpose, the last alone."""
    from npupack import plan

    o, i = 608, 13999
    layout = BlockedLayout([Dim("O", o, (16,)), Dim("I", i, (16,)), Dim("Y", 1), Dim("X", 1)],
                           [("O", 0), ("I", 0), ("Y", 0), ("X", 0), ("I", 1), ("O", 1)], np.float16)
    text = plan.describe(layout, (o, i, 1, 1), np.float16)
    assert "strategy: batch_pairs" in text and "streaming stores: yes" in text, text
    x = np.random.default_rng(5).integers(-2000, 2000, (o, i, 1, 1)).astype(np.float16)
    packed = layout.pack(x)
    assert np.array_equal(packed, reference(x, np.float16(0)))
    assert np.array_equal(layout.unpack(packed), x)
