"""Kneron NPU layouts (docs/kneron.md): worked examples, the published bit tables, the v1 formulas on exhaustive
small shapes, the v2 stride rule against loop references, the high/low pass, quantisation."""
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack import LayoutError, UnsupportedError
from npupack import kneron as kn
from tests.reference import kneron_horizon as ref

V1 = [("kl520", "4W4C8B"), ("kl520", "16W1C8B")] + [(chip, name) for chip in ("kl630", "kl720")
                                                    for name in ("4W4C8B", "1W16C8B", "16W1C8B", "8W1C16B")]


def ints(rng, shape, bits):
    t = np.int8 if bits == 8 else np.int16
    return rng.integers(np.iinfo(t).min, np.iinfo(t).max, shape, endpoint=True).astype(t)


def test_worked_examples_v1():
    x = np.arange(1, 31, dtype=np.int8).reshape(3, 2, 5)
    b = kn.pack(x, "4W4C8B", chip="kl520")
    assert b.size == 128 and b[82] == x[2, 1, 4] and list(b[:5]) == [x[0, 0, 0], x[1, 0, 0], x[2, 0, 0], 0, x[0, 0, 1]]
    assert not b[20:64].any()  # pixels 5..15 of row 0 are zero
    b = kn.pack(x, "4W4C8B", chip="kl720")
    assert b.size == 64 and b[50] == x[2, 1, 4]
    y = (np.arange(120) % 100 + 1).astype(np.int8).reshape(20, 2, 3)
    b3 = kn.pack(y, "1W16C8B", chip="kl720")
    assert b3.size == 192 and b3[177] == y[17, 1, 2] and not b3.reshape(2, 2, 3, 16)[1, :, :, 4:].any()
    z = (np.arange(80) % 100 + 1).astype(np.int8).reshape(2, 2, 20)
    assert kn.pack(z, "16W1C8B", chip="kl720")[83] == z[1, 0, 19]
    assert kn.pack(z, "16W1C8B", chip="kl520")[51] == z[1, 0, 19]
    q = (np.arange(18, dtype=np.int16) + 1).reshape(1, 2, 9)
    b5 = kn.pack(q, "8W1C16B", chip="kl720")
    assert b5.size == 64 and b5[48:50].view(np.int16)[0] == q[0, 1, 8]


def test_worked_examples_v2_and_highlow():
    y = (np.arange(120) % 100 + 1).astype(np.int8).reshape(1, 20, 2, 3)
    b6 = kn.pack(y, "1W16C8B", chip="kl730", stride_npu=[96, 1, 48, 16])
    assert b6.size == 192 and b6[177] == y[0, 17, 1, 2]
    assert np.array_equal(b6, kn.pack(y[0], "1W16C8B", chip="kl720"))
    v = np.zeros((1, 1, 1, 32), np.int16)
    v[0, 0, 0, 5], v[0, 0, 0, 21] = -300, 301
    st_ = [32, 32, 32, 1]
    bh = kn.pack(v, "16W1C8BHL", chip="kl730", stride_npu=st_)
    assert (bh[5], bh[21], bh[37], bh[53]) == (0x6A, 0xFE, 22, 1)
    back = kn.unpack(bh, "16W1C8BHL", v.shape, chip="kl730", stride_npu=st_)[0, 0, 0]
    assert (back[5], back[21]) == (-300, 300)
    w = np.array([-1, 32767], np.int16).reshape(1, 1, 1, 2)
    assert list(kn.unpack(kn.pack(w, "16W1C8BHL", chip="kl730", stride_npu=[2, 2, 2, 1]), "16W1C8BHL", w.shape,
                          chip="kl730", stride_npu=[2, 2, 2, 1]).ravel()) == [-2, 32766]


def test_worked_example_quantisation():
    assert kn.quantize(0.7, radix=7, scale=1.0) == 90 and kn.dequantize(90, radix=7, scale=1.0) == np.float32(0.703125)
    q16 = kn.quantize(np.full((1, 1, 1, 1), 0.7), radix=12, scale=1.0, bits=16)
    assert q16.item() == 2867 and q16.dtype == np.int16
    buf = kn.pack(q16, "8W1C16B", chip="kl730", stride_npu=[8, 8, 8, 1])
    back = kn.unpack(buf, "8W1C16B", (1, 1, 1, 1), chip="kl730", stride_npu=[8, 8, 8, 1])
    assert back.item() == 2866 and kn.dequantize(back, radix=12, scale=1.0).item() == 0.69970703125
    assert kn.quantize(-1.3, radix=6, scale=0.5) == -42 and kn.dequantize(-42, radix=6, scale=0.5) == -1.3125
    assert kn.quantize(2.0, radix=7, scale=1.0) == 127 and kn.quantize(-2.0, radix=7, scale=1.0) == -128
    x = np.full((1, 2, 1, 1), 0.5)
    q = kn.quantize(x, radix=[7, 6], scale=[1.0, 0.5], axis=1)
    assert q.ravel().tolist() == [64, 16]
    d = kn.dequantize(q, radix=[7, 6], scale=[1.0, 0.5], axis=1)
    assert d.dtype == np.float32 and d.ravel().tolist() == [0.5, 0.5]
    halves = np.array([0.5, 1.5, 2.5, -0.5, -2.5])
    assert kn.quantize(halves, radix=0, scale=1.0).tolist() == [0, 2, 2, 0, -2]
    assert kn.quantize(halves, radix=0, scale=1.0, rounding="nearest_away").tolist() == [1, 2, 3, -1, -3]
    assert kn.quantize(np.array([1e6, -1e6]), radix=0, scale=1.0, layout="8W1C16B").tolist() == [32767, -32768]


def test_seed_bit_tables():
    """Seed 004: one entry of 4W4C8B is byte 4*pixel + channel, of 1W16C8B byte = channel, of
    16W1C8B byte = pixel."""
    x = np.arange(16, dtype=np.int8).reshape(4, 1, 4)  # x[c, 0, p] = 4c + p
    e = kn.pack(x, "4W4C8B", chip="kl720")[:16]
    assert all(e[4 * p + c] == x[c, 0, p] for p in range(4) for c in range(4))
    x = np.arange(16, dtype=np.int8).reshape(16, 1, 1)
    assert np.array_equal(kn.pack(x, "1W16C8B", chip="kl720")[:16], x.ravel().view(np.uint8))
    x = np.arange(16, dtype=np.int8).reshape(1, 1, 16)
    assert np.array_equal(kn.pack(x, "16W1C8B", chip="kl720")[:16], x.ravel().view(np.uint8))


@pytest.mark.parametrize("chip, layout", V1, ids=lambda v: v)
def test_v1_exhaustive_small_shapes(chip, layout):
    rng = np.random.default_rng(0)
    bits = 16 if layout == "8W1C16B" else 8
    cs = [1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33]
    ws = [1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33]
    for C, H, W in itertools.product(cs, (1, 2, 3), ws):
        x = ints(rng, (C, H, W), bits)
        buf = kn.pack(x, layout, chip=chip)
        assert np.array_equal(buf, ref.kneron_v1_pack(x, chip, layout)), (C, H, W)
        assert buf.size == kn.nbytes(layout, (1, C, H, W), chip=chip)
        assert np.array_equal(kn.unpack(buf, layout, (C, H, W), chip=chip, allow_input_only=True), x)


V2_CASES = ["4W4C8B", "1W16C8B", "16W1C8B", "8W1C16B", "4W4C8BHL", "1W16C8BHL", "16W1C8BHL", "RAW_8B", "RAW_16B",
            "1W16C8B_CH_COMPACT", "1W16C8BHL_CH_COMPACT", "HW4C8B_KEEP_A", "HW1C8B"]


@given(st.sampled_from(V2_CASES), st.integers(1, 20), st.integers(1, 3), st.integers(1, 9), st.integers(0, 2),
       st.integers(0, 2**32))
def test_v2_stride_rule_against_loops(layout, C, H, W, extra, seed):
    lay = kn.DataLayout.named(layout)
    if layout.startswith("4W4C8B"):
        C = min(C, 4)
    if layout == "HW4C8B_KEEP_A":
        C = 4
    if layout == "HW1C8B":
        C = 1
    shape = (1, C, H, W)
    strides = list(kn.predict_stride_npu(shape, layout))
    if layout.startswith("16W1C8B") or layout == "8W1C16B":  # extra row padding: strides not products
        strides[2] += 16 * extra
        strides[1] = strides[2] * H
        strides[0] = strides[1] * C
    bits = 16 if "16B" in layout or "HL" in layout else 8
    x = ints(np.random.default_rng(seed), shape, bits)
    if bits == 16:
        x = x & np.int16(-2)  # 15 significant bits (docs/kneron.md §5)
    outer = lay in (kn.DataLayout.KP_1W16C8B, kn.DataLayout.KP_1W16C8BHL)
    expected = ref.kneron_v2_pack(x, strides, outer_group=outer, highlow="HL" in layout)
    buf = kn.pack(x, layout, chip="kl730", stride_npu=strides)
    assert np.array_equal(buf, expected)
    assert np.array_equal(kn.unpack(buf, layout, shape, chip="kl730", stride_npu=strides, allow_input_only=True), x)
    for _ in range(2):  # strides as a tuple of ints: the first call's checks, then its per-call cache
        assert np.array_equal(kn.pack(x, layout, chip="kl730", stride_npu=tuple(strides)), expected)


@pytest.mark.parametrize("layout", ["1W16C8B", "16W1C8B", "8W1C16B"])
def test_kl730_with_predicted_strides_matches_kl720(layout):
    rng = np.random.default_rng(4)
    for shape in [(1, 20, 2, 3), (1, 33, 3, 17), (1, 1, 1, 1)]:
        x = ints(rng, shape, 16 if layout == "8W1C16B" else 8)
        if layout == "8W1C16B":
            x &= np.int16(-2)
        v2 = kn.pack(x, layout, chip="kl730", stride_npu=kn.predict_stride_npu(shape, layout))
        assert np.array_equal(v2, kn.pack(x[0], layout, chip="kl720"))


def test_highlow_inverts_every_even_int16():
    v = (np.arange(-32768, 32768, 2, dtype=np.int64)).astype(np.int16).reshape(1, 1, 1, -1)
    st_ = kn.predict_stride_npu(v.shape, "16W1C8BHL")
    buf = kn.pack(v, "16W1C8BHL", chip="kl730", stride_npu=st_)
    assert buf.size == 32768 * 2 and np.array_equal(kn.unpack(buf, "16W1C8BHL", v.shape, chip="kl730",
                                                               stride_npu=st_), v)


def test_bit0_clearing_defaults():
    x = np.array([3, -3, 2867], np.int16).reshape(1, 1, 1, 3)
    for _ in range(2):  # a call as checked, then as cached: bit 0 cleared, byte order swapped
        assert kn.pack(x, "8W1C16B", chip="kl730", stride_npu=(8, 8, 8, 1))[:6].view(np.int16).tolist() == \
            [2, -4, 2866]
        assert bytes(kn.pack(np.array([0x1234], np.int16).reshape(1, 1, 1, 1), "HW1C16B_BE", chip="kl730",
                             stride_npu=(1, 1, 1, 1))) == b"\x12\x34"
    st_ = [8, 8, 8, 1]
    assert kn.unpack(kn.pack(x, "8W1C16B", chip="kl730", stride_npu=st_), "8W1C16B", x.shape, chip="kl730",
                     stride_npu=st_).ravel().tolist() == [2, -4, 2866]
    kept = kn.pack(x, "8W1C16B", chip="kl730", stride_npu=st_, clear_lsb=False)
    assert kept[:6].view(np.int16).tolist() == [3, -3, 2867]
    assert kn.pack(x[0], "8W1C16B", chip="kl720")[:6].view(np.int16).tolist() == [3, -3, 2867]
    be = kn.pack(np.array([0x1234], np.int16).reshape(1, 1, 1, 1), "HW1C16B_BE", chip="kl730", stride_npu=[1, 1, 1, 1])
    assert bytes(be) == b"\x12\x34"
    assert kn.unpack(be, "HW1C16B_BE", (1, 1, 1, 1), chip="kl730", stride_npu=[1, 1, 1, 1],
                     allow_input_only=True).item() == 0x1234


def test_drop_alpha_and_raw_float():
    x = np.arange(1, 13, dtype=np.uint8).reshape(1, 3, 2, 2)
    buf = kn.pack(x, "HW4C8B_DROP_A", chip="kl730", stride_npu=[16, 1, 8, 4])
    assert buf.size == 16 and list(buf[:4]) == [1, 5, 9, 0]
    f = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)
    st_ = kn.predict_stride_npu(f.shape, "RAW_FLOAT")
    assert np.array_equal(kn.unpack(kn.pack(f, "RAW_FLOAT", chip="kl730", stride_npu=st_), "RAW_FLOAT", f.shape,
                                    chip="kl730", stride_npu=st_), f)


def test_out_buffer_and_firmware_codes():
    x = np.ones((3, 2, 5), np.int8)
    out = np.full(200, 0xEE, np.uint8)
    res = kn.pack(x, "4W4C8B", chip="kl520", out=out)
    assert np.shares_memory(res, out) and np.all(out[128:] == 0xEE) and res.size == 128
    assert kn.DataLayout.from_firmware_code(16, "kl520") == kn.DataLayout.KP_4W4C8B
    assert kn.DataLayout.from_firmware_code(6, "kl720") == kn.DataLayout.KP_8W1C16B
    with pytest.raises(UnsupportedError):
        kn.DataLayout.from_firmware_code(99, "kl720")


@pytest.mark.parametrize("call, exc, match", [
    (lambda: kn.pack(np.zeros((3, 2, 5), np.int8), "4W4C8B", chip="kl999"), UnsupportedError, "unknown Kneron chip"),
    (lambda: kn.pack(np.zeros((3, 2, 5), np.int8), "4W4C8B", chip="kl530"), UnsupportedError, "kl630"),
    (lambda: kn.pack(np.zeros((3, 2, 5), np.int8), "1W16C8B", chip="kl520"), UnsupportedError, "not available"),
    (lambda: kn.pack(np.zeros((3, 2, 5), np.int8), "RAW_8B", chip="kl720"), UnsupportedError, "not available"),
    (lambda: kn.pack(np.zeros((2, 3, 2, 5), np.int8), "4W4C8B", chip="kl720"), UnsupportedError, "batch"),
    (lambda: kn.pack(np.zeros((3, 2, 5), np.float32), "4W4C8B", chip="kl720"), TypeError, "quantise"),
    (lambda: kn.pack(np.zeros((3, 2, 5), np.int16), "4W4C8B", chip="kl720"), TypeError, "8-bit"),
    (lambda: kn.pack(np.zeros((1, 3, 2, 5), np.int8), "16W1C8B", chip="kl730"), ValueError, "stride_npu"),
    (lambda: kn.pack(np.zeros((1, 3, 2, 5), np.int8), "16W1C8B", chip="kl730", stride_npu=[1, 1, 1, 1]),
     LayoutError, "one slot"),
    (lambda: kn.pack(np.zeros((1, 8, 2, 5), np.int8), "4W4C8B", chip="kl730", stride_npu=[80, 1, 40, 8]),
     UnsupportedError, "at most 4"),
    (lambda: kn.pack(np.zeros((1, 3, 2, 5), np.int8), "1W16C8B", chip="kl730", stride_npu=[160, 2, 80, 16]),
     LayoutError, "stride 1"),
    (lambda: kn.unpack(np.zeros(64, np.uint8), "4W4C8B", (3, 2, 5), chip="kl720"), UnsupportedError, "input-only"),
    (lambda: kn.unpack(np.zeros(10, np.uint8), "16W1C8B", (3, 2, 5), chip="kl720"), LayoutError, "needs 96"),
    (lambda: kn.pack(np.zeros((3, 2, 5), np.int8), "NOPE", chip="kl720"), ValueError, "unknown Kneron data layout"),
    (lambda: kn.quantize(np.ones((1, 3)), radix=[1, 2], scale=1.0), ValueError, "axis"),
    (lambda: kn.quantize(np.ones((1, 3)), radix=[1, 2], scale=1.0, axis=1), ValueError, "size 3"),
    (lambda: kn.quantize(np.array([[1.0, np.nan]]), radix=1, scale=1.0), ValueError, "x: NaN at index \\(0, 1\\)"),
    (lambda: kn.quantize(np.ones((1, 3)), radix=1, scale=[1.0, np.inf, 1.0], axis=1), ValueError,
     "scale: must be finite and > 0"),
    (lambda: kn.unpack(np.zeros(96, np.uint8), "16W1C8B", (3, 2.0, 5), chip="kl720"), TypeError,
     "shape: dimensions must be integers"),
    (lambda: kn.unpack(np.zeros(96, np.uint8), "16W1C8B", (1, 3, 2, 5.5), chip="kl730", stride_npu=[96, 32, 16, 1]),
     TypeError, "shape: dimensions must be integers"),
    (lambda: kn.predict_stride_npu((1, 3, 2, "5"), "16W1C8B"), TypeError, "shape: dimensions must be integers"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_cli_explain(capsys):
    from npupack.cli import main

    assert main(["explain", "kneron:4W4C8B", "--chip", "kl520", "--shape", "3,2,5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("kl520:4W4C8B [N][H][C/4][align16(W)][C%4]") and len(out) == 129
    assert out[4] == "i = 3 => padding == [N=0; H=0; Cs=0; W=0; Csv=3];"
    assert out[83] == "i = 82 => [N=0; C=2; H=1; W=4] == [N=0; H=1; Cs=0; W=4; Csv=2];"
    assert main(["explain", "kneron:1W16C8B", "--chip", "kl730", "--stride", "96,1,48,16", "--shape", "1,20,2,3"]) == 0
    assert "i = 177 => [d0=0; d1=17; d2=1; d3=2];" in capsys.readouterr().out
    assert main(["explain", "kneron:16W1C8B", "--shape", "1,2,3"]) == 2


def test_published_entry_tables_reproduced():
    """Every entry table Kneron publishes for KL520 and KL630/KL720 (tests/data/kneron_entry_tables.json):
    the byte at bits [8k+7:8k] of entry e holds exactly the labelled PnCHm."""
    import json
    import re
    from pathlib import Path

    data = json.loads((Path(__file__).parent / "data" / "kneron_entry_tables.json").read_text(encoding="utf-8"))
    tables = 0
    for table in data["tables"]:
        chip = table["chip"]
        labels = {int(e): [tuple(map(int, re.match(r"P(\d+)CH(\d+)", t).groups())) for t in body][::-1]
                  for e, body in table["entries"].items()}  # [::-1]: listed from bits [127:120] down to [7:0]
        first = labels[0]
        if first[4] == (0, 4):
            layout, C, W = "1W16C8B", 16, len(labels)
        elif first[1] == (1, 0):
            layout, C, W = "16W1C8B", 1, 16 * len(labels)
        else:
            layout, C, W = "4W4C8B", 4, 4 * len(labels)
        code = lambda p, c, W=W: (c * W + p) % 127 + 1  # noqa: E731
        x = np.array([[[code(p, c) for p in range(W)]] for c in range(C)], np.int8)  # (C, 1, W)
        buf = kn.pack(x, layout, chip=chip)
        for e, row in labels.items():
            assert [buf[16 * e + k] for k in range(16)] == [code(p, c) for p, c in row], (chip, layout, e)
        tables += 1
    assert tables == 6
