"""The layout grammar (Layout.parse, oneDNN tags) and the generic npupack.pack/unpack against the
reference of docs/openvino.md §3.2 (tests/reference/blocked.py)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import npupack
from npupack import Layout, LayoutError
from tests.reference import blocked as ref


def ref_data(lay: Layout):
    return (lay.logical, lay.outer, [(t.dim, t.size, t.divisor) for t in lay.tiles], dict(lay.align))


@pytest.mark.parametrize("text, logical, nesting", [
    ("NCHW16c", "NCHW", "[N][C/16][H][W][C%16]"),
    ("OIHW8i16o2i", "OIHW", "[O/16][I/16][H][W][(I/2)%8][O%16][I%2]"),
    ("gOIHW16i16o", "GOIHW", "[g][O/16][I/16][H][W][I%16][O%16]".replace("[g]", "[G]")),
    ("CNHW32c", "NCHW", "[C/32][N][H][W][C%32]"),
    ("NC8c8n", "NC", "[N/8][C/8][C%8][N%8]"),
    ("GODHWI16o4i", "GOIDHW", "[G][O/16][D][H][W][I/4][O%16][I%4]"),
    ("NHWC", "NCHW", "[N][H][W][C]"),
])
def test_parse_and_round_trip(text, logical, nesting):
    lay = Layout.parse(text)
    assert "".join(lay.logical) == logical and lay.describe() == nesting and str(lay) == text
    assert Layout.parse(str(lay)) == lay


@pytest.mark.parametrize("text, pos, rule", [
    ("NCHW16", 6, "needs a dimension letter"),
    ("NCHW0c", 4, "size must be >= 1"),
    ("NCHWN", 4, "appears twice"),
    ("NC-HW", 2, "unexpected character"),
    ("NCHW16x", 6, "not an outer dimension"),
    ("16c", 0, "starts with its outer"),
    ("NCHW16cH", 7, "before the tiles"),
])
def test_parse_errors_point_at_the_character(text, pos, rule):
    with pytest.raises(LayoutError) as e:
        Layout.parse(text)
    msg = str(e.value)
    assert repr(text) in msg and rule in msg
    lines = msg.splitlines()
    assert lines[-2].strip() == text and lines[-1].index("^") - 2 == pos


@pytest.mark.parametrize("alias, abc", [
    ("nChw16c", "aBcd16b"), ("NChw16n16c", "ABcd16a16b"), ("OIhw16i16o", "ABcd16b16a"),
    ("OIhw8i16o2i", "ABcd8b16a2b"), ("OIhw4o8i8o4i", "ABcd4a8b8a4b"), ("IOhw16i16o", "BAcd16b16a"),
    ("Oihw16o", "Abcd16a"), ("gOIhw16i16o", "aBCde16c16b"), ("Goihw16g", "Abcde16a"), ("hwio", "cdba"),
    ("ohwi", "acdb"), ("ABcd8b8a4b", "ABcd8b8a4b"), ("nchw", "abcd"),
])
def test_onednn_aliases(alias, abc):
    lay = Layout.from_onednn(alias)
    assert lay.to_onednn() == abc and str(lay) == alias
    assert Layout.from_onednn(abc).describe() == lay.describe()


@pytest.mark.parametrize("tag, rule", [
    ("abcb", "first 4 dims once"), ("aBcd", "no inner block"), ("abcd8b", "lower-case"),
    ("aBcd1b", "block size 1 < 2"), ("abcdefghijklm", "at most 12"), ("xyz", "neither abc"),
    ("aBcd16", "not a oneDNN format tag"),
])
def test_onednn_tag_errors(tag, rule):
    with pytest.raises(LayoutError, match=rule):
        Layout.from_onednn(tag)


@st.composite
def layouts(draw):
    rank = draw(st.integers(1, 4))
    names = "ABCD"[:rank]
    outer = draw(st.permutations(names))
    tiles = [(draw(st.sampled_from(names)), draw(st.integers(2, 5))) for _ in range(draw(st.integers(0, 3)))]
    text = "".join(outer) + "".join(f"{n}{d.lower()}" for d, n in tiles)
    return Layout.parse(text)


@given(layouts(), st.data(), st.sampled_from([np.int8, np.uint16, np.float16, np.float32, np.int64]))
def test_generic_pack_matches_reference(lay, data, dtype):
    shape = tuple(data.draw(st.integers(1, 7)) for _ in lay.logical)
    lo = tuple(data.draw(st.integers(0, 2)) for _ in shape)
    hi = tuple(data.draw(st.integers(0, 2)) for _ in shape)
    x = (np.arange(int(np.prod(shape))) + 1).astype(dtype).reshape(shape)
    buf = npupack.pack(x, lay, pad_lo=lo, pad_hi=hi, pad_value=0)
    assert np.array_equal(buf, ref.pack(x, *ref_data(lay), pad_lo=lo, pad_hi=hi))
    assert buf.size == lay.nbytes(shape, dtype, pad_lo=lo, pad_hi=hi)
    assert buf.size == int(np.prod(lay.packed_shape(shape, pad_lo=lo, pad_hi=hi))) * np.dtype(dtype).itemsize
    assert np.array_equal(npupack.unpack(buf, lay, shape, dtype, pad_lo=lo, pad_hi=hi), x)
    off, _ = ref.offsets(*ref_data(lay), shape, lo, hi)
    idx = tuple(data.draw(st.integers(0, s - 1)) for s in shape)
    assert lay.offset_of(shape, idx, pad_lo=lo, pad_hi=hi) == off[idx]


@given(layouts(), st.data())
def test_numpy_transpose_baseline_matches_reference(lay, data):
    """The benchmarks' NumPy baseline (pad/reshape/transpose) agrees with the 3.2 reference."""
    shape = tuple(data.draw(st.integers(1, 7)) for _ in lay.logical)
    x = (np.arange(int(np.prod(shape))) + 1).astype(np.int16).reshape(shape)
    logical, outer, tiles, align = ref_data(lay)
    assert np.array_equal(ref.pack_transpose(x, logical, outer, tiles), ref.pack(x, logical, outer, tiles, align))


def test_pad_value_and_out_and_noncontiguous(rng):
    x = rng.integers(-50, 50, (3, 20, 5, 4)).astype(np.int16)
    buf = npupack.pack(x, "NCHW16c", pad_value=-7)
    back = buf.view(np.int16).reshape(3, 2, 5, 4, 16)
    assert np.all(back[:, 1, :, :, 4:] == -7)
    out = np.zeros(buf.size + 5, np.uint8)
    res = npupack.pack(x, "NCHW16c", out=out, pad_value=-7)
    assert np.shares_memory(res, out) and np.array_equal(res, buf)
    view = np.ascontiguousarray(np.moveaxis(x, 1, 3))
    nonc = np.moveaxis(view, 3, 1)  # same logical values, channels-last memory
    assert np.array_equal(npupack.pack(nonc, "NCHW16c"), npupack.pack(x, "NCHW16c"))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: npupack.pack(np.zeros((2, 2)), "NCHW16c"), LayoutError, "has 2 dimensions"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), object), "NCHW"), TypeError, "cannot be packed"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1)), 42), TypeError, "layout"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1)), "NCHW", pad_lo=(0, -1, 0, 0)), LayoutError,
     "pad_lo: every entry must be >= 0"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1)), "NCHW", pad_lo=(0, 0)), LayoutError, "needs 4 entries"),
    (lambda: npupack.pack(np.zeros((1, 17, 1, 1), np.int8), "NCHW16c", out=np.zeros(31, np.uint8)),
     LayoutError, "31 bytes"),
    (lambda: npupack.unpack(np.zeros(10, np.uint8), "NCHW16c", (1, 17, 1, 1), np.int8), LayoutError, "needs 32"),
    (lambda: npupack.unpack(np.zeros(16, np.int16), "NCHW16c", (1, 17, 1, 1), np.int8), TypeError,
     "buf: expected a uint8 byte buffer"),
    (lambda: Layout.parse("NCHW16c").nbytes((2**40, 2**40, 2**40, 1), np.int8), LayoutError, "overflow"),
    (lambda: npupack.unpack(np.zeros(64, np.uint8), "NCHW16c", (1, 2.5, 1, 1), np.int8), TypeError,
     "shape: dimensions must be integers"),
    (lambda: npupack.unpack(np.zeros(64, np.uint8), "NCHW16c", 4, np.int8), TypeError, "shape: expected a sequence"),
    (lambda: npupack.unpack(np.zeros(64, np.uint8), "NCHW16c", (1, 2, 1, 1), "int9"), TypeError,
     "dtype: 'int9' is not a NumPy dtype"),
    (lambda: npupack.unpack(np.zeros(64, np.uint8), "NCHW16c", (1, 2, 1, 1), None), TypeError,
     "dtype: a dtype is required, got None"),
    (lambda: Layout.parse("NCHW16c").nbytes((1, 2, 1, 1), None), TypeError, "dtype: a dtype is required"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), np.int8), "NCHW16c", pad_value="7"), TypeError, "pad_value: expected"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), np.int8), "NCHW16c", pad_value=[7]), TypeError, "pad_value: expected"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), np.int8), "NCHW16c", pad_value=128), ValueError,
     "pad_value: 128 does not fit int8"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), np.uint16), "NCHW16c", pad_value=-1), ValueError,
     "pad_value: -1 does not fit uint16"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), np.int16), "NCHW16c", pad_value=1.5), ValueError, "not an integer"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), np.int16), "NCHW16c", pad_value=np.nan), ValueError,
     "not an integer"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), np.float16), "NCHW16c", pad_value=1e5), ValueError,
     "overflows float16"),
    (lambda: npupack.pack(np.zeros((1, 1, 1, 1), np.float32), "NCHW16c", pad_value=1j), TypeError,
     "real number for float32"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("dtype, pad_value, expected", [
    (np.int8, -128, -128), (np.int8, 2.0, 2), (np.uint8, 255, 255), (np.int16, np.int64(-300), -300),
    (np.uint64, 2**64 - 1, 2**64 - 1), (np.float16, np.inf, np.inf), (np.float16, -0.0, -0.0),
    (np.float16, 1e-9, 0.0), (np.float32, 0.1, np.float32(0.1)), (np.float64, np.nan, np.nan),
    (np.complex64, 1 + 2j, 1 + 2j), (np.bool_, True, True)])
def test_pad_value_is_stored_exactly(dtype, pad_value, expected):
    """Every pad value an element can hold is stored as that element (a float 2.0 for an int8
    tensor is 2; -0.0 keeps its sign; a float too small for fp16 rounds to zero like any
    element conversion); values it cannot hold are errors (test_bad_input)."""
    x = np.zeros((1, 1, 1, 1), dtype)
    got = npupack.unpack(npupack.pack(x, "NCHW", pad_lo=(0, 1, 0, 0), pad_value=pad_value), "NCHW", (1, 2, 1, 1),
                         dtype)[0, 0, 0, 0]
    assert np.array_equal(got, np.asarray(expected, dtype), equal_nan=dtype not in (np.complex64, np.bool_))
    if dtype is np.float16:
        assert np.signbit(got) == np.signbit(expected)


def test_float_dimensions_are_errors_even_after_their_integer_twin():
    """Descriptors are cached by shape, and 3.0 == 3 as a dict key: the cache must not let a
    float dimension through once the integer shape has been seen."""
    lay = Layout.parse("NCHW16c")
    lay.bind((1, 3, 2, 2), np.int8)
    with pytest.raises(TypeError, match="shape: dimensions must be integers"):
        lay.bind((1, 3.0, 2, 2), np.int8)
    npupack.unpack(np.zeros(64, np.uint8), lay, (1, 3, 2, 2), np.int8)
    with pytest.raises(TypeError, match="shape: dimensions must be integers"):
        npupack.unpack(np.zeros(64, np.uint8), lay, (1, 3.0, 2, 2), np.int8)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.float32])
@pytest.mark.parametrize("channels, text", [(3, "NCHW16c"), (3, "NCHW32c"), (20, "NCHW16c"), (5, "NCHW8c")])
def test_short_channel_blocks_write_every_byte(dtype, channels, text):
    """3-channel images and C % block != 0: the engine writes the block tails itself (no separate
    fill pass), so a caller's buffer full of junk must come back fully defined."""
    x = np.random.default_rng(3).integers(1, 100, (2, channels, 3, 19)).astype(dtype)
    lay = Layout.parse(text)
    n = lay.nbytes(x.shape, dtype)
    junk = np.full(n + 3, 0xAB, np.uint8)
    got = npupack.pack(x, lay, out=junk, pad_value=-1)
    assert np.array_equal(got, ref.pack(x, *ref_data(lay), pad_value=-1))
    assert np.all(junk[n:] == 0xAB)


def test_absurd_tiles_are_clear_errors():
    """Found by fuzzing: huge tile sizes raised OverflowError from NumPy instead of LayoutError."""
    with pytest.raises(LayoutError, match="2\\^31"):
        Layout.parse("NC99999999999999c")
    with pytest.raises(LayoutError, match="2\\^62"):
        Layout.parse("O2097152o2097152o2097152o2097152o").nbytes((2,), "int8")
    with pytest.raises(LayoutError, match="2\\^31"):
        Layout.from_onednn("aB4294967296b")
