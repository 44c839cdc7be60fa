"""Shape, padding and stride arguments of every vendor API: a one-shot iterator (a generator) is
refused with a TypeError naming the argument, as NumPy refuses it for a shape, whether or not
the same values are already in a descriptor cache (the cache key used to read the generator, so
the call succeeded after a cached twin and failed with an unrelated message otherwise); a float
entry is refused, never truncated, also after its integer twin was cached; a range or a 1-D
integer array is a sequence and is accepted."""
import numpy as np
import pytest

import npupack
import npupack.horizon as hz
import npupack.kneron as kn
import npupack.nvdla as nv
import npupack.openvino as ov

X = np.arange(48, dtype=np.int8).reshape(1, 3, 4, 4)
SHAPE = (1, 3, 4, 4)
STRIDE_NPU = (256, 1, 64, 16)  # docs/kneron.md §7: 1W16C8B on KL730 for SHAPE (channel axis 1)


def _gen(values):
    return (v for v in values)


# name -> f(shape-like): every call takes SHAPE (or its CHW part) through its shape argument.
CALLS = {
    "npupack.unpack": lambda s: npupack.unpack(npupack.pack(X, "NCHW16c"), "NCHW16c", s, np.int8),
    "Layout.bind": lambda s: npupack.Layout.parse("NCHW16c").bind(s, np.int8),
    "Layout.nbytes": lambda s: npupack.Layout.parse("NCHW16c").nbytes(s, np.int8),
    "openvino.unpack": lambda s: ov.unpack(ov.pack(X, "b_fs_yx_fsv16"), "b_fs_yx_fsv16", s, np.int8),
    "openvino.nbytes": lambda s: ov.nbytes("b_fs_yx_fsv16", s, np.int8),
    "kneron.nbytes v1": lambda s: kn.nbytes("1W16C8B", s, chip="kl720"),
    "kneron.unpack v2": lambda s: kn.unpack(kn.pack(X, "1W16C8B", chip="kl730", stride_npu=STRIDE_NPU),
                                            "1W16C8B", s, chip="kl730", stride_npu=STRIDE_NPU),
    "horizon.aligned_shape": lambda s: hz.aligned_shape(s, np.int8),
    "horizon.strides": lambda s: hz.strides(s, np.int8),
    "nvdla.feature_strides": lambda s: nv.feature_strides(s, "int8"),
    "nvdla.unpack_feature": lambda s: nv.unpack_feature(nv.pack_feature(X), s, np.int8),
}


def _equal(a, b):
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b or repr(a) == repr(b)


@pytest.mark.parametrize("name", CALLS)
def test_generator_shape_refused_cached_or_not(name):
    call = CALLS[name]
    with pytest.raises(TypeError, match=r"shape: expected a sequence of integers"):
        call(_gen(SHAPE))
    expected = call(SHAPE)  # now the tuple's descriptor is cached
    with pytest.raises(TypeError, match=r"shape: expected a sequence of integers"):
        call(_gen(SHAPE))
    assert _equal(call(list(SHAPE)), expected)
    assert _equal(call(np.array(SHAPE)), expected)


@pytest.mark.parametrize("name", CALLS)
def test_float_shape_refused_after_its_integer_twin(name):
    call = CALLS[name]
    call(SHAPE)
    with pytest.raises(TypeError, match=r"shape: dimensions must be integers"):
        call((1, 3.0, 4, 4))


def test_range_is_a_shape():
    lay = npupack.Layout.parse("NCHW16c")
    assert lay.nbytes(range(1, 5), np.int8) == lay.nbytes((1, 2, 3, 4), np.int8)


@pytest.mark.parametrize("arg", ["pad_lo", "pad_hi"])
def test_layout_padding_is_a_sequence_of_non_negative_integers(arg):
    lay = npupack.Layout.parse("NCHW16c")
    good = lay.bind(SHAPE, np.int8, **{arg: (0, 0, 1, 1)})
    assert lay.bind(SHAPE, np.int8, **{arg: [0, 0, 1, 1]}) is good
    with pytest.raises(TypeError, match=f"{arg}: expected a sequence of integers"):
        lay.bind(SHAPE, np.int8, **{arg: _gen((0, 0, 1, 1))})
    with pytest.raises(TypeError, match=f"{arg}: entries must be integers"):  # 1.0 is not 1 (cached twin)
        lay.bind(SHAPE, np.int8, **{arg: (0, 0, 1.0, 1)})
    with pytest.raises(TypeError, match=f"{arg}: entries must be integers"):
        lay.bind(SHAPE, np.int8, **{arg: (0, 0, 1.5, 1)})
    with pytest.raises(npupack.LayoutError, match=f"{arg}: every entry must be >= 0"):
        lay.bind(SHAPE, np.int8, **{arg: (0, 0, -1, 1)})


def test_layout_bind_names_an_unknown_dtype():
    with pytest.raises(TypeError, match="dtype: 'int9' is not a NumPy dtype"):
        npupack.Layout.parse("NCHW16c").bind(SHAPE, "int9")


@pytest.mark.parametrize("bad, error, message", [
    ((256, 1.5, 64, 16), TypeError, "stride_npu: entries must be integers"),  # was truncated to 1
    ((256, 1.0, 64, 16), TypeError, "stride_npu: entries must be integers"),  # its twin is cached
    (_gen(STRIDE_NPU), TypeError, "stride_npu: expected a sequence of integers"),
    ((256, 1, -64, 16), npupack.LayoutError, "stride_npu: every entry must be >= 0"),
])
def test_kneron_stride_npu_is_a_sequence_of_integers(bad, error, message):
    kn.nbytes("1W16C8B", SHAPE, chip="kl730", stride_npu=STRIDE_NPU)
    with pytest.raises(error, match=message):
        kn.nbytes("1W16C8B", SHAPE, chip="kl730", stride_npu=bad)


def test_kneron_stride_onnx_float_refused():
    y = kn.pack(X, "1W16C8B", chip="kl730", stride_npu=STRIDE_NPU)
    kn.unpack(y, "1W16C8B", SHAPE, chip="kl730", stride_npu=STRIDE_NPU, stride_onnx=(48, 16, 4, 1))
    with pytest.raises(TypeError, match="stride_onnx: entries must be integers"):
        kn.unpack(y, "1W16C8B", SHAPE, chip="kl730", stride_npu=STRIDE_NPU, stride_onnx=(48, 16, 4.0, 1))


@pytest.mark.parametrize("call, message", [
    (lambda: npupack.Layout.parse("NCHW16c").offset_of(SHAPE, (0, 1.5, 0, 0)), "index: expected an integer"),
    (lambda: ov.offset_of("b_fs_yx_fsv16", SHAPE, (0, 1.5, 0, 0)), "index: expected an integer"),
    (lambda: hz.align_bpu_bytes(16.5), "n: expected an integer"),
    (lambda: hz.nbytes(SHAPE, "int8", aligned_shape=(1, 3, 4, 16), aligned_byte_size=300.5),
     "aligned_byte_size: expected an integer"),
    (lambda: hz.pad(X, aligned_shape=(1, 3, 4, 16), aligned_byte_size=300.5), "aligned_byte_size: expected an integer"),
], ids=["Layout.offset_of", "openvino.offset_of", "horizon.align_bpu_bytes", "horizon.nbytes", "horizon.pad"])
def test_integer_arguments_are_not_truncated(call, message):
    """Each of these read 1.5 as 1, 16.5 as 16 and 300.5 as 300."""
    with pytest.raises(TypeError, match=message):
        call()


def test_integer_arguments_accept_numpy_integers():
    lay = npupack.Layout.parse("NCHW16c")
    assert lay.offset_of(SHAPE, np.array((0, 1, 2, 3))) == lay.offset_of(SHAPE, (0, 1, 2, 3))
    assert ov.offset_of("b_fs_yx_fsv16", SHAPE, np.array((0, 1, 0, 0))) == 1
    assert hz.align_bpu_bytes(np.int64(17)) == hz.align_bpu_bytes(17) == 32
    assert hz.pad(X, aligned_shape=(1, 3, 4, 16), aligned_byte_size=np.int32(300)).size == 300


@pytest.mark.parametrize("bad", [np.array(4), np.ones((2, 2), np.int64), 4, None, "1,3,4,4"],
                         ids=["0-d array", "2-d array", "int", "None", "str"])
def test_shape_that_is_not_a_sequence_is_named(bad):
    with pytest.raises(TypeError, match=r"shape: expected a sequence of integers"):
        npupack.Layout.parse("NCHW16c").nbytes(bad, np.int8)
