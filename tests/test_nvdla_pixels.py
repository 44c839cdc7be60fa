"""NVDLA pixel formats (docs/nvdla.md §4): every format against the reference built from the spec text,
every x offset, odd widths, the worked examples (16.4), conversion equations, bad input."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack import LayoutError, UnsupportedError
from npupack.nvdla import PIXEL_FORMATS, convert_pixel_precision, pack_pixels, pixel_line_strides, unpack_pixels
from tests.reference import pixels as ref


def test_table_matches_spec():
    assert set(PIXEL_FORMATS) == set(ref.ROWS) and len(PIXEL_FORMATS) == 36
    for name, fmt in PIXEL_FORMATS.items():
        kind, bpps, comps, _ = ref.ROWS[name]
        assert list(fmt.bpp) == bpps and fmt.comps == comps, name
        assert fmt.x_offset_max == 32 // bpps[0] - 1


def sample(fmt, rng, h, w):
    shape = (h, w, fmt.comps)
    if fmt.kind == "8bit":
        return rng.integers(0, 256, shape).astype(np.uint8)
    if fmt.kind == "16bit":
        return rng.integers(0, 65536, shape).astype(np.uint16)
    if fmt.kind == "fp16":
        return rng.standard_normal(shape).astype(np.float16)
    return np.concatenate([rng.integers(0, 1024, (h, w, 3)), rng.integers(0, 4, (h, w, 1))], axis=2).astype(np.uint16)


@pytest.mark.parametrize("name", sorted(PIXEL_FORMATS))
def test_every_format_every_x_offset(name):
    fmt = PIXEL_FORMATS[name]
    rng = np.random.default_rng(0)
    for h, w in [(1, 1), (2, 3), (3, 7), (2, 16), (2, 17), (1, 32)]:  # 16, 32: lines without padding
        img = sample(fmt, rng, h, w)
        bits = img.view(np.uint16) if fmt.kind == "fp16" else img
        for xo in range(fmt.x_offset_max + 1):
            pp = pack_pixels(img, name, x_offset=xo)
            expected = ref.pack(bits, name, x_offset=xo)
            assert len(pp.planes) == len(expected)
            for got, exp in zip(pp.planes, expected):
                assert np.array_equal(got, exp), (name, h, w, xo)
            back = unpack_pixels(pp, name, img.shape, x_offset=xo)
            assert np.array_equal(back.view(np.uint16) if fmt.kind == "fp16" else back, bits)


@given(st.sampled_from(sorted(PIXEL_FORMATS)), st.integers(1, 4), st.integers(1, 40), st.integers(0, 3),
       st.data())
def test_random_sizes_and_line_strides(name, h, w, extra, data):
    fmt = PIXEL_FORMATS[name]
    xo = data.draw(st.integers(0, fmt.x_offset_max))
    default = pack_pixels(sample(fmt, np.random.default_rng(w), h, w), name, x_offset=xo).line_strides
    strides = tuple(s + 32 * extra for s in default)
    img = sample(fmt, np.random.default_rng(h * w), h, w)
    pp = pack_pixels(img, name, x_offset=xo, line_stride=strides)
    bits = img.view(np.uint16) if fmt.kind == "fp16" else img
    expected = ref.pack(bits, name, x_offset=xo, line_strides=strides)
    for got, exp in zip(pp.planes, expected):
        assert np.array_equal(got, exp)
    # Into dirty buffers: every padding byte (x offset, line tails) must be written as zero.
    dirty = tuple(np.full(e.size, 0xAB, np.uint8) for e in expected)
    again = pack_pixels(img, name, x_offset=xo, line_stride=strides, out=dirty)
    for got, exp in zip(again.planes, expected):
        assert np.array_equal(got, exp)


X_FORMATS = sorted(name for name, fmt in PIXEL_FORMATS.items() if fmt.has_x)


@pytest.mark.parametrize("name", X_FORMATS)
def test_x_formats_take_three_components(name):
    """An (H, W, 3) image into an X format: the bytes of the 4-component image with X = 0 (the
    reference packs that one), at every x offset and widths across the kernels' steps, into a
    dirty buffer, again from the kept plan, and through the format registry; the image is
    not modified."""
    from npupack import formats

    fmt = PIXEL_FORMATS[name]
    rng = np.random.default_rng(7)
    dtype = np.uint8 if fmt.kind == "8bit" else np.uint16
    front = formats.get(f"nvdla:pixel:{name}")
    for h, w in [(1, 1), (2, 3), (3, 5), (2, 16), (2, 21), (1, 130)]:
        img = rng.integers(0, np.iinfo(dtype).max, (h, w, 3), dtype=dtype)
        keep = img.copy()
        four = np.concatenate([img, np.zeros((h, w, 1), dtype)], axis=2)
        for xo in range(fmt.x_offset_max + 1):
            (want,) = ref.pack(four, name, x_offset=xo)
            for out in (None, np.full(want.size, 0xAB, np.uint8), None):  # the third call: the kept plan
                got = pack_pixels(img, name, x_offset=xo, out=out)
                assert np.array_equal(got.planes[0], want) and got.shape == (h, w, 4), (name, h, w, xo)
            assert np.array_equal(unpack_pixels(got, name, (h, w), x_offset=xo), four)
        assert np.array_equal(front.pack(img), ref.pack(four, name)[0])
        assert np.array_equal(img, keep)


def test_worked_examples():
    img = np.array([[[1, 2, 3, 4], [5, 6, 7, 8]]], np.uint8)
    assert bytes(pack_pixels(img, "T_A8R8G8B8").planes[0]) == bytes([3, 2, 1, 4, 7, 6, 5, 8]) + bytes(24)
    assert bytes(pack_pixels(img, "T_A8R8G8B8", x_offset=3).planes[0]) == \
        bytes(12) + bytes([3, 2, 1, 4, 7, 6, 5, 8]) + bytes(12)
    one = np.array([[[1, 2, 3, 4]]], np.uint8)
    assert [bytes(pack_pixels(one, f).planes[0][:4]) for f in ("T_A8B8G8R8", "T_B8G8R8A8", "T_R8G8B8A8")] == \
        [b"\x01\x02\x03\x04", b"\x04\x01\x02\x03", b"\x04\x03\x02\x01"]
    assert [bytes(pack_pixels(one, f).planes[0][:4]) for f in ("T_A8Y8U8V8", "T_V8U8Y8A8")] == \
        [b"\x03\x02\x01\x04", b"\x04\x01\x02\x03"]
    assert bytes(pack_pixels(np.array([[[0x102, 0x304, 0x506, 0x708]]], np.uint16), "T_A16B16G16R16").planes[0][:8]) \
        == bytes.fromhex("0201040306050807")
    assert bytes(pack_pixels(np.array([[[1, 2, 3, 4]]], np.uint16), "T_A16Y16U16V16").planes[0][:8]) == \
        bytes.fromhex("0300020001000400")
    t = np.array([[[1, 2, 3, 1]]])
    assert [bytes(pack_pixels(t, f).planes[0][:4]).hex() for f in
            ("T_A2B10G10R10", "T_A2R10G10B10", "T_B10G10R10A2", "T_R10G10B10A2")] == \
        ["01083040", "03081040", "0520c000", "0d204000"]
    yuv = np.array([[[10, 20, 30]]], np.uint8)
    assert bytes(pack_pixels(yuv, "T_Y8___U8V8_N444").planes[1][:2]) == b"\x1e\x14"
    assert bytes(pack_pixels(yuv, "T_Y8___V8U8_N444").planes[1][:2]) == b"\x14\x1e"
    pp = pack_pixels(np.array([[[0x1234, 0x5678, 0x9ABC]]], np.uint16), "T_Y16___V16U16_N444")
    assert bytes(pp.planes[0][:2]) == b"\x34\x12" and bytes(pp.planes[1][:4]) == bytes.fromhex("7856bc9a")
    y3 = np.array([[[1, 2, 3], [4, 5, 6], [7, 8, 9]]], np.uint8)
    pp = pack_pixels(y3, "T_Y8___U8V8_N444", x_offset=20)
    assert [pp.planes[0][20 + x] for x in range(3)] == [1, 4, 7] and pp.line_strides == (32, 32)
    assert [(pp.planes[1][8 + 2 * x], pp.planes[1][9 + 2 * x]) for x in range(3)] == [(3, 2), (6, 5), (9, 8)]
    assert bytes(pack_pixels(np.array([[1.0]], np.float32), "T_R16_F").planes[0][:2]) == b"\x00\x3c"
    assert pack_pixels(np.zeros((1, 33), np.uint8), "T_R8").line_strides == (64,)
    assert pack_pixels(np.ones((2, 2, 3), np.uint8), "T_X8R8G8B8").planes[0][3] == 0  # X = 0


def test_conversion_equations():
    p = np.array([[[200]]], np.uint8)
    assert convert_pixel_precision(p, "T_R8", "int8", offset=100, scale=3, truncate=1).item() == 127
    assert convert_pixel_precision(p, "T_R8", "int8", cvt=False).item() == -56
    assert convert_pixel_precision(p, "T_R8", "int16", cvt=False).item() == -56
    assert convert_pixel_precision(p, "T_R8", "int16", offset=100, scale=3, truncate=1).item() == 150
    # round half away from zero: (5 - 0) * 1 / 2 = 2.5 -> 3; (0 - 5) / 2 = -2.5 -> -3
    assert convert_pixel_precision(np.array([[[5]]], np.uint8), "T_R8", "int16", truncate=1).item() == 3
    assert convert_pixel_precision(np.array([[[0]]], np.uint8), "T_R8", "int16", offset=5, truncate=1).item() == -3
    assert convert_pixel_precision(np.array([[[200]]], np.uint8), "T_R8", "int16", sign_override=True).item() == -56
    big = np.array([[[65535]]], np.uint16)
    assert convert_pixel_precision(big, "T_R16", "fp16").view(np.uint16).item() == 0x7C00  # 65535 -> inf
    rgba = np.array([[[1, 2, 3, 1]]], np.uint16)
    assert convert_pixel_precision(rgba, "T_A2B10G10R10", "int16").ravel().tolist() == [64, 128, 192, 16384]
    assert convert_pixel_precision(np.array([[[1, 2, 3, 4]]], np.uint8), "T_A8B8G8R8", "int16",
                                   offset=[1, 1, 1, 1]).ravel().tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("call, exc, match", [
    (lambda: pack_pixels(np.zeros((2, 2, 3), np.uint8), "T_A8B8G8R8"), LayoutError, "takes \\(H, W, 4\\)"),
    (lambda: pack_pixels(np.zeros((2, 2, 4), np.uint16), "T_A8B8G8R8"), TypeError, "8-bit"),
    (lambda: pack_pixels(np.zeros((2, 2, 4), np.uint8), "T_A16B16G16R16"), TypeError, "16-bit"),
    (lambda: pack_pixels(np.full((1, 1, 4), 1024), "T_A2B10G10R10"), ValueError, "0-1023"),
    (lambda: pack_pixels(np.array([[[0, 0, 0, 4]]]), "T_A2B10G10R10"), ValueError, "alpha"),
    (lambda: pack_pixels(np.zeros((2, 2, 4), np.uint8), "T_A8B8G8R8", x_offset=8), LayoutError, "0-7"),
    (lambda: pack_pixels(np.zeros((2, 2), np.uint8), "T_R8", line_stride=48), LayoutError, "multiple of 32"),
    (lambda: pack_pixels(np.zeros((2, 40), np.uint8), "T_R8", line_stride=32), LayoutError, ">= 40"),
    (lambda: pack_pixels(np.zeros((2, 2), np.uint8), "T_RGB"), ValueError, "unknown NVDLA pixel format"),
    (lambda: convert_pixel_precision(np.zeros((1, 1, 4), np.float16), "T_A16B16G16R16_F", "int8"), UnsupportedError,
     "fp16 only"),
    (lambda: unpack_pixels((np.zeros(32, np.uint8),), "T_Y8___U8V8_N444", (1, 1)), LayoutError, "2 planes"),
    (lambda: convert_pixel_precision(np.zeros((1, 1), np.uint8), "T_R8", "int8", truncate=64), ValueError, "0..63"),
    (lambda: pixel_line_strides("T_R8", 40.0), TypeError, "width: expected an integer, got 40.0"),
    (lambda: pixel_line_strides("T_Y8___U8V8_N444", 8, line_stride=[32, 32.5]), TypeError,
     "line_stride: expected an integer, got 32.5"),
    (lambda: unpack_pixels((np.zeros(64, np.uint8),), "T_R8", (2, 8.0)), TypeError,
     "shape: dimensions must be integers"),
    (lambda: convert_pixel_precision(np.zeros((1, 1), np.uint8), "T_R8", "int8", truncate=1.5), TypeError,
     "truncate: expected an integer"),
    (lambda: convert_pixel_precision(np.zeros((1, 1), np.uint8), "T_R8", "int8", scale=2.5), TypeError,
     "scale: expected an integer"),
    (lambda: convert_pixel_precision(np.zeros((1, 1), np.uint8), "T_R8", "int8", scale=[1, 2]), TypeError,
     "scale: expected an integer"),
    (lambda: convert_pixel_precision(np.zeros((1, 1), np.uint8), "T_R8", "int8", scale=40000), ValueError,
     "D_CVT_SCALE"),
    (lambda: convert_pixel_precision(np.zeros((1, 1, 4), np.uint8), "T_A8B8G8R8", "int8", offset=[1, 2, 3, 40000]),
     ValueError, "offset: must be in -32768..32767"),
    (lambda: convert_pixel_precision(np.zeros((1, 1, 4), np.uint8), "T_A8B8G8R8", "int8", offset=[0.5] * 4),
     TypeError, "offset: expected an integer or one integer per component"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_benchmark_numpy_baseline_matches():
    """The benchmarks' NumPy implementation produces the same planes (so the comparison is fair)."""
    from benchmarks.bench_pixels import FORMATS, _numpy_pack

    rng = np.random.default_rng(9)
    for name in FORMATS:
        fmt = PIXEL_FORMATS[name]
        img = sample(fmt, rng, 3, 37)
        for got, exp in zip(pack_pixels(img, name).planes, _numpy_pack(img, fmt)):
            assert np.array_equal(got, exp), name


@pytest.mark.parametrize("name", ["T_A8B8G8R8", "T_Y8___U8V8_N444", "T_Y16___V16U16_N444"])
def test_out_buffers(name):
    fmt = PIXEL_FORMATS[name]
    img = sample(fmt, np.random.default_rng(4), 3, 9)
    expected = pack_pixels(img, name, x_offset=1)
    outs = tuple(np.full(p.size + 7, 0xAB, np.uint8) for p in expected.planes)
    got = pack_pixels(img, name, x_offset=1, out=outs if len(outs) > 1 else outs[0])
    for g, e, o in zip(got.planes, expected.planes, outs):
        assert np.shares_memory(g, o) and np.array_equal(g, e) and np.all(o[e.size:] == 0xAB)
    # Planes at odd addresses (bytes have no alignment; the 16-bit split moves its elements by
    # memcpy) and an image one byte off its element alignment: the same bytes.
    odd_img = np.frombuffer(bytearray(img.nbytes + 1), np.uint8)[1:].view(img.dtype).reshape(img.shape)
    odd_img[...] = img
    odd = tuple(np.full(p.size + 1, 0xAB, np.uint8)[1:] for p in expected.planes)
    got = pack_pixels(odd_img, name, x_offset=1, out=odd if len(odd) > 1 else odd[0])
    assert all(np.array_equal(g, e) for g, e in zip(got.planes, expected.planes))
    with pytest.raises(LayoutError, match="planes"):
        pack_pixels(img, name, out=outs + (outs[0],))
    with pytest.raises(LayoutError, match="needed"):
        pack_pixels(img, name, out=tuple(o[:5] for o in outs))


def _lines_reference(img, order, line_stride, pre):
    """Interleaved plane straight from docs/nvdla.md §4.4: per line, ``pre`` zero bytes, the pixels with
    their components in ``order``, zeros up to the line stride."""
    h = img.shape[0]
    plane = np.zeros((h, line_stride), np.uint8)
    body = np.ascontiguousarray(img[:, :, order]).view(np.uint8).reshape(h, -1)
    plane[:, pre:pre + body.shape[1]] = body
    return plane.reshape(-1)


@pytest.mark.parametrize("path", ["auto", "avx2", "ssse3", "scalar"])
def test_pixel_line_kernels_every_path(path):
    """Every shuffle kernel (forced; a CPU without it falls back) on every pixel size and component
    order, widths across the 16- and 64-byte steps and their tails, into dirty buffers."""
    import itertools

    from npupack import _core

    rng = np.random.default_rng(5)
    for eb, m in [(1, 1), (1, 3), (1, 4), (2, 1), (2, 4), (4, 1)]:
        dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32}[eb]
        for order in itertools.permutations(range(m)):
            for w in (1, 3, 4, 5, 16, 17, 21, 33):
                img = rng.integers(0, 2 ** (8 * eb), (3, w, m), dtype=dtype)
                pre = (w % 3) * m * eb
                ls = -(-(pre + w * m * eb) // 32) * 32 + 32 * (w % 2)
                plane = np.full(3 * ls, 0xAB, np.uint8)
                _core.pack_pixel_lines(img, list(order), plane, ls, pre, path)
                assert np.array_equal(plane, _lines_reference(img, list(order), ls, pre)), (eb, order, w)
                back = np.zeros_like(img)
                _core.unpack_pixel_lines(plane, list(order), back, ls, pre, path)
                assert np.array_equal(back, img), (eb, order, w)
    with pytest.raises(LayoutError, match="permutation"):
        _core.pack_pixel_lines(np.zeros((1, 1, 2), np.uint8), [0, 0], np.zeros(32, np.uint8), 32, 0)
    with pytest.raises(LayoutError, match="too small"):
        _core.pack_pixel_lines(np.zeros((2, 8, 4), np.uint8), [0, 1, 2, 3], np.zeros(63, np.uint8), 32, 0)
    with pytest.raises(LayoutError, match="unknown kernel path"):
        _core.pack_pixel_lines(np.zeros((1, 1, 1), np.uint8), [0], np.zeros(32, np.uint8), 32, 0, "avx1024")


@pytest.mark.parametrize("name", ["T_A2B10G10R10", "T_R10G10B10A2"])
def test_10bit_range_found_in_uint16(name):
    """uint16 components are range-checked while the words are packed (in chunks, 4 pixels per
    vector step): a single bad value anywhere is reported at its pixel."""
    rng = np.random.default_rng(2)
    h, w = 3, 701  # 2103 pixels: three chunks and a tail shorter than a vector step
    for p in (0, 3, 1023, 1024, 1500, 2100, 2102):
        for c, bad in ((0, 1024), (1, 65535), (2, 2000), (3, 4)):
            img = sample(PIXEL_FORMATS[name], rng, h, w)
            img[p // w, p % w, c] = bad
            with pytest.raises(ValueError, match=rf"pixel \({p // w}, {p % w}\)"):
                pack_pixels(img, name)
