"""Flags and scalar parameters of the public API: a flag is True or False (or a NumPy bool), never
read by truthiness ("no" used to mean True); a rounding mode is checked whatever the input dtype
(a float16 feature cube used to skip the check); quantisation parameters keep their documented
domain (Kneron radix and Horizon shift are whole power-of-two exponents, a Horizon zero point a
whole int32, a dequantisation scale finite and nonzero) instead of being truncated or turned into
NaN; the helper functions that take plain integers (post-extension choice, BPU byte alignment)
refuse zero, negative and fractional values with an error naming the argument; every NVDLA call
that takes a ``config`` refuses anything but a Config, and the arguments that used to crash inside
the library (a Horizon ``properties`` that is not TensorProperties, an NV12 ``w_align`` of 0, a
Kneron layout without an element type, a sparsity ``tail`` of 0, a pixel ``shape`` that is not
(H, W[, comps]), a pack job ``config`` or ``pixel_format`` that does not exist) are errors naming
them, and an image of the wrong element type or range is refused by the pixel precision
conversion as by the pixel packer instead of being truncated. Quantisation parameters that
silently gave unquantised or all-zero / all-inf results are refused: a Horizon quanti_type that
is not a name, a Kneron radix whose factor leaves float32. A Kneron firmware code that is not an
integer and a memory-plan view of a surface that is not placed are errors naming them."""
import numpy as np
import pytest

import npupack
import npupack.horizon as hz
import npupack.job as job
import npupack.kneron as kn
import npupack.nvdla as nv
import npupack.openvino as ov

W8 = np.arange(-72, 72, dtype=np.int8).reshape(4, 4, 3, 3)
W16 = (np.arange(144, dtype=np.float32).reshape(4, 4, 3, 3) / 7).astype(np.float16)
X16 = (np.arange(64, dtype=np.float32).reshape(1, 4, 4, 4) / 3).astype(np.float16)
X8 = np.arange(48, dtype=np.int8).reshape(1, 3, 4, 4)
STRIDE_NPU = (256, 1, 64, 16)  # docs/kneron.md §7: 1W16C8B on KL730 for X8's shape
Y = np.arange(32, dtype=np.uint8).reshape(4, 8)
UV = np.arange(16, dtype=np.uint8).reshape(2, 4, 2)
IMG = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)

# flag name -> f(value): the public call that takes the flag, everything else valid.
FLAGS = {
    "to_fp16 saturate": ("saturate", lambda v: nv.to_fp16(np.array([1e6, 1.5]), saturate=v)),
    "pack_feature saturate": ("saturate", lambda v: nv.pack_feature(X16, saturate=v)),
    "pack_weights saturate": ("saturate", lambda v: nv.pack_weights(W16, saturate=v).weight),
    "pack_weights saturate (int8)": ("saturate", lambda v: nv.pack_weights(W8, saturate=v).weight),
    "pack_weights allow_nan": ("allow_nan", lambda v: nv.pack_weights(W16, allow_nan=v).weight),
    "pack_weights_many saturate": ("saturate", lambda v: nv.pack_weights_many([W16], saturate=v)[0].weight),
    "unpack_weights logical": ("logical", lambda v: nv.unpack_weights(nv.pack_weights(W8), logical=v)),
    "pack_bias saturate": ("saturate", lambda v: nv.pack_bias(np.arange(4, dtype=np.int8), precision="int8",
                                                              saturate=v).data),
    "convert_pixel_precision cvt": ("cvt", lambda v: nv.convert_pixel_precision(IMG, "T_A8B8G8R8", "int8",
                                                                               cvt=v)),
    "convert_pixel_precision sign_override": ("sign_override", lambda v: nv.convert_pixel_precision(
        IMG, "T_A8B8G8R8", "int8", sign_override=v)),
    "openvino.unpack check_padding": ("check_padding", lambda v: ov.unpack(
        ov.pack(X8, "b_fs_yx_fsv16"), "b_fs_yx_fsv16", X8.shape, np.int8, check_padding=v)),
    "horizon.pack_nv12 separate": ("separate", lambda v: hz.pack_nv12(Y, UV, separate=v)),
    "kneron.pack clear_lsb": ("clear_lsb", lambda v: kn.pack(X8.astype(np.int16), "RAW_16B", chip="kl730",
                                                             stride_npu=(48, 16, 4, 1), clear_lsb=v)),
    "kneron.unpack allow_input_only": ("allow_input_only", lambda v: kn.unpack(
        kn.pack(X8, "1W16C8B", chip="kl730", stride_npu=STRIDE_NPU), "1W16C8B", X8.shape, chip="kl730",
        stride_npu=STRIDE_NPU, allow_input_only=v)),
    "Layout.pack reference": ("reference", lambda v: npupack.Layout.parse("NCHW16c").bind(X8.shape, np.int8)
                              .pack(X8, reference=v)),
}


def _result(r):
    return tuple(np.asarray(a) for a in r) if isinstance(r, tuple) else np.asarray(r)


# None is clear_lsb's default (the chip decides; docs/kneron.md §7), a bad value for every other flag.
BAD = [(case, bad) for case in FLAGS for bad in ("no", "", 1, 0, None, 1.0)
       if not (FLAGS[case][0] == "clear_lsb" and bad is None)]


@pytest.mark.parametrize("case, bad", BAD, ids=[f"{c}-{b!r}" for c, b in BAD])
def test_flag_must_be_a_bool(case, bad):
    name, call = FLAGS[case]
    with pytest.raises(TypeError, match=f"{name}: expected True or False"):
        call(bad)


@pytest.mark.parametrize("case", list(FLAGS))
@pytest.mark.parametrize("flag", [True, False])
def test_numpy_bool_is_a_bool(case, flag):
    """np.bool_ (what a comparison of arrays gives) is accepted and means the same as bool."""
    call = FLAGS[case][1]
    try:
        want = _result(call(flag))
    except (ValueError, npupack.UnsupportedError):  # the flag value itself is refused here
        with pytest.raises((ValueError, npupack.UnsupportedError)):
            call(np.bool_(flag))
        return
    got = _result(call(np.bool_(flag)))
    if isinstance(want, tuple):
        assert all(np.array_equal(a, b) for a, b in zip(want, got))
    else:
        assert np.array_equal(want, got)


@pytest.mark.parametrize("call", [
    lambda: nv.pack_feature(X16, rounding="up"),  # float16 input: packed without a conversion
    lambda: nv.pack_feature(X8, rounding="up"),
    lambda: nv.pack_bias(np.arange(4, dtype=np.int8), precision="int8", rounding="up"),
], ids=["feature fp16", "feature int8", "bias int8"])
def test_rounding_checked_whatever_the_dtype(call):
    with pytest.raises(ValueError, match="rounding: 'up'"):
        call()


@pytest.mark.parametrize("args, error, match", [
    ((3, 0, 3, 1, 64), npupack.LayoutError, "s: must be >= 1"),
    ((0, 3, 3, 1, 64), npupack.LayoutError, "cdata: must be >= 1"),
    ((3, 3, 3, -1, 64), npupack.LayoutError, "stride_x: must be >= 1"),
    ((3.5, 3, 3, 1, 64), TypeError, "cdata: expected an integer"),
    ((3, 3, 3, 1, True), TypeError, "mac_atomic_c: expected an integer"),
])
def test_post_extension_factor_arguments(args, error, match):
    with pytest.raises(error, match=match):
        nv.post_extension_factor(*args)


def test_post_extension_factor_takes_numpy_integers():
    assert nv.post_extension_factor(*map(np.int64, (4, 3, 3, 1, 64))) == nv.post_extension_factor(4, 3, 3, 1, 64)


@pytest.mark.parametrize("kw, error, match", [
    (dict(block=0), ValueError, "block: must be >= 1"),
    (dict(block=2.5), TypeError, "block: expected an integer"),
    (dict(steps=(16, 300)), ValueError, r"steps: each must be in 1\.\.255"),
    (dict(steps=(0,)), ValueError, "steps: each must be in"),
    (dict(steps=(1.5,)), TypeError, "steps: expected an integer"),
])
def test_align_bpu_bytes_block_and_steps(kw, error, match):
    with pytest.raises(error, match=match):
        hz.align_bpu_bytes(100, **kw)


def test_align_bpu_bytes_custom_rule():
    """A rule of 128-byte blocks with one 64-byte step: the definition (docs/horizon.md §4.1) by hand."""
    assert [hz.align_bpu_bytes(n, block=128, steps=(64,)) for n in (1, 64, 65, 128, 129, 193)] == \
        [64, 64, 128, 128, 192, 256]
    assert hz.align_bpu_bytes(100, steps=()) == 256


F = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("call, error, match", [
    (lambda: kn.quantize(F, 1.5, 1.0), ValueError, "radix: must be whole numbers"),
    (lambda: kn.quantize(F, np.nan, 1.0), ValueError, "radix: must be whole numbers"),
    (lambda: kn.quantize(F, [1, 2.5, 3], 1.0, axis=0), ValueError, "radix: must be whole numbers"),
    (lambda: kn.quantize(F, 1, 1.0, axis=7), ValueError, "axis: 7 is out of range"),
    (lambda: kn.quantize(F, 1, 1.0, axis=1.0), TypeError, "axis: expected an integer"),
    (lambda: kn.quantize(F, 1, 1.0, bits=8.7), TypeError, "bits: expected an integer"),
    (lambda: kn.quantize(F, 1, 1.0, dtype=np.int32), ValueError, "dtype: None"),
    (lambda: kn.dequantize(np.ones(3, np.int8), 1, 0.0), ValueError, "scale: must be finite and > 0"),
    (lambda: kn.dequantize(np.ones(3, np.int8), 0.5, 1.0), ValueError, "radix: must be whole numbers"),
    (lambda: kn.dequantize(np.ones(3, np.int8), 1, 1.0, axis=3), ValueError, "axis: 3 is out of range"),
])
def test_kneron_quantisation_parameters(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_kneron_whole_radix_as_float_or_numpy_integer():
    want = kn.quantize(F, 3, 0.5)
    assert np.array_equal(kn.quantize(F, 3.0, 0.5), want)
    assert np.array_equal(kn.quantize(F, np.int64(3), 0.5), want)
    # clip(round(x * scale * 2**radix)) by hand for the per-axis case (docs/kneron.md §5)
    per_axis = kn.quantize(F, [1, 2, 3], 1.0, axis=0)
    assert np.array_equal(per_axis, np.rint(F.astype(np.float64) * np.array([[2.0], [4.0], [8.0]])).astype(np.int8))


@pytest.mark.parametrize("call, error, match", [
    (lambda: hz.quantize([0.5], dtype="S8", quanti_type="SHIFT", shift=1.5), ValueError, "shift: must be whole"),
    (lambda: hz.quantize([0.5], dtype="S8", quanti_type="SHIFT", shift=-1), ValueError, "shift: must be whole"),
    (lambda: hz.quantize([0.5], dtype="S8", quanti_type="SHIFT", shift=256), ValueError, "shift: must be whole"),
    (lambda: hz.quantize([0.5], dtype="S8", quanti_type="SHIFT", shift=np.nan), ValueError, "shift: must be whole"),
    (lambda: hz.quantize([0.5], dtype="S8", quanti_type="SHIFT"), ValueError, "shift: required"),
    (lambda: hz.quantize([0.5], dtype="S8", quanti_type="SCALE", scale=1.0, zero_point=0.5), ValueError,
     "zero_point: must be whole"),
    (lambda: hz.quantize(np.ones((2, 2)), dtype="S8", quanti_type="SCALE", scale=[1.0, 2.0], axis=1.0), TypeError,
     "axis: expected an integer"),
    (lambda: hz.dequantize([1, 2], quanti_type="SHIFT", shift=1.5), ValueError, "shift: must be whole"),
    (lambda: hz.dequantize([1, 2], quanti_type="SCALE", scale=0.0), ValueError, "scale: must be finite and nonzero"),
    (lambda: hz.dequantize([1, 2], quanti_type="SCALE", scale=np.nan), ValueError, "scale: must be finite"),
    (lambda: hz.dequantize([1, 2], quanti_type="SCALE", scale=1.0, zero_point=0.5), ValueError,
     "zero_point: must be whole"),
    (lambda: hz.dequantize(["1"], quanti_type="NONE"), TypeError, "q: expected numbers"),
])
def test_horizon_quantisation_parameters(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_horizon_whole_parameters_as_floats():
    """A shift or zero point given as a whole float means the same as the integer (docs/horizon.md §7
    formulas by hand)."""
    assert hz.dequantize([1000], quanti_type="SHIFT", shift=8.0).tolist() == [1000 / 256]
    assert hz.quantize([0.5, 1.0], dtype="S8", quanti_type="SCALE", scale=0.25, zero_point=3.0).tolist() == \
        [2 + 3, 4 + 3]
    assert hz.dequantize(np.array([10], np.int8), quanti_type="SCALE", scale=0.5, zero_point=np.int32(4)).tolist() \
        == [3.0]


@pytest.mark.parametrize("shape, error, match", [
    ((1, 2.5, 3, 3), TypeError, "shape: dimensions must be integers"),
    ((3, 3), npupack.LayoutError, r"shape: \(C, H, W\) or \(N, C, H, W\)"),
    ((8, 0, 1), npupack.LayoutError, "shape: every dimension must be >= 1"),
])
def test_check_alignment_shape(shape, error, match):
    with pytest.raises(error, match=match):
        nv.check_alignment("feature", shape=shape)


def test_post_extension_is_an_integer_factor():
    w = np.ones((4, 3, 3, 3), np.int8)
    with pytest.raises(ValueError, match="post_extension: 'auto', 1, 2 or 4, got 2.0"):
        nv.pack_weights(w, kind="image", pixel_format="T_A8B8G8R8", post_extension=2.0)
    one = nv.pack_weights(w, kind="image", pixel_format="T_A8B8G8R8", post_extension=1).weight
    assert np.array_equal(nv.pack_weights(w, kind="image", pixel_format="T_A8B8G8R8",
                                          post_extension=np.int64(1)).weight, one)


# Every public NVDLA call that takes a hardware configuration, everything else valid: each used
# to read an attribute of whatever it was given (AttributeError on a name, a number or None).
CONFIG_CALLS = {
    "pack_weights": lambda c: nv.pack_weights(W8, config=c),
    "pack_weights winograd": lambda c: nv.pack_weights(W16, kind="winograd", config=c),
    "pack_weights_many": lambda c: nv.pack_weights_many([W8], config=c),
    "weights_nbytes": lambda c: nv.weights_nbytes(W8.shape, precision="int8", config=c),
    "dc_layout": lambda c: nv.dc_layout(W8.shape, "int8", c),
    "winograd_layout": lambda c: nv.winograd_layout((4, 32, 4, 4), "fp16", c),
    "pack_feature": lambda c: nv.pack_feature(X8, config=c),
    "pack_feature with strides": lambda c: nv.pack_feature(X8, config=c, line_stride=128),
    "unpack_feature": lambda c: nv.unpack_feature(np.zeros(4096, np.uint8), X8.shape, np.int8, config=c),
    "feature_strides": lambda c: nv.feature_strides(X8.shape, "int8", c),
    "feature_layout": lambda c: nv.feature_layout(X8.shape, "int8", c),
    "check_alignment": lambda c: nv.check_alignment("feature", config=c, address=0),
    "prune": lambda c: nv.prune(W16, 0.5, config=c),
    "pack_bias": lambda c: nv.pack_bias(np.arange(4, dtype=np.int8), precision="int8", config=c),
}


@pytest.mark.parametrize("bad", [None, "nv_full", 32, (32, 64), {}])
@pytest.mark.parametrize("case", list(CONFIG_CALLS))
def test_config_must_be_a_config(case, bad):
    CONFIG_CALLS[case](nv.NV_FULL)
    with pytest.raises(TypeError, match="config: expected an npupack.nvdla.Config"):
        CONFIG_CALLS[case](bad)


@pytest.mark.parametrize("call, error, match", [
    (lambda: hz.quantize([1.0], dtype="S8", properties="S8"), TypeError,
     "properties: expected an npupack.horizon.TensorProperties, got str"),
    (lambda: hz.dequantize(np.ones(2, np.int8), properties={"quanti_type": "SCALE"}), TypeError,
     "properties: expected an npupack.horizon.TensorProperties, got dict"),
    (lambda: hz.pack_nv12(Y, UV, w_align=0), ValueError, "w_align: the row alignment must be >= 1 byte, got 0"),
    (lambda: hz.pack_nv12(Y, UV, w_align=-16), ValueError, "w_align: the row alignment must be >= 1 byte"),
    (lambda: hz.pack_nv12(Y, UV, w_align=1.5), TypeError, "w_align: expected an integer"),
    (lambda: hz.unpack_nv12(np.zeros(64, np.uint8), 4, 8, w_align=0), ValueError, "w_align: .* >= 1"),
    (lambda: hz.unpack_nv12(np.zeros(64, np.uint8), "4", 8), TypeError, "height: expected an integer"),
    (lambda: hz.unpack_nv12(np.zeros(64, np.uint8), 0, 0), npupack.LayoutError, "at least 2x2"),
    (lambda: kn.quantize(np.ones(4), 3, 1.0, layout=0), ValueError, "layout: KP_UNKNOWN has no element type"),
    (lambda: nv.analyze_sparsity(np.ones(64, np.uint8), precision="int8", kernel_group_elements=32, tail=0),
     ValueError, "tail: the surface alignment must be >= 1 byte, got 0"),
    (lambda: nv.analyze_sparsity(np.ones(64, np.uint8), precision="int8", kernel_group_elements=32, tail=1.5),
     TypeError, "tail: expected an integer"),
    (lambda: nv.unpack_pixels(nv.pack_pixels(IMG, "T_A8B8G8R8"), "T_A8B8G8R8", ()), npupack.LayoutError,
     "shape: expected \\(H, W\\) or \\(H, W, comps\\), got \\(\\)"),
    (lambda: nv.unpack_pixels(nv.pack_pixels(IMG, "T_A8B8G8R8"), "T_A8B8G8R8", {}), TypeError,
     "shape: expected a sequence of integers"),
    (lambda: nv.unpack_pixels(nv.pack_pixels(IMG, "T_A8B8G8R8"), "T_A8B8G8R8", (2,)), npupack.LayoutError,
     "shape: expected \\(H, W\\) or"),
    (lambda: nv.unpack_pixels(nv.pack_pixels(IMG, "T_A8B8G8R8"), "T_A8B8G8R8", (2, 0)), npupack.LayoutError,
     "shape: every dimension must be >= 1"),
    (lambda: nv.convert_pixel_precision(2**70, "T_R8", "int8"), npupack.LayoutError, "img: T_R8 takes \\(H, W, 1\\)"),
    (lambda: job.pack_model("m.onnx", "out", config="nv_full"), TypeError, "config: expected an npupack.nvdla.Config"),
    (lambda: npupack.Layout.parse("NCHW", logical=np.zeros(4)), TypeError,
     "logical: expected the dimension letters in NumPy axis order"),
    (lambda: npupack.Layout.parse("NCHW", logical=[0, 1, 2, 3]), TypeError, "logical: expected the dimension"),
    (lambda: nv.MemoryPlan().add_weights(None, nv.pack_weights(W8)), ValueError,
     "name: expected a non-empty string, got None"),
    (lambda: nv.MemoryPlan().add_weights("w", ()), ValueError, "surfaces: expected WeightSurfaces or a non-empty"),
    (lambda: npupack.num_threads("4"), TypeError, "n: expected an integer number of threads, got '4'"),
    (lambda: npupack.num_threads(-1), ValueError, "n: must be >= 1"),
    (lambda: npupack.set_num_threads(2**40), ValueError, "n: must be < 2\\*\\*31"),
    (lambda: job.pack_model("m.onnx", "out", config=nv.NV_FULL, pixel_format="T_RGB"), ValueError,
     "pixel_format: expected 'auto', None or a name of npupack.nvdla.PIXEL_FORMATS"),
])
def test_arguments_that_used_to_crash(call, error, match):
    """Each of these raised AttributeError, ZeroDivisionError or KeyError from inside the
    library, or (w_align=-16, 1.5) packed with a wrong row stride."""
    with pytest.raises(error, match=match):
        call()


def test_nv12_row_alignment_of_one_byte():
    """w_align=1 is the smallest alignment: rows back to back, the planes as they are."""
    buf = hz.pack_nv12(Y, UV, w_align=1)
    assert np.array_equal(buf, np.concatenate([Y.ravel(), UV.ravel()]))
    y, uv = hz.unpack_nv12(buf, 4, 8, w_align=1)
    assert np.array_equal(y, Y) and np.array_equal(uv, UV)


@pytest.mark.parametrize("img, pixel_format, error, match", [
    (np.full((1, 1), 2.7), "T_R8", TypeError, "img: T_R8 stores 8-bit components; pass uint8 or int8, got float64"),
    (np.full((1, 1, 4), 300, np.uint16), "T_A8B8G8R8", TypeError, "img: T_A8B8G8R8 stores 8-bit components"),
    (np.full((1, 1), 7, np.uint8), "T_R16", TypeError, "img: T_R16 stores 16-bit containers"),
    (np.zeros((1, 1, 4), np.int32), "T_A16B16G16R16_F", TypeError, "img: T_A16B16G16R16_F is fp16"),
    (np.zeros((1, 1, 2), np.uint8), "T_A8B8G8R8", npupack.LayoutError, "img: T_A8B8G8R8 takes \\(H, W, 4\\)"),
    (np.zeros((0, 3), np.uint8), "T_R8", npupack.LayoutError, "img: H and W must be >= 1"),
    (np.array([[[1024, 0, 0, 0]]], np.uint16), "T_A2B10G10R10", ValueError, "colour components must be in 0-1023"),
    (np.array([[[0, 0, 0, 4]]], np.uint16), "T_A2B10G10R10", ValueError, "alpha in 0-3"),
    (np.array([[[-1, 0, 0, 0]]], np.int16), "T_A2B10G10R10", ValueError, "colour components must be in 0-1023"),
])
def test_pixel_conversion_checks_the_image(img, pixel_format, error, match):
    """convert_pixel_precision takes the image pack_pixels takes and unpack_pixels returns. It
    used to cast whatever it got to int64: 2.7 became 2, uint16 300 in an 8-bit format became 44
    (the low byte), a 10-bit 1024 overflowed the 16-bit container of the widened value."""
    with pytest.raises(error, match=match):
        nv.convert_pixel_precision(img, pixel_format, "int16")
    with pytest.raises(error, match=match):
        nv.pack_pixels(img, pixel_format)


def test_pixel_conversion_takes_every_image_the_packer_takes():
    """The accepted spellings: (H, W) for one component, (H, W, 3) for X formats, int8 for 8-bit
    formats (its bits, as the DMA reads them), float32 for fp16 formats."""
    assert nv.convert_pixel_precision(np.array([[200]], np.uint8), "T_R8", "int16").tolist() == [[200]]
    assert nv.convert_pixel_precision(np.array([[-56]], np.int8), "T_R8", "int16").tolist() == [[200]]
    rgb = np.array([[[1, 2, 3]]], np.uint8)
    assert nv.convert_pixel_precision(rgb, "T_X8R8G8B8", "int16", offset=1).tolist() == [[[0, 1, 2]]]
    half = nv.convert_pixel_precision(np.array([[[0.5, 1, 2, 3]]], np.float32), "T_A16B16G16R16_F", "fp16")
    assert half.dtype == np.float16 and half.tolist() == [[[0.5, 1, 2, 3]]]
    planes = nv.pack_pixels(IMG, "T_A8B8G8R8")
    for shape in (IMG.shape, IMG.shape[:2], list(IMG.shape), np.array(IMG.shape)):
        assert np.array_equal(nv.unpack_pixels(planes, "T_A8B8G8R8", shape), IMG)


@pytest.mark.parametrize("qt", [0, 1, 2, [], (), {}, np.int64(2)])
def test_quanti_type_is_a_name(qt):
    """docs/horizon.md §9: quantiType by name only. Empty containers and 0 used to mean NONE (the
    values came back unquantised), 1 and 2 were refused only as the strings "1" and "2"."""
    with pytest.raises(TypeError, match="quanti_type: expected the name 'NONE', 'SHIFT' or 'SCALE'"):
        hz.quantize([0.5], dtype="S8", quanti_type=qt, scale=0.01)
    with pytest.raises(TypeError, match="quanti_type: expected the name"):
        hz.dequantize(np.ones(2, np.int8), quanti_type=qt, scale=0.01)
    assert hz.quantize([0.5], dtype="S8", quanti_type="scale", scale=0.01).tolist() == [50]
    assert hz.dequantize(np.array([3], np.int16), quanti_type=None).tolist() == [3.0]


@pytest.mark.parametrize("radix, scale", [(2**31, 1.0), (-2**31 - 1, 1.0), (200, 1.0), (-160, 1.0), (120, 1e10),
                                          ([7, 300], [1.0, 1.0])])
def test_kneron_factor_fits_float32(radix, scale):
    """docs/kneron.md §5: radix is an int32 and dequantize divides by float32(scale) * float32(2**radix).
    A factor that overflows or underflows float32 used to give 0 or inf for every value (with a
    RuntimeWarning at most)."""
    axis = None if np.ndim(radix) == 0 else 1
    x = np.ones((1, 2, 2, 2))
    with pytest.raises(ValueError, match="radix: .*(whole numbers in -2147483648..2147483647|finite nonzero float32)"):
        kn.quantize(x, radix, scale, axis=axis)
    with pytest.raises(ValueError, match="radix: "):
        kn.dequantize(x.astype(np.int8), radix, scale, axis=axis)
    # The extremes that still fit: 2**127 and 2**-149 (a subnormal) are float32 numbers.
    assert kn.dequantize(np.array([1], np.int8), 127, 1.0).tolist() == [2.0 ** -127]
    assert kn.dequantize(np.array([0], np.int8), -149, 1.0).tolist() == [0.0]


@pytest.mark.parametrize("code", [False, 0.0, np.float64(4)])
def test_firmware_code_is_an_integer(code):
    """docs/kneron.md §3: the firmware format code is an integer. False and 0.0 used to look up code 0
    (1W16C8B on KL720), 4.0 code 4."""
    with pytest.raises(TypeError, match="code: expected an integer"):
        kn.DataLayout.from_firmware_code(code, "kl720")
    assert kn.DataLayout.from_firmware_code(np.int64(4), "kl720") is kn.DataLayout.KP_4W4C8B


@pytest.mark.parametrize("name", ["b", "", None])
def test_memory_plan_view_names_a_placed_surface(name):
    """docs/nvdla.md §15.2: MemoryPlan.view of a name that is not placed is an error naming ``name``;
    it used to be a bare KeyError."""
    plan = nv.MemoryPlan()
    plan.add("a", np.arange(10, dtype=np.uint8), kind="weight")
    with pytest.raises(ValueError, match="name: "):
        plan.view(plan.image(), name)
    assert plan.view(plan.image(), "a").tolist() == list(range(10))
