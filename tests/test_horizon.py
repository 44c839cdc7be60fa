"""Horizon BPU tensors (docs/horizon.md): the alignment rule, the published examples, pad/strip against a loop
reference on random strides, NV12, generation strides (J6, S100), quantisation."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack import LayoutError, UnsupportedError
from npupack import horizon as hz
from tests.reference import kneron_horizon as ref


def test_align_bpu_bytes_table():
    prev = 0
    for n in range(1, 1025):
        a = hz.align_bpu_bytes(n)
        assert a == ref.align_bpu_bytes_table(n) and a >= n and a - n < 256 and a >= prev
        assert hz.align_bpu_bytes(a) == a
        prev = a
    assert [hz.align_bpu_bytes(n) for n in (1, 17, 33, 65, 129, 257, 273, 289, 321, 385, 513)] == \
        [16, 32, 64, 128, 256, 272, 288, 320, 384, 512, 528]


def test_seed_examples():
    assert hz.aligned_shape((1, 13, 13, 425), "S32", layout="NHWC", role="output")[3] == 448
    assert hz.aligned_shape((1, 13, 13, 425), np.int8, layout="NHWC", role="output")[3] == 512
    assert hz.aligned_shape((1, 13, 13, 425), np.int32, layout="NHWC", role="input")[3] == 448  # C > 4 input


def test_worked_examples():
    out = lambda c, t: hz.aligned_shape((1, 1, 1, c), t, role="output")[3]  # noqa: E731
    assert (out(3, np.int8), out(17, np.int8), out(300, np.int8), out(100, np.int16), out(64, np.int32)) == \
        (16, 32, 320, 128, 64)
    a = hz.aligned_shape((1, 225, 223, 3), np.uint8, layout="NHWC", role="input")
    assert a == (1, 226, 224, 3) and hz.strides(a, np.uint8) == (151872, 672, 3, 1)
    assert hz.nbytes((1, 225, 223, 3), np.uint8, aligned_shape=a) == 151872
    a = hz.aligned_shape((1, 20, 20, 425), np.int8, role="output")
    assert a == (1, 20, 20, 512) and hz.strides(a, np.int8) == (204800, 10240, 512, 1)
    x = np.random.default_rng(0).integers(-9, 9, (1, 13, 13, 425)).astype(np.int32)
    buf = hz.pad(x, aligned_shape=(1, 13, 13, 448))
    assert buf[55580:55584].view(np.int32)[0] == x[0, 2, 5, 7]
    assert np.array_equal(hz.strip(buf, x.shape, np.int32, aligned_shape=(1, 13, 13, 448)), x)
    assert not buf.view(np.int32).reshape(1, 13, 13, 448)[..., 425:].any()
    u = np.random.default_rng(1).integers(0, 999, (1, 3, 212, 212)).astype(np.uint16)
    b7 = hz.pad(u, stride=(301056, 100352, 448, 2))
    assert b7.size == 301056 and b7[245518:245520].view(np.uint16)[0] == u[0, 2, 100, 7]
    assert hz.aligned_shape((1, 3, 212, 212), np.uint16, layout="NCHW") == (1, 3, 212, 256)  # X3: W 424 -> 512 B
    assert hz.strides((1, 3, 212, 256), np.uint16) == (325632, 108544, 512, 2)
    j6 = hz.AlignmentRule(name="j6-example", per_axis={"H": ("elements", 32), "W": ("elements", 32)})
    hz.register_alignment_rule(j6)
    assert hz.aligned_shape((1, 3, 212, 212), "U16", layout="NCHW", rule="j6-example") == (1, 3, 224, 224)


@pytest.mark.parametrize("hb, np_name", [("S8", "int8"), ("U8", "uint8"), ("S16", "int16"), ("U16", "uint16"),
                                          ("F16", "float16"), ("S32", "int32"), ("F32", "float32"),
                                          ("U64", "uint64"), ("F64", "float64")])
def test_type_names(hb, np_name):
    """A dtype given as an hbDNNDataType name, a NumPy name or a NumPy type means the same element
    in every function that takes one: "S8" is a signed byte, not NumPy's 8-byte string, and "U8"
    an unsigned byte, not unicode."""
    es = np.dtype(np_name).itemsize
    x = np.arange(6).astype(np_name).reshape(2, 3)
    for t in (hb, "HB_DNN_TENSOR_TYPE_" + hb, np_name, np.dtype(np_name)):
        assert hz.strides((2, 3), t) == (3 * es, es)
        assert hz.aligned_shape((1, 1, 1, 100), t, role="output") == \
            hz.aligned_shape((1, 1, 1, 100), np.dtype(np_name), role="output")
        got = hz.strip(hz.pad(x, aligned_shape=(2, 4)), (2, 3), t, aligned_shape=(2, 4))
        assert got.dtype == np.dtype(np_name) and np.array_equal(got, x)
        if np.dtype(np_name).kind in "iu":
            assert hz.quantize([1.0], dtype=t, quanti_type="SCALE", scale=1.0).dtype == np.dtype(np_name)


def test_s100_y_uv_strides():
    y = np.random.default_rng(2).integers(0, 255, (1, 220, 220, 1)).astype(np.uint8)
    buf = hz.pad(y, stride=(49280, 224, 1, 1))
    assert buf.size == 49280 and np.array_equal(hz.strip(buf, y.shape, np.uint8, stride=(49280, 224, 1, 1)), y)
    uv = np.random.default_rng(3).integers(0, 255, (1, 110, 110, 2)).astype(np.uint8)
    b = hz.pad(uv, stride=(24640, 224, 2, 1))
    assert b.size == 24640 and b[224 * 5 + 2 * 7 + 1] == uv[0, 5, 7, 1]


def test_nv12():
    y = np.arange(24, dtype=np.uint8).reshape(4, 6)
    uv = (np.arange(12, dtype=np.uint8) + 100).reshape(2, 3, 2)
    buf = hz.pack_nv12(y, uv)
    assert buf.size == 96 and buf[53] == y[3, 5] and (buf[84], buf[85]) == (uv[1, 2, 0], uv[1, 2, 1])
    assert not buf.reshape(6, 16)[:, 6:].any()  # row tails
    yy, uu = hz.unpack_nv12(buf, 4, 6)
    assert np.array_equal(yy, y) and np.array_equal(uu, uv)
    ys, uvs = hz.pack_nv12(y, uv, w_align=32, separate=True)
    assert ys.size == 128 and uvs.size == 64
    assert np.array_equal(hz.unpack_nv12(ys, 4, 6, w_align=32, uv_buf=uvs)[1], uv)


@st.composite
def strided_cases(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    dtype = np.dtype(draw(st.sampled_from([np.int8, np.uint16, np.int32, np.float32, np.int64])))
    strides, acc = [0] * rank, dtype.itemsize
    for d in reversed(range(rank)):
        strides[d] = acc + dtype.itemsize * draw(st.integers(0, 3)) * (d != rank - 1)  # gaps: not products
        acc = strides[d] * shape[d]
    return shape, dtype, tuple(strides)


@given(strided_cases(), st.integers(0, 2**32))
def test_pad_strip_against_reference(case, seed):
    shape, dtype, stride = case
    x = np.random.default_rng(seed).integers(1, 100, shape).astype(dtype)
    total = hz.nbytes(shape, dtype, stride=stride)
    buf = hz.pad(x, stride=stride)
    assert np.array_equal(buf, ref.horizon_pad(x, stride, total))
    assert np.array_equal(hz.strip(buf, shape, dtype, stride=stride), x)


@pytest.mark.parametrize("shape", [(1, 166, 280, 11), (1, 7, 300, 23), (2, 3, 2000, 5), (1, 1, 1025, 1)])
@pytest.mark.parametrize("threads", [1, 2])
def test_pad_short_rows_many_chunks(shape, threads):
    # Rows of a few bytes in wider aligned slots, thousands of them: the gaps are zeroed chunk by
    # chunk as the rows land (docs/horizon.md §6), into an out= whose bytes past nbytes stay as given.
    import npupack
    x = np.random.default_rng(1).integers(1, 100, shape).astype(np.int8)
    aligned = hz.aligned_shape(shape, np.int8, role="output")
    total = hz.nbytes(shape, np.int8, aligned_shape=aligned)
    stride = tuple(int(s) for s in np.cumprod((1,) + tuple(aligned[:0:-1]))[::-1])
    out = np.full(total + 64, 0xA5, np.uint8)
    with npupack.num_threads(threads):
        hz.pad(x, aligned_shape=aligned, out=out)
    assert np.array_equal(out[:total], ref.horizon_pad(x, stride, total))
    assert (out[total:] == 0xA5).all()


def test_quantisation():
    assert hz.dequantize(1000, quanti_type="SHIFT", shift=8) == np.float32(3.90625)
    assert hz.dequantize(np.int8(-20), quanti_type="SCALE", scale=0.05, zero_point=3) == np.float32(-1.15)
    assert hz.quantize([0.625, 0.875, 40.0], dtype="S8", quanti_type="SCALE", scale=0.25).tolist() == [2, 4, 127]
    assert hz.quantize([0.625], dtype="S8", quanti_type="SCALE", scale=0.25, rounding="nearest_away").tolist() == [3]
    assert hz.quantize([-1e9, 1e9], dtype="U8", quanti_type="SCALE", scale=1.0).tolist() == [0, 255]
    q = np.ones((1, 2, 2, 3), np.int32) * 256
    d = hz.dequantize(q, quanti_type="SHIFT", shift=[8, 7, 6], axis=3)
    assert d.dtype == np.float32 and d[0, 0, 0].tolist() == [1.0, 2.0, 4.0]
    d1 = hz.dequantize(np.ones((1, 2, 1, 1), np.int8) * 10, quanti_type="SCALE", scale=[0.5, 2.0],
                       zero_point=[0, 4], axis=1)
    assert d1.ravel().tolist() == [5.0, 12.0]
    props = hz.TensorProperties(valid_shape=(1, 2), tensor_type="S16", quanti_type="SCALE", scale=(0.5,))
    assert hz.quantize([1.0, -1.0], properties=props).tolist() == [2, -2]
    assert hz.dequantize(np.array([4], np.int16), properties=props).tolist() == [2.0]
    assert hz.dequantize(np.array([3], np.int32), quanti_type="NONE").dtype == np.float32


@pytest.mark.parametrize("call, exc, match", [
    (lambda: hz.aligned_shape((1, 2, 3), np.int8), UnsupportedError, "4-D"),
    (lambda: hz.aligned_shape((1, 2, 3, 4), "S4"), UnsupportedError, "4-bit"),
    (lambda: hz.aligned_shape((1, 2, 3, 4), np.int8, layout="NONE"), UnsupportedError, "NHWC and NCHW"),
    (lambda: hz.aligned_shape((1, 2, 3, 4), np.int8, rule="j9"), ValueError, "unknown alignment rule"),
    (lambda: hz.aligned_shape((1, 2, 3, 4), np.int8, tensor_type="NV12"), UnsupportedError, "pack_nv12"),
    (lambda: hz.aligned_shape((1, 2, 3, 4), "int9"), ValueError, "dtype: 'int9' is neither"),
    (lambda: hz.aligned_shape((1, 2, 3, 4), np.int8, tensor_type="Q8"), ValueError, "tensor_type: 'Q8'"),
    (lambda: hz.aligned_shape((1, 2, 3, 4), np.complex64), TypeError, "dtype: .*complex64"),
    (lambda: hz.strides((2, 3), object), TypeError, "dtype: .*object"),
    (lambda: hz.nbytes((2, 3), 5, stride=(3, 1)), TypeError, "dtype: 5"),
    (lambda: hz.strides((2, 3), None), TypeError, "dtype: an element type is required"),
    (lambda: hz.aligned_shape((1, 2, 3, 4), None), TypeError, "dtype: an element type is required"),
    (lambda: hz.strip(np.zeros(6, np.uint8), (2, 3), None, aligned_shape=(2, 3)), TypeError,
     "dtype: an element type is required"),
    (lambda: hz.strip(np.zeros(6, np.uint8), (2, 3), "int9", aligned_shape=(2, 3)), ValueError,
     "dtype: 'int9' is neither"),
    (lambda: hz.strip(np.zeros(6, np.uint8), (2, 3), "S4", aligned_shape=(2, 3)), UnsupportedError, "4-bit"),
    (lambda: hz.quantize([1.0], dtype="int9", quanti_type="SCALE", scale=1.0), ValueError, "dtype: 'int9' is neither"),
    (lambda: hz.pad(np.zeros((1, 2, 2, 3), np.int8), stride=(12, 6, 3, -1)), LayoutError, "negative"),
    (lambda: hz.pad(np.zeros((1, 2, 2, 3), np.int8), stride=(12, 6, 2, 1)), LayoutError, "overlaps"),
    (lambda: hz.pad(np.zeros((1, 2, 2, 3), np.int8), stride=(12, 6, 3)), LayoutError, "3 entries"),
    (lambda: hz.pad(np.zeros((1, 2, 2, 3), np.int8)), ValueError, "one of them is required"),
    (lambda: hz.pad(np.zeros((1, 2, 2, 3), np.int8), stride=(12, 6, 3.5, 1)), TypeError,
     "stride: expected an integer, got 3.5"),
    (lambda: hz.quantize([0.5, np.nan], dtype="S8", quanti_type="SCALE", scale=1.0), ValueError,
     "x: NaN at index \\(1,\\)"),
    (lambda: hz.quantize([0.5], dtype="S8", quanti_type="SCALE", scale=[1.0, 0.0], axis=0), ValueError,
     "scale: must be finite and nonzero"),
    (lambda: hz.strip(np.zeros(5, np.uint8), (1, 2, 2, 3), np.int8, stride=(12, 6, 3, 1)), LayoutError, "5 bytes"),
    (lambda: hz.pack_nv12(np.zeros((3, 6), np.uint8), np.zeros((1, 3, 2), np.uint8)), LayoutError, "even"),
    (lambda: hz.pack_nv12(np.zeros((4, 6), np.uint8), np.zeros((2, 2, 2), np.uint8)), LayoutError, "uv"),
    (lambda: hz.quantize([1.0], dtype="F32", quanti_type="SCALE", scale=1.0), TypeError, "integers"),
    (lambda: hz.dequantize([1], quanti_type="FOO"), ValueError, "NONE, SHIFT or SCALE"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_cli_explain(capsys):
    from npupack.cli import main

    assert main(["explain", "horizon:NHWC", "--dtype", "int32", "--role", "output", "--shape", "1,13,13,425",
                 "--limit", "20000"]) == 0
    out = capsys.readouterr().out
    assert "alignedShape (1, 13, 13, 448)" in out and "i = 13895 => [N=0; H=2; W=5; C=7];" in out
    assert main(["explain", "horizon:NCHW", "--dtype", "uint16", "--stride", "301056,100352,448,2",
                 "--shape", "1,3,212,212", "--limit", "200000"]) == 0
    assert "i = 122759 => [N=0; C=2; H=100; W=7];" in capsys.readouterr().out
    # hbDNNDataType names are the field's way to write the element type: the same as NumPy's.
    for name in ("S32", "HB_DNN_TENSOR_TYPE_S32"):
        assert main(["explain", "horizon:NHWC", "--dtype", name, "--role", "output", "--shape", "1,13,13,425",
                     "--limit", "20000"]) == 0
        assert capsys.readouterr().out == out
