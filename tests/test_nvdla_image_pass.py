"""NVDLA image-input weights in one C++ pass (docs/nvdla.md §8.3-8.5): every pixel format's
component count and element size, both instruction-set paths, a short last kernel group, short
last row groups, each post-extension factor and C' of more than one channel block, against the
loop reference of docs/nvdla.md §8; the pass refuses a descriptor that places rows elsewhere."""
import itertools

import numpy as np
import pytest

import npupack
from npupack import LayoutError, _core
from npupack.nvdla import NV_FULL, NV_SMALL, PIXEL_FORMATS, pack_weights, to_fp16, unpack_weights
from npupack.nvdla import image_weights
from tests.guard_page import before_guard_page, linux_only
from tests.reference import nvdla as ref

SHAPES = [(3, 3), (5, 5), (7, 7), (9, 4), (2, 7), (1, 1), (3, 11), (4, 17)]


def _weights(rng, precision, shape):
    if precision == "fp16":
        return to_fp16(rng.standard_normal(shape))
    return rng.integers(-100, 100, shape).astype(np.int8 if precision == "int8" else np.int16)


@pytest.mark.parametrize("fmt, precision", [("T_A8B8G8R8", "int8"), ("T_Y8___U8V8_N444", "int8"),
                                            ("T_A16B16G16R16", "int16"), ("T_A16B16G16R16_F", "fp16"),
                                            ("T_R8", "int8")])
def test_pass_matches_loop_reference(fmt, precision):
    cdata = PIXEL_FORMATS[fmt].comps
    rng = np.random.default_rng(7)
    configs = [NV_FULL] + ([NV_SMALL] if precision in NV_SMALL.precisions else [])
    for config, (R, S), pe in itertools.product(configs, SHAPES, ("auto", 1, 2, 4)):
        kpg = config.kernels_per_group(precision)
        K, C = 3 * kpg + 5, max(1, cdata - 1)  # a short last kernel group, channels padded where cdata > 1
        f = pe if pe != "auto" else image_weights.post_extension_factor(cdata, S, R, 1, config.mac_atomic_c)
        if f > 1 and (cdata * S > config.mac_atomic_c // f or R // f < 2):
            continue  # refused; test_nvdla_image_weights covers the errors
        w = _weights(rng, precision, (K, C, R, S))
        before = w.copy()
        ws = pack_weights(w, kind="image", pixel_format=fmt, config=config, post_extension=pe)
        expected = ref.pack_image_weights(w, cdata, ws.post_extension, kpg=kpg, cb=config.channels_per_block,
                                          tail=config.weight_size_alignment)
        assert ws.post_extension == f
        assert np.array_equal(ws.weight, expected), (config.name, R, S, pe)
        assert np.array_equal(unpack_weights(ws).view(np.uint8), w.view(np.uint8))
        assert np.array_equal(w.view(np.uint8), before.view(np.uint8))


@pytest.mark.parametrize("cdata, C, dtype", [(4, 3, np.int8), (4, 4, np.int8), (3, 3, np.int8), (2, 1, np.int8),
                                             (1, 1, np.int8), (3, 2, np.int16), (2, 2, np.int16), (1, 1, np.int16),
                                             (4, 3, np.float16), (3, 3, np.float16)])
@pytest.mark.parametrize("R, S, f", [(3, 3, 1), (7, 7, 2), (9, 4, 4), (3, 11, 1), (4, 17, 1), (3, 70, 1)])
def test_each_path_and_layout_of_the_source(cdata, C, dtype, R, S, f):
    """Each pass, forced (AVX-512 VBMI permutations of a window of kernels where a row group fits;
    SSSE3 shuffles of that window where it holds 2 or more kernels, else interleaving: a kernel
    group per call with AVX2, a kernel per call with SSSE3; element by element), on a C-contiguous
    source and on a strided view of the same values: the same bytes as the reference, nothing
    written past the descriptor, the source unchanged. 1x70 rows span several channel blocks,
    which only the interleaving passes take, for every component count and element size."""
    precision = {np.int8: "int8", np.int16: "int16", np.float16: "fp16"}[dtype]
    kpg, cpb = NV_FULL.kernels_per_group(precision), NV_FULL.channels_per_block
    if f > 1 and cdata * S > cpb:
        pytest.skip("post-extension keeps C' within one channel block")
    rng = np.random.default_rng(R * 100 + S)
    w = rng.integers(-100, 100, (2 * kpg + 3, C, R, S)).astype(dtype)
    layout = image_weights.image_layout(w.shape[0], cdata * S, R, f, precision, NV_FULL)
    want = ref.pack_image_weights(w, cdata, f, kpg=kpg, cb=cpb, tail=1)
    strided = np.zeros(w.shape[:3] + (2 * S,), dtype)[..., ::2]
    strided[...] = w
    for src, path in itertools.product((w, strided), ("avx512", "avx2", "ssse3", "scalar")):
        out = np.full(layout.nbytes + 64, 0xA5, np.uint8)
        before = src.copy()
        assert _core.image_weights_pack(src, out, cdata, f, kpg, cpb, layout._core, path) == layout.nbytes
        assert np.array_equal(out[:layout.nbytes], want[:layout.nbytes]), path
        assert (out[layout.nbytes:] == 0xA5).all(), path
        assert np.array_equal(src, before)


@linux_only
@pytest.mark.parametrize("path", ["avx512", "avx2", "ssse3"])
@pytest.mark.parametrize("dtype, cdata, S", [(np.int8, 4, 3), (np.int8, 3, 7), (np.int8, 4, 11), (np.int8, 3, 23),
                                            (np.int8, 2, 33), (np.int16, 4, 5), (np.int16, 2, 3), (np.int16, 2, 17)])
def test_vector_loads_stop_at_the_source_end(dtype, cdata, S, path):
    """A source whose last byte ends a page followed by an inaccessible one: the vector loads of
    the last kernels (128-byte windows, 16- and 32-byte plane loads) read nothing past the array (a read
    there would crash the test)."""
    w = np.random.default_rng(3).integers(-100, 100, (37, cdata - 1, 3, S)).astype(dtype)
    precision = "int8" if dtype == np.int8 else "int16"
    kpg = NV_FULL.kernels_per_group(precision)
    layout = image_weights.image_layout(37, cdata * S, 3, 1, precision, NV_FULL)
    out = np.empty(layout.nbytes, np.uint8)
    with before_guard_page(w) as src:
        _core.image_weights_pack(src, out, cdata, 1, kpg, NV_FULL.channels_per_block, layout._core, path)
    want = ref.pack_image_weights(w, cdata, 1, kpg=kpg, cb=NV_FULL.channels_per_block, tail=1)
    assert np.array_equal(out, want[:layout.nbytes])


def test_pass_refuses_a_descriptor_that_places_rows_elsewhere():
    w = np.ones((40, 3, 3, 3), np.int8)
    right = image_weights.image_layout(40, 12, 3, 1, "int8", NV_FULL)
    wrong = image_weights.image_layout(40, 12, 3, 1, "int8", NV_SMALL)  # other kernel groups
    out = np.full(right.nbytes, 0xA5, np.uint8)
    with pytest.raises(LayoutError, match="descriptor"):
        _core.image_weights_pack(w, out, 4, 1, 32, 64, wrong._core)
    with pytest.raises(LayoutError, match="post-extension factor"):
        _core.image_weights_pack(w, out, 4, 3, 32, 64, right._core)
    with pytest.raises(LayoutError, match="components"):
        _core.image_weights_pack(w, out, 2, 1, 32, 64, right._core)
    with pytest.raises(LayoutError, match="holds"):
        _core.image_weights_pack(w, out[:-1], 4, 1, 32, 64, right._core)
    assert (out == 0xA5).all()


def test_pass_refuses_a_descriptor_of_another_order_or_sizes():
    """The descriptor must be the image mapping itself: C' before the rows of a row group, a kernel
    group of another size, or kernels per group beyond any size are refused before anything is
    written, also right after the right descriptor passed (the pass remembers the last descriptor
    that passed, by its id and the parameters); byte-swapped elements are a TypeError."""
    from npupack.layout import BlockedLayout, Dim

    w = np.ones((40, 3, 8, 3), np.int8)
    right = image_weights.image_layout(40, 12, 8, 2, "int8", NV_FULL)
    c_first = BlockedLayout([Dim("K", 40, (32,), ragged=True), Dim("C", 12), Dim("R", 8, (2,), ragged=True),
                             Dim("S", 1)], [("K", 0), ("R", 0), ("K", 1), ("C", 0), ("R", 1), ("S", 0)], np.int8)
    assert c_first.nbytes == right.nbytes
    good = np.zeros(right.nbytes, np.uint8)
    _core.image_weights_pack(w, good, 4, 2, 32, 64, right._core)
    out = np.full(right.nbytes, 0xA5, np.uint8)
    for bad, kpg in ((c_first, 32), (right, 16), (right, 2**62), (right, 2**63 - 1)):
        with pytest.raises(LayoutError, match="descriptor"):  # its order, or its tiles
            _core.image_weights_pack(w, out, 4, 2, kpg, 64, bad._core)
        _core.image_weights_pack(w, good, 4, 2, 32, 64, right._core)
    assert (out == 0xA5).all()
    with pytest.raises(TypeError, match="big-endian"):
        _core.image_weights_pack(w.astype(">i2"), out, 4, 2, 16, 64,
                                 image_weights.image_layout(40, 12, 8, 2, "int16", NV_FULL)._core)


@pytest.mark.parametrize("path", ["avx512", "avx2", "ssse3", "scalar"])
@pytest.mark.parametrize("K, R, f", [(12000, 5, 2), (30000, 3, 1)])
def test_pass_on_two_threads(path, K, R, f):
    """A layer of more than 1 MiB runs its kernel groups on two threads (each writes only its own
    groups' bytes): the same bytes as the reference, on every path (3x3: the window passes with
    several kernels per step)."""
    rng = np.random.default_rng(5)
    w = rng.integers(-100, 100, (K, 3, R, R)).astype(np.int8)
    layout = image_weights.image_layout(K, 4 * R, R, f, "int8", NV_FULL)
    assert layout.nbytes > 1 << 20
    want = ref.pack_image_weights(w, 4, f, kpg=32, cb=64, tail=1)[:layout.nbytes]
    out = np.full(layout.nbytes, 0xA5, np.uint8)
    with npupack.num_threads(2):
        _core.image_weights_pack(w, out, 4, f, 32, 64, layout._core, path)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_window_passes_on_every_small_geometry(dtype):
    """Every kernel size up to 5x5 (and 8 rows, for post-extension 4), component count and channel
    count, each post-extension factor the descriptor allows, with 2 * kpg + 3 kernels (a short
    last group and a last window step with fewer kernels than a step makes): the window passes
    (permutation tables of 1 to several kernels per step, AVX-512 VBMI or SSSE3 shuffles) and the
    interleaving pass give the bytes of the loop reference, nothing past the descriptor."""
    precision = "int8" if dtype == np.int8 else "int16"
    kpg, cpb = NV_FULL.kernels_per_group(precision), NV_FULL.channels_per_block
    rng = np.random.default_rng(11)
    for R, S, cdata in itertools.product((1, 2, 3, 4, 5, 8), range(1, 6), range(1, 5)):
        C = int(rng.integers(1, cdata + 1))
        w = rng.integers(-100, 100, (2 * kpg + 3, C, R, S)).astype(dtype)
        for f in (1, 2, 4):
            if f > 1 and (cdata * S > cpb // f or R // f < 2):
                continue
            layout = image_weights.image_layout(w.shape[0], cdata * S, R, f, precision, NV_FULL)
            want = ref.pack_image_weights(w, cdata, f, kpg=kpg, cb=cpb, tail=1)[:layout.nbytes]
            for path in ("avx512", "avx2", "ssse3"):
                out = np.full(layout.nbytes + 64, 0xA5, np.uint8)
                _core.image_weights_pack(w, out, cdata, f, kpg, cpb, layout._core, path)
                assert np.array_equal(out[:layout.nbytes], want), (R, S, cdata, C, f, path)
                assert (out[layout.nbytes:] == 0xA5).all(), (R, S, cdata, C, f, path)
