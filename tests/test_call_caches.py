"""The packers' per-call caches (docs/design.md §5.4): a call that finds its plan cached must be
checked and packed exactly like the first call of its kind. Each front is called once to fill
its cache, then again with arguments that hit it (equal bytes to the NumPy reference, ``out=``
rules), and with arguments a cache key could confuse with the cached ones (a float or bool for
an integer, another dtype, padding, options), which must be refused or packed as their own."""
import numpy as np
import pytest

import npupack
from npupack import LayoutError, horizon, kneron, nvdla
from npupack import openvino as ov
from tests.reference import blocked as ref_blocked
from tests.reference import kneron_horizon as ref_kh
from tests.reference import nvdla as ref

RNG = np.random.default_rng(43)
X8 = RNG.integers(-128, 128, (1, 20, 5, 7), dtype=np.int8)
W8 = RNG.integers(-128, 128, (20, 9, 3, 3), dtype=np.int8)
W_IMAGE = RNG.integers(-128, 128, (21, 3, 3, 3), dtype=np.int8)  # a surface with a tail: 756 meaningful bytes
NCHW16C = npupack.Layout.parse("NCHW16c")


def _ref_nchw16c(x, pad_value=0):
    return ref_blocked.pack_transpose(x, NCHW16C.logical, NCHW16C.outer,
                                      [(t.dim, t.size, None) for t in NCHW16C.tiles], pad_value)


def _ref_horizon(x):
    aligned = (1, 5, 7, 32)  # NHWC, C padded to 32
    stride = (5 * 7 * 32, 7 * 32, 32, 1)
    return ref_kh.horizon_pad(x, stride, int(np.prod(aligned)))


# name -> (call(x, out=None), x, the NumPy reference of its bytes)
FRONTS = {
    "nvdla.pack_weights": (lambda x, out=None: nvdla.pack_weights(x, out=out).weight, W8,
                           ref.pack_dc_vectorised(W8, kpg=32, cb=64, tail=128)),
    # Image and Winograd weights take their plans in pack_weights' own first lines; the pass
    # writes the surface's zero tail.
    "nvdla.pack_weights image": (
        lambda x, out=None: nvdla.pack_weights(x, kind="image", pixel_format="T_A8B8G8R8", out=out).weight, W_IMAGE,
        ref.pack_image_weights(W_IMAGE, 4, 1, kpg=32, cb=64, tail=128)),
    "nvdla.pack_weights winograd": (lambda x, out=None: nvdla.pack_weights(x, kind="winograd", out=out).weight, W8,
                                    ref.pack_winograd(W8, "int8", atom=32, kpg=32)[0]),
    "nvdla.pack_feature": (lambda x, out=None: nvdla.pack_feature(x, out=out), X8,
                           ref.pack_feature_vectorised(X8, atom_bytes=32)),
    "npupack.pack": (lambda x, out=None: npupack.pack(x, "NCHW16c", out=out), X8, _ref_nchw16c(X8)),
    "openvino.pack": (lambda x, out=None: ov.pack(x, "b_fs_yx_fsv16", out=out), X8, _ref_nchw16c(X8)),
    "kneron.pack": (lambda x, out=None: kneron.pack(x, "16W1C8B", chip="kl720", out=out), X8,
                    ref_kh.kneron_v1_pack(X8[0], "kl720", "16W1C8B")),
    "horizon.pad": (lambda x, out=None: horizon.pad(x, aligned_shape=(1, 5, 7, 32), out=out),
                    X8.transpose(0, 2, 3, 1).copy(), _ref_horizon(X8.transpose(0, 2, 3, 1))),
}


@pytest.mark.parametrize("name", FRONTS)
def test_a_cached_call_packs_the_reference_bytes_and_keeps_the_out_rules(name):
    call, x, expected = FRONTS[name]
    n = expected.size
    for _ in range(3):  # the first call fills the cache, the others hit it
        assert np.array_equal(call(x), expected)
    out = np.full(n + 100, 0xAB, np.uint8)
    got = call(x, out=out)
    assert np.shares_memory(got, out) and np.array_equal(out[:n], expected)
    assert (out[n:] == 0xAB).all()  # bytes past the result untouched
    short = np.full(n - 1, 0xCD, np.uint8)
    with pytest.raises(LayoutError, match="out: "):
        call(x, out=short)
    assert (short == 0xCD).all()
    with pytest.raises(TypeError, match="out: "):
        call(x, out=np.zeros(n, np.int8))
    frozen = np.zeros(n, np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(LayoutError, match="out: "):
        call(x, out=frozen)
    both = np.zeros(x.nbytes + n, np.uint8)  # x inside out's bytes: refused, x left as it was
    alias = both[:x.nbytes].view(x.dtype).reshape(x.shape)
    alias[...] = x
    with pytest.raises(LayoutError, match="overlaps"):
        call(alias, out=both)
    assert np.array_equal(alias, x)


@pytest.mark.parametrize("name", FRONTS)
def test_a_cached_call_refuses_non_numeric_input(name):
    call, x, _ = FRONTS[name]
    call(x)
    with pytest.raises(TypeError, match="is not a number"):
        call(x.astype(np.str_))


@pytest.mark.parametrize("call", [
    lambda x: nvdla.pack_weights(x, precision="int8"),
    lambda x: nvdla.pack_feature(x, precision="int8"),
    lambda x: kneron.pack(x, "16W1C8B", chip="kl720"),
], ids=["nvdla.pack_weights", "nvdla.pack_feature", "kneron.pack"])
def test_a_cached_integer_call_refuses_float_input(call):
    call(X8)
    with pytest.raises(TypeError, match="float"):
        call(X8.astype(np.float32))


@pytest.mark.parametrize("lay", [1.0, True, 2.0])
def test_kneron_layout_value_refused_after_its_integer_twin(lay):
    x = X8[0]
    for call in (lambda v: kneron.pack(x, v, chip="kl720"), lambda v: kneron.nbytes(v, x.shape, chip="kl720")):
        call(int(lay))  # fills both caches
        with pytest.raises(TypeError, match="layout: expected a DataLayout, its name or value"):
            call(lay)


def test_kneron_cached_8_bit_layout_takes_uint8_as_the_same_bits_and_refuses_16_bit():
    x = X8[0]
    expected = ref_kh.kneron_v1_pack(x, "kl720", "1W16C8B")
    assert np.array_equal(kneron.pack(x, "1W16C8B", chip="kl720"), expected)
    assert np.array_equal(kneron.pack(x.view(np.uint8), "1W16C8B", chip="kl720"), expected)
    assert np.array_equal(kneron.pack(x.view(np.uint8), "1W16C8B", chip="kl720"), expected)
    with pytest.raises(TypeError, match="8-bit integers"):
        kneron.pack(x.astype(np.int16), "1W16C8B", chip="kl720")


def test_kneron_options_are_not_taken_from_a_cached_plain_call():
    x = RNG.integers(-3000, 3000, (3, 4, 9), dtype=np.int16) | 1  # every value odd
    plain = kneron.pack(x, "8W1C16B", chip="kl720")
    assert np.array_equal(plain, ref_kh.kneron_v1_pack(x, "kl720", "8W1C16B"))
    cleared = kneron.pack(x, "8W1C16B", chip="kl720", clear_lsb=True)
    assert np.array_equal(cleared, ref_kh.kneron_v1_pack(x & np.int16(-2), "kl720", "8W1C16B"))
    assert np.array_equal(kneron.pack(x, "8W1C16B", chip="kl720"), plain)
    # Big-endian scalars: the bytes of each little-endian pair swapped, on every call.
    y = RNG.integers(-3000, 3000, (1, 3, 4, 5), dtype=np.int16)
    le = kneron.pack(y, "HW1C16B_LE", chip="kl730", stride_npu=(120, 40, 10, 2))
    for _ in range(2):
        be = kneron.pack(y, "HW1C16B_BE", chip="kl730", stride_npu=(120, 40, 10, 2))
        assert np.array_equal(be.reshape(-1, 2), le.reshape(-1, 2)[:, ::-1])


def test_npupack_pack_cached_descriptor_keeps_padding_and_pad_value_apart():
    expected = _ref_nchw16c(X8)
    assert np.array_equal(npupack.pack(X8, "NCHW16c"), expected)
    assert np.array_equal(npupack.pack(X8, NCHW16C), expected)  # the object and its text
    assert np.array_equal(npupack.pack(X8, "NCHW16c", pad_value=7), _ref_nchw16c(X8, 7))
    padded = npupack.pack(X8, "NCHW16c", pad_hi=(0, 0, 1, 0))
    assert padded.size == NCHW16C.nbytes((1, 20, 6, 7), np.int8)
    with pytest.raises(ValueError, match="pad_value"):
        npupack.pack(X8, "NCHW16c", pad_value=300)
    with pytest.raises(LayoutError, match="x: has 3 dimensions"):
        npupack.pack(X8[0], "NCHW16c")
    with pytest.raises(TypeError, match="layout: expected a npupack.Layout or its text"):
        npupack.pack(X8, ["NCHW16c"])


def test_nvdla_cached_plans_convert_what_is_not_of_the_target_dtype():
    expected16 = ref.pack_dc_vectorised(W8.astype(np.int16), kpg=16, cb=32, tail=128)
    nvdla.pack_weights(W8)  # the int8 plan
    assert np.array_equal(nvdla.pack_weights(W8, precision="int16").weight, expected16)
    assert np.array_equal(nvdla.pack_weights(W8.astype(np.int16)).weight, expected16)
    big = W8.astype(np.int16).astype(">i2")
    assert np.array_equal(nvdla.pack_weights(big).weight, expected16)
    u = W8.view(np.uint8)
    with pytest.raises(ValueError, match="do not fit int8"):
        nvdla.pack_weights(u, precision="int8")
    nvdla.pack_feature(X8)
    with pytest.raises(ValueError, match="do not fit int8"):
        nvdla.pack_feature(X8.view(np.uint8), precision="int8")
    assert np.array_equal(nvdla.pack_feature(X8[0]), ref.pack_feature_vectorised(X8, atom_bytes=32))


@pytest.mark.parametrize("option, error", [(dict(stride=(1.0, 1.0)), TypeError), (dict(stride=(True, True)), TypeError),
                                           (dict(scale=True), ValueError)], ids=["float stride", "bool stride",
                                                                                 "bool scale"])
def test_nvdla_cached_plan_refuses_defaults_of_the_wrong_type(option, error):
    """(1.0, 1.0) and True compare equal to the defaults (1, 1) and 1.0 that DC weights ignore; they
    are still errors, with or without a cached plan."""
    for _ in range(2):
        nvdla.pack_weights(W8)
        with pytest.raises(error, match=next(iter(option))):
            nvdla.pack_weights(W8, **option)


@pytest.mark.parametrize("options, match", [
    (dict(aligned_shape=(1.0, 5, 7, 32)), "aligned_shape"),
    (dict(aligned_shape=(1, 5, 7, 32.0)), "aligned_shape"),
    (dict(stride=(1120.0, 224, 32, 1)), "stride"),
    (dict(aligned_shape=(1, 5, 7, 32), aligned_byte_size=True), "aligned_byte_size"),
], ids=["float N", "float C", "float stride", "bool byte size"])
def test_horizon_cached_plan_refuses_floats_and_bools_equal_to_its_integers(options, match):
    """(1.0, 5, 7, 32) hashes and compares like (1, 5, 7, 32): a key alone would let it through."""
    x = X8.transpose(0, 2, 3, 1).copy()
    for _ in range(2):
        horizon.pad(x, aligned_shape=(1, 5, 7, 32))
        horizon.pad(x, stride=(1120, 224, 32, 1))
        horizon.pad(x, aligned_shape=(1, 5, 7, 32), aligned_byte_size=1120)
        with pytest.raises(TypeError, match=match):
            horizon.pad(x, **options)


def test_horizon_cached_plan_serves_equal_shapes_given_as_other_objects():
    x = X8.transpose(0, 2, 3, 1).copy()
    expected = _ref_horizon(x)
    shapes = [(1, 5, 7, 32), tuple([1, 5, 7, 32]), [1, 5, 7, 32], np.array([1, 5, 7, 32]), (np.int64(1), 5, 7, 32)]
    for shape in shapes + shapes:
        assert np.array_equal(horizon.pad(x, aligned_shape=shape), expected)
    # The model's larger byte size: a zero tail, written into a dirty out= too.
    out = np.full(1300, 0xEE, np.uint8)
    for _ in range(2):
        got = horizon.pad(x, aligned_shape=(1, 5, 7, 32), aligned_byte_size=1200, out=out)
        assert got.size == 1200 and np.array_equal(got[:1120], expected) and (got[1120:] == 0).all()
        assert (out[1200:] == 0xEE).all()
        out[:] = 0xEE


def test_engine_plans_kept_per_call_keep_strides_pad_and_direction_apart():
    """The engine keeps the plans of recent calls (docs/design.md §5.4): one layout packed from
    inputs of other strides, with other pad values, unpacked, and after more layouts than it
    keeps must give the reference bytes every time."""
    x = RNG.integers(-128, 128, (2, 20, 9, 11), dtype=np.int8)
    views = {"C order": x, "F order": np.asfortranarray(x), "reversed": x[:, :, ::-1].copy()[:, :, ::-1]}
    for _ in range(2):
        for name, v in views.items():
            for pad_value in (0, 5, 7):
                assert np.array_equal(npupack.pack(v, NCHW16C, pad_value=pad_value), _ref_nchw16c(x, pad_value)), name
        packed = npupack.pack(x, NCHW16C)
        assert np.array_equal(npupack.unpack(packed, NCHW16C, x.shape, x.dtype), x)
    shapes = [(1, c, 3, 4) for c in range(1, 13)]  # more layouts than the engine keeps, twice over
    tensors = [RNG.integers(-128, 128, s, dtype=np.int8) for s in shapes]
    for _ in range(2):
        for t in tensors:
            assert np.array_equal(npupack.pack(t, NCHW16C, pad_value=1), _ref_nchw16c(t, 1))


@pytest.mark.parametrize("twin, option", [
    (dict(post_extension=2), dict(post_extension=2.0)),
    (dict(post_extension=1), dict(post_extension=True)),
    (dict(), dict(stride=(1.0, 1.0))),
    (dict(), dict(saturate=1)),
    (dict(), dict(scale=True)),
], ids=["float factor", "bool factor", "float stride", "int saturate", "bool scale"])
def test_nvdla_image_plan_refuses_options_equal_to_its_key(twin, option):
    """Image weights keep a plan per shape and options: an option that compares equal to the cached
    one (2.0 and 2, True and 1) is refused as on a first call, and the plan still packs its twin."""
    from npupack.nvdla import image_weights

    w = RNG.integers(-100, 100, (40, 3, 5, 5), dtype=np.int8)
    kw = dict(kind="image", pixel_format="T_A8B8G8R8")
    image_weights._PLANS.clear()
    with pytest.raises((TypeError, ValueError)) as first:
        nvdla.pack_weights(w, **kw, **option)
    f = twin.get("post_extension", 2)  # "auto" on a 5x5 kernel of 4 components: 2
    expected = ref.pack_image_weights(w, 4, f, kpg=32, cb=64, tail=nvdla.NV_FULL.weight_size_alignment)
    for _ in range(2):
        assert np.array_equal(nvdla.pack_weights(w, **kw, **twin).weight, expected)
        with pytest.raises(first.type, match=str(first.value)[:20]):
            nvdla.pack_weights(w, **kw, **option)


@pytest.mark.parametrize("option", [dict(stride=(1.0, 1.0)), dict(stride=(True, True)), dict(saturate=1),
                                    dict(allow_nan=0)], ids=["float stride", "bool stride", "int saturate",
                                                             "int allow_nan"])
def test_nvdla_winograd_plan_refuses_options_equal_to_its_key(option):
    """The same for Winograd weights: the plan of stride (1, 1), saturate True and allow_nan False
    serves no argument an uncached call refuses."""
    from npupack.nvdla import winograd

    w = RNG.standard_normal((16, 8, 3, 3)).astype(np.float16)
    winograd._PLANS.clear()
    with pytest.raises((TypeError, ValueError)) as first:
        nvdla.pack_weights(w, kind="winograd", **option)
    for _ in range(2):
        nvdla.pack_weights(w, kind="winograd")
        with pytest.raises(first.type, match=str(first.value)[:20]):
            nvdla.pack_weights(w, kind="winograd", **option)


@pytest.mark.parametrize("name", ["T_A8B8G8R8", "T_Y8___V8U8_N444", "T_R8", "T_A16B16G16R16", "T_Y16___U16V16_N444"])
def test_nvdla_pixel_plan_packs_the_reference_on_every_call(name):
    """pack_pixels keeps a plan per (shape, dtype, format, x offset): the calls that hit it write
    the reference planes, into new arrays and into a tuple of ``out`` buffers."""
    from npupack.nvdla import PIXEL_FORMATS
    from npupack.nvdla import pixel
    from tests.reference import pixels as ref_pixels

    fmt = PIXEL_FORMATS[name]
    pixel._PLANS.clear()
    for h, w, xo in [(3, 7, 0), (3, 7, 1), (2, 17, 0), (5, 40, fmt.x_offset_max)]:
        hi = 65536 if fmt.kind == "16bit" else 256
        img = RNG.integers(0, hi, (h, w, fmt.comps)).astype(np.uint16 if fmt.kind == "16bit" else np.uint8)
        if fmt.comps == 1:
            img = img[:, :, 0].copy()  # (H, W): a one-component image
        expected = ref_pixels.pack(img if img.ndim == 3 else img[:, :, None], name, x_offset=xo)
        for _ in range(3):
            assert all(np.array_equal(g, e) for g, e in zip(nvdla.pack_pixels(img, name, x_offset=xo).planes,
                                                             expected))
            outs = tuple(np.full(e.size + 5, 0xAB, np.uint8) for e in expected)
            got = nvdla.pack_pixels(img, name, x_offset=xo, out=outs)
            for g, o, e in zip(got.planes, outs, expected):
                assert np.shares_memory(g, o) and np.array_equal(o[:e.size], e) and (o[e.size:] == 0xAB).all()
    assert pixel._PLANS  # the calls above were served by plans


@pytest.mark.parametrize("option, error", [(dict(x_offset=True), TypeError), (dict(x_offset=1.0), TypeError),
                                           (dict(img_dtype=np.int16), TypeError),
                                           (dict(out_short=True), LayoutError)],
                         ids=["bool x_offset", "float x_offset", "int16 image", "short plane"])
def test_nvdla_pixel_plan_refuses_what_a_first_call_refuses(option, error):
    """After a plan for x_offset 1 and uint8 pixels, an argument equal to its key (True, 1.0) or
    another dtype is refused as on a first call, and a plane buffer of the tuple is still
    checked; the refused call writes nothing."""
    from npupack.nvdla import pixel

    img = RNG.integers(0, 256, (4, 9, 3), dtype=np.uint8)
    name = "T_Y8___U8V8_N444"
    pixel._PLANS.clear()
    planes = nvdla.pack_pixels(img, name, x_offset=1).planes
    nvdla.pack_pixels(img, name, x_offset=1)
    kw = dict(x_offset=option.get("x_offset", 1))
    arg = img.astype(option["img_dtype"]) if "img_dtype" in option else img
    outs = tuple(np.full(p.size - (1 if option.get("out_short") else 0), 0xCD, np.uint8) for p in planes)
    with pytest.raises(error):
        nvdla.pack_pixels(arg, name, out=outs, **kw)
    assert all((o == 0xCD).all() for o in outs)


def test_pixel_planes_tuple_out_overlapping_the_image_is_refused():
    """The argument gate tests every buffer of a tuple ``out`` against the image (the inline test
    of one array per plane): a UV plane over the image's bytes is refused before anything moves."""
    img = RNG.integers(0, 256, (4, 9, 3), dtype=np.uint8)
    name = "T_Y8___U8V8_N444"
    planes = nvdla.pack_pixels(img, name).planes
    raw = np.zeros(img.nbytes + planes[1].size, np.uint8)
    alias = raw[:img.nbytes].reshape(img.shape)
    alias[...] = img
    before = raw.copy()
    with pytest.raises(LayoutError, match="overlaps"):
        nvdla.pack_pixels(alias, name, out=(np.zeros(planes[0].size, np.uint8), raw))
    assert np.array_equal(raw, before)


def test_kneron_plan_with_strides_refuses_float_strides_equal_to_its_key():
    """kl730 calls with stride_npu keep a plan per exact integer strides: (96.0, ...) after (96, ...)
    is refused as on a first call, and the plan packs the reference bytes again."""
    y = RNG.integers(-128, 128, (1, 3, 4, 5), dtype=np.int8)
    st_ = tuple(kneron.predict_stride_npu(y.shape, "1W16C8B"))
    expected = ref_kh.kneron_v2_pack(y, st_)
    with pytest.raises(TypeError) as first:
        kneron.pack(y, "1W16C8B", chip="kl730", stride_npu=tuple(float(v) for v in st_))
    for _ in range(2):
        assert np.array_equal(kneron.pack(y, "1W16C8B", chip="kl730", stride_npu=st_)[:expected.size], expected)
        with pytest.raises(TypeError, match=str(first.value)[:20]):
            kneron.pack(y, "1W16C8B", chip="kl730", stride_npu=tuple(float(v) for v in st_))
        # A bool equal to an entry (True for 1), in the strides or the shape, is refused too.
        with pytest.raises(TypeError, match="stride_npu"):
            kneron.pack(y, "1W16C8B", chip="kl730", stride_npu=tuple(True if v == 1 else v for v in st_))
        with pytest.raises(TypeError, match="shape"):
            kneron.nbytes("1W16C8B", (True,) + y.shape[1:], chip="kl730", stride_npu=st_)


def test_pixel_planes_that_overlap_each_other_are_refused():
    """The Y and UV planes of a semi-planar format are written by rows on several threads: a tuple
    ``out`` whose two planes share bytes is refused before anything is written (a cached plan
    too), and the C++ split refuses such planes itself."""
    from npupack import _core

    img = RNG.integers(0, 256, (8, 9, 3), dtype=np.uint8)
    name = "T_Y8___U8V8_N444"
    planes = nvdla.pack_pixels(img, name).planes
    raw = np.full(planes[0].size + planes[1].size, 0xA5, np.uint8)
    for _ in range(2):
        with pytest.raises(LayoutError, match="out: the two planes"):
            nvdla.pack_pixels(img, name, out=(raw, raw[planes[0].size - 1:]))
    assert (raw == 0xA5).all()
    with pytest.raises(LayoutError, match="overlap"):
        _core.split_yuv444(img, raw, 32, 0, raw[16:], 32, 0, False)
    assert (raw == 0xA5).all()
    # An image of no pixels per row: nothing to write, and no division by its zero strides.
    _core.split_yuv444(np.zeros((2, 0, 3), np.uint8), np.zeros(0, np.uint8), 0, 0, np.zeros(0, np.uint8), 0, 0,
                       False)
