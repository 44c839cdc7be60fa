"""The kernel tester for the pixel sections of the kernel list (docs/design.md §4.9), each kernel
the CPU runs called by name whatever the dispatch would choose: the pixel shuffles of interleaved
pixel lines (docs/nvdla.md §4) on iota and random lines of every pixel size and component order,
and the YUV 4:4:4 splits of the N444 formats on rows of 8- and 16-bit pixels in both V / U orders,
at lengths around their vector steps, into 0xA5 buffers with guard bytes, against NumPy."""
import itertools

import numpy as np
import pytest

from npupack import LayoutError, _core
from tests.guard_page import before_guard_page, linux_only
from tests.test_kernels import FILL, GUARD, _iota

ALL = _core.kernel_list()
SHUFFLES = [k for k in ALL if k["op"] == "pixel-shuffle"]
SHUFFLE_RUNS = [k for k in SHUFFLES if k["runs"]]
SPLITS = [k for k in ALL if k["op"] == "yuv-split"]
SPLIT_RUNS = [k for k in SPLITS if k["runs"]]
# Pixel counts around the 16-, 32- and 64-byte steps for every pixel size.
PIXELS = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 130]


def test_pixel_sections_follow_the_grammar():
    """<operation>_<element>_<tile>_<isa>, the tile of a vector kernel its step (bytes for the
    shuffles, pixels for the splits), each element size ending in its scalar kernel."""
    assert SHUFFLES and SPLITS and ALL[-len(SHUFFLES) - len(SPLITS):] == SHUFFLES + SPLITS
    for k in SHUFFLES + SPLITS:
        op, elem, tile, isa = k["name"].split("_")
        assert op == k["op"] and elem == f"x{8 * k['elem']}" and isa == k["isa"], k
        assert tile == ("any" if isa == "scalar" else str(k["tile"])), k
    assert SHUFFLES[-1]["isa"] == "scalar"
    for eb in (1, 2):
        assert [k["isa"] for k in SPLITS if k["elem"] == eb][-1] == "scalar"


def _guarded(n):
    """A 0xA5 buffer of n bytes between guards, and its view."""
    raw = np.full(n + 2 * GUARD, FILL, np.uint8)
    return raw, raw[GUARD:GUARD + n]


def _line(nbytes, kind, rng):
    return _iota(nbytes) if kind == "iota" else rng.integers(0, 256, nbytes, dtype=np.uint8)


@pytest.mark.parametrize("k", SHUFFLE_RUNS, ids=[k["name"] for k in SHUFFLE_RUNS])
def test_every_pixel_shuffle_kernel_against_numpy(k):
    """Every pixel size of a vector kernel (1, 2, 4, 8 bytes; the scalar kernel also 3 and 6) as m
    components of eb bytes in every order, iota and random lines; guards untouched, source unchanged."""
    rng = np.random.default_rng(44)
    geometries = [(m, eb) for m in (1, 2, 3, 4) for eb in (1, 2) if m * eb <= 8]
    if k["isa"] != "scalar":
        geometries = [(m, eb) for m, eb in geometries if 16 % (m * eb) == 0]
    for m, eb in geometries:
        for order in itertools.permutations(range(m)):
            for n, kind in itertools.product(PIXELS, ("iota", "random")):
                src = _line(n * m * eb, kind, rng)
                keep = src.copy()
                raw, dst = _guarded(src.size)
                _core.pixel_shuffle_run(k["name"], src, dst, list(order), eb)
                want = np.full(raw.size, FILL, np.uint8)
                want[GUARD:GUARD + src.size] = src.reshape(n, m, eb)[:, list(order), :].reshape(-1)
                np.testing.assert_array_equal(raw, want, err_msg=f"{k['name']} m={m} eb={eb} {order} n={n}")
                assert np.array_equal(src, keep)


def _orders_with_zeros(m, zeros):
    """Every order of m destination components with ``zeros`` of them -1 (written as 0) and the
    others a permutation of the m - zeros source components."""
    for perm in itertools.permutations(range(m - zeros)):
        yield from sorted(set(itertools.permutations(list(perm) + [-1] * zeros)))


@linux_only
@pytest.mark.parametrize("k", SHUFFLE_RUNS, ids=[k["name"] for k in SHUFFLE_RUNS])
def test_every_pixel_shuffle_kernel_adds_zero_components(k):
    """Components written as 0 (an X format given three components): the source has only the
    components named, so a 16-byte step reads 12 bytes' worth of pixels; with the source ending at
    an inaccessible page, no read passes it. Every pixel size the kernel takes, every order with
    one to three zero components, lengths around the steps; guards untouched, source unchanged."""
    rng = np.random.default_rng(45)
    geometries = [(m, eb) for m in (2, 3, 4) for eb in (1, 2, 4) if m * eb <= 8]
    if k["isa"] != "scalar":
        geometries = [(m, eb) for m, eb in geometries if 16 % (m * eb) == 0]
    for (m, eb), n, kind in itertools.product(geometries, PIXELS, ("iota", "random")):
        for zeros in range(1, m):
            named = m - zeros
            line = _line(n * named * eb, kind, rng)
            with before_guard_page(line) as src:
                for order in _orders_with_zeros(m, zeros):
                    raw, dst = _guarded(n * m * eb)
                    _core.pixel_shuffle_run(k["name"], src, dst, list(order), eb)
                    want_px = np.zeros((n, m, eb), np.uint8)
                    for j, c in enumerate(order):
                        if c >= 0:
                            want_px[:, j] = line.reshape(n, named, eb)[:, c]
                    want = np.full(raw.size, FILL, np.uint8)
                    want[GUARD:GUARD + dst.size] = want_px.reshape(-1)
                    np.testing.assert_array_equal(raw, want, err_msg=f"{k['name']} m={m} eb={eb} {order} n={n}")
                assert np.array_equal(src, line)


@pytest.mark.parametrize("k", SPLIT_RUNS, ids=[k["name"] for k in SPLIT_RUNS])
def test_every_yuv_split_kernel_against_numpy(k):
    """Rows of n (Y, U, V) pixels around the kernel's step into a Y run and a UV run (U, V pairs,
    or V, U), iota and random, against NumPy's slicing; guards untouched, source unchanged."""
    rng = np.random.default_rng(4)
    eb = k["elem"]
    dt = np.dtype(f"<u{eb}")
    for n, kind, v_first in itertools.product(PIXELS, ("iota", "random"), (False, True)):
        yuv = _line(3 * n * eb, kind, rng)
        keep = yuv.copy()
        yraw, y = _guarded(n * eb)
        uvraw, uv = _guarded(2 * n * eb)
        _core.yuv_split_run(k["name"], yuv, y, uv, v_first)
        px = yuv.view(dt).reshape(n, 3)
        want_y = np.full(yraw.size, FILL, np.uint8)
        want_y[GUARD:GUARD + n * eb] = px[:, 0].copy().view(np.uint8)
        want_uv = np.full(uvraw.size, FILL, np.uint8)
        pairs = px[:, [2, 1]] if v_first else px[:, [1, 2]]
        want_uv[GUARD:GUARD + 2 * n * eb] = pairs.copy().reshape(-1).view(np.uint8)
        msg = f"{k['name']} n={n} {kind} v_first={v_first}"
        np.testing.assert_array_equal(yraw, want_y, err_msg=msg)
        np.testing.assert_array_equal(uvraw, want_uv, err_msg=msg)
        assert np.array_equal(yuv, keep)


def test_pixel_kernel_refusals():
    buf = np.zeros(48, np.uint8)
    with pytest.raises(LayoutError, match="unknown kernel"):
        _core.pixel_shuffle_run("pixel-shuffle_x8_128_avx1024", buf, buf.copy(), [1, 0], 1)
    with pytest.raises(LayoutError, match="permutation"):
        _core.pixel_shuffle_run("pixel-shuffle_x8_any_scalar", buf, buf.copy(), [0, 0], 1)
    with pytest.raises(LayoutError, match="at most 8 bytes"):
        _core.pixel_shuffle_run("pixel-shuffle_x8_any_scalar", buf, buf.copy(), [0, 1, 2], 4)
    with pytest.raises(LayoutError, match="whole number of pixels"):
        _core.pixel_shuffle_run("pixel-shuffle_x8_any_scalar", buf, buf[:-1].copy(), [1, 0], 1)
    with pytest.raises(LayoutError, match="whole number of pixels"):
        _core.pixel_shuffle_run("pixel-shuffle_x8_any_scalar", buf[:47], buf[:47].copy(), [1, 0], 1)
    with pytest.raises(LayoutError, match="overlap"):
        _core.pixel_shuffle_run("pixel-shuffle_x8_any_scalar", buf[:32], buf[16:48], [1, 0], 1)
    with pytest.raises(LayoutError, match="read-only"):
        ro = buf.copy()
        ro.flags.writeable = False
        _core.pixel_shuffle_run("pixel-shuffle_x8_any_scalar", buf, ro, [1, 0], 1)
    with pytest.raises(LayoutError, match="at most 8 bytes"):  # eb alone: m * eb would overflow an int
        _core.pixel_shuffle_run("pixel-shuffle_x8_any_scalar", buf[:0], buf[:0].copy(), [0, 1], 2 ** 31 - 1)
    with pytest.raises(LayoutError, match="names no source component"):
        _core.pixel_shuffle_run("pixel-shuffle_x8_any_scalar", buf[:0], buf[:16].copy(), [-1, -1], 1)
    vector = [k["name"] for k in SHUFFLE_RUNS if k["isa"] != "scalar"]
    for name in vector:
        with pytest.raises(LayoutError, match="does not take pixels of 3 bytes"):
            _core.pixel_shuffle_run(name, buf, buf.copy(), [2, 1, 0], 1)
    with pytest.raises(LayoutError, match="unknown kernel"):
        _core.yuv_split_run("yuv-split_x8_64_avx1024", buf, buf[:16].copy(), buf[:32].copy())
    with pytest.raises(LayoutError, match="must be n whole pixels"):
        _core.yuv_split_run("yuv-split_x8_any_scalar", buf, buf[:15].copy(), buf[:32].copy())
    with pytest.raises(LayoutError, match="must be n whole pixels"):
        _core.yuv_split_run("yuv-split_x16_any_scalar", buf[:45], buf[:15].copy(), buf[:30].copy())
    with pytest.raises(LayoutError, match="overlap"):
        _core.yuv_split_run("yuv-split_x8_any_scalar", buf, buf[:16], buf[16:48].copy())


@linux_only
@pytest.mark.parametrize("path", ["auto", "avx2", "ssse3", "scalar"])
def test_pixel_lines_write_a_zero_component_on_every_path(path):
    """pack_pixel_lines of an (H, W, 3) image into 4-component pixels with -1 in the order (the X
    of an X format, written as 0), 8- and 16-bit, widths across the steps, the image ending at an
    inaccessible page; unpacking refuses such an order."""
    rng = np.random.default_rng(10)
    for dt, w, order in itertools.product((np.uint8, np.uint16), (1, 3, 4, 5, 16, 21, 33, 130),
                                          ([0, 1, 2, -1], [-1, 2, 1, 0], [2, 1, 0, -1])):
        h = 3
        img = rng.integers(0, np.iinfo(dt).max, (h, w, 3), dtype=dt)
        row = w * 4 * img.itemsize
        pre, stride = 8, -(-(row + 8) // 32) * 32 + 32
        plane = np.full(h * stride, FILL, np.uint8)
        with before_guard_page(img) as src:
            _core.pack_pixel_lines(src, order, plane, stride, pre, path)
        px = np.zeros((h, w, 4), dt)
        for j, c in enumerate(order):
            if c >= 0:
                px[:, :, j] = img[:, :, c]
        want = np.zeros((h, stride), np.uint8)
        want[:, pre:pre + row] = px.reshape(h, -1).view(np.uint8)
        np.testing.assert_array_equal(plane.reshape(h, stride), want, err_msg=f"{path} {img.shape} {order}")
    back = np.zeros((h, w, 3), dt)
    with pytest.raises(LayoutError, match="permutation"):
        _core.unpack_pixel_lines(plane, [0, 1, 2, -1], back, stride, pre, path)
    with pytest.raises(LayoutError, match="at least one component"):
        _core.pack_pixel_lines(np.zeros((h, w, 0), dt), [-1], plane, stride, pre, path)
    for bad, match in [([0, 1, -1, -1], "order names 2 components, the image has 3"),
                       ([0, 1, 2, -2], "permutation"), ([0, 1, 3, -1], "permutation"), ([0, 0, 1, -1], "permutation")]:
        with pytest.raises(LayoutError, match=match):
            _core.pack_pixel_lines(img, bad, plane, stride, pre, path)


@pytest.mark.parametrize("path", ["auto", "avx2", "ssse3", "scalar"])
def test_pixel_lines_dispatch_matches_numpy_on_every_path(path):
    """pack_pixel_lines / unpack_pixel_lines through the list's choice for each forced path: the
    reordered pixels after the x offset, zeros around them, and back."""
    rng = np.random.default_rng(9)
    for (h, w, m, dt), order in itertools.product(
            [(3, 37, 4, np.uint8), (2, 21, 3, np.uint8), (2, 19, 4, np.uint16), (4, 9, 2, np.uint16)],
            ([1, 0, 3, 2], [2, 1, 0, 3])):
        order = [c for c in order if c < m] if m == 4 else list(reversed(range(m)))
        img = rng.integers(0, np.iinfo(dt).max, (h, w, m), dtype=dt)
        row = w * m * img.itemsize
        pre, stride = 16, row + 16 + 32
        plane = np.full(h * stride, FILL, np.uint8)
        _core.pack_pixel_lines(img, order, plane, stride, pre, path)
        want = np.zeros((h, stride), np.uint8)
        want[:, pre:pre + row] = img[:, :, order].reshape(h, -1).view(np.uint8)
        np.testing.assert_array_equal(plane.reshape(h, stride), want, err_msg=f"{path} {img.shape} {order}")
        back = np.zeros_like(img)
        _core.unpack_pixel_lines(plane, order, back, stride, pre, path)
        np.testing.assert_array_equal(back, img)
