"""fp16 conversion and weight quantisation (docs/nvdla.md §2.2, 2.3, 16.2)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack.nvdla import quantize_weights, to_fp16
from tests.reference import nvdla as ref


def bits(x, **kw):
    return to_fp16(np.asarray(x), **kw).view(np.uint16)


# Table 2.2.3: input, (nearest_even+saturate, nearest_even, nearest_away) without saturation
TABLE = [
    (1 + 2**-11, 0x3C00, 0x3C00, 0x3C01),
    (1 + 3 * 2**-11, 0x3C02, 0x3C02, 0x3C02),
    (1 + 5 * 2**-11, 0x3C02, 0x3C02, 0x3C03),
    (65519.0, 0x7BFF, 0x7BFF, 0x7BFF),
    (65520.0, 0x7BFF, 0x7C00, 0x7C00),
    (70000.0, 0x7BFF, 0x7C00, 0x7C00),
    (float("inf"), 0x7BFF, 0x7C00, 0x7C00),
    (2.0**-25, 0x0000, 0x0000, 0x0001),
    (3 * 2.0**-25, 0x0002, 0x0002, 0x0002),
    (-1.5 * 2.0**-25, 0x8001, 0x8001, 0x8001),
    (-0.0, 0x8000, 0x8000, 0x8000),
    (1e-8, 0x0000, 0x0000, 0x0000),
    (0.1, 0x2E66, 0x2E66, 0x2E66),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x, even_sat, even, away", TABLE)
def test_fp16_worked_examples(x, even_sat, even, away, dtype):
    v = np.array([x], dtype=dtype)
    assert bits(v)[0] == even_sat
    assert bits(v, saturate=False)[0] == even
    assert bits(v, rounding="nearest_away", saturate=False)[0] == away
    # and the independent definition agrees with the table
    exact = float(v[0])
    assert ref.fp16_bits(exact) == even_sat
    assert ref.fp16_bits(exact, "nearest_away", False) == away


def test_fp16_matches_numpy_for_random_float32(rng):
    raw = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    x = raw.view(np.float32)
    x = x[~np.isnan(x)]
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(bits(x, saturate=False), expected)


@given(st.one_of(st.floats(allow_nan=False, width=32), st.floats(min_value=-7e4, max_value=7e4, width=32),
                 st.floats(min_value=-2.0**-13, max_value=2.0**-13, width=32)),
       st.sampled_from(["nearest_even", "nearest_away"]), st.booleans())
def test_fp16_float32_against_definition(x, rounding, saturate):
    assert bits(np.float32(x), rounding=rounding, saturate=saturate) == ref.fp16_bits(float(np.float32(x)), rounding,
                                                                                       saturate)


@given(st.one_of(st.floats(allow_nan=False), st.floats(min_value=-7e4, max_value=7e4),
                 st.integers(-2**11, 2**11).map(lambda i: (i + 0.5) * 2.0**-24),  # subnormal ties
                 st.integers(2**10, 2**11).map(lambda i: (i + 0.5) * 2.0**-10)),  # normal ties
       st.sampled_from(["nearest_even", "nearest_away"]), st.booleans())
def test_fp16_float64_rounds_once_against_definition(x, rounding, saturate):
    assert bits(np.float64(x), rounding=rounding, saturate=saturate) == ref.fp16_bits(x, rounding, saturate)


def test_fp16_double_rounding_is_avoided():
    # 1 + 2^-11 + 2^-40: float32 would round it to the tie 1 + 2^-11 (-> 0x3C00); the float64
    # value is above the tie and must give 0x3C01.
    assert bits(np.array([1 + 2**-11 + 2**-40]))[0] == 0x3C01
    scalar = to_fp16(np.float64(1 + 2**-11 + 2**-40))
    assert scalar.shape == () and scalar.view(np.uint16) == 0x3C01  # 0-d stays 0-d


def test_fp16_nan_and_float16_input():
    nan = np.array([0x7F800001], dtype=np.uint32).view(np.float32)
    out = bits(nan)[0]
    assert out & 0x7C00 == 0x7C00 and out & 0x3FF != 0 and out == 0x7E00
    h = np.array([np.inf, -np.inf, 1.5, np.float16(6e-8)], dtype=np.float16)
    assert list(bits(h)) == [0x7BFF, 0xFBFF, 0x3E00, 0x0001]
    assert list(bits(h, saturate=False)) == [0x7C00, 0xFC00, 0x3E00, 0x0001]
    assert np.isinf(h[0])  # input untouched


def test_fp16_integers_are_exact_up_to_2048():
    i = np.arange(-2048, 2049, dtype=np.int16)
    assert np.array_equal(to_fp16(i).astype(np.int32), i)


def test_fp16_bad_arguments():
    with pytest.raises(ValueError, match="rounding"):
        to_fp16(np.zeros(2, np.float32), rounding="truncate")
    with pytest.raises(TypeError, match="dtype"):
        to_fp16(np.zeros(2, np.complex64))


# ---------------------------------------------------------------- quantisation, table of 2.3

def test_quantize_worked_examples():
    q, s = quantize_weights(np.array([[0.5, -1.0, 0.25, 0.126]], np.float32), mode="per_kernel")
    assert q.tolist() == [[64, -127, 32, 16]] and s[0] == np.float32(1 / 127)
    q, s = quantize_weights(np.array([[127, -2.5, 2.5, -0.5, 0.5, -126.5]], np.float32), mode="per_kernel")
    assert q.tolist() == [[127, -2, 3, 0, 1, -126]] and s.tolist() == [1.0]
    w = np.array([[1.0, -0.5], [0, 0], [-3.0, 1.5]], np.float32)
    q, s = quantize_weights(w, mode="per_filter")
    assert q.tolist() == [[127, -63], [0, 0], [-127, 64]]
    assert s.tolist() == pytest.approx([0.007874016, 0, 0.023622047], rel=1e-7)
    q, s = quantize_weights(w, mode="per_kernel")
    assert q.tolist() == [[42, -21], [0, 0], [-127, 64]] and np.all(s == s[0])
    assert s[0] == pytest.approx(0.023622047, rel=1e-7)
    q, s = quantize_weights(w, precision="int16", mode="per_filter")
    assert q.tolist() == [[32767, -16383], [0, 0], [-32767, 16384]]
    assert s.tolist() == pytest.approx([3.051851e-05, 0, 9.155553e-05], rel=1e-6)


def test_quantize_all_zero_gives_zero_scales():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q, s = quantize_weights(np.zeros((2, 3, 1, 1), np.float32), mode="per_filter")
    assert not q.any() and s.tolist() == [0, 0] and q.dtype == np.int8


@pytest.mark.parametrize("precision", ["int8", "int16"])
@pytest.mark.parametrize("mode", ["per_kernel", "per_filter"])
@given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 2**32), st.sampled_from([1e-3, 1.0, 300.0]))
def test_quantize_against_formula(precision, mode, k, n, seed, mag):
    w = (np.random.default_rng(seed).standard_normal((k, n)) * mag).astype(np.float32)
    w[0, 0] = 0.5 * (np.abs(w).max() or 1)  # a likely tie
    q, s = quantize_weights(w, precision=precision, mode=mode)
    rq, rs = ref.quantize(w, precision, mode)
    assert q.dtype == rq.dtype and np.array_equal(q, rq) and np.array_equal(s, rs)


def test_quantize_kernel_axis_and_float16_float64_inputs(rng):
    w = rng.standard_normal((3, 4, 2, 2))
    q64, s64 = quantize_weights(w, mode="per_filter")
    q32, s32 = quantize_weights(w.astype(np.float32), mode="per_filter")
    assert np.array_equal(q64, q32) and np.array_equal(s64, s32)
    qt, st_ = quantize_weights(np.swapaxes(w, 0, 1), mode="per_filter", kernel_axis=1)
    assert np.array_equal(np.swapaxes(qt, 0, 1), q32) and np.array_equal(st_, s32)
    h = w.astype(np.float16)
    assert np.array_equal(quantize_weights(h)[0], quantize_weights(h.astype(np.float32))[0])


def test_quantize_bad_input():
    with pytest.raises(ValueError, match="NaN or inf at index \\(1, 0\\)"):
        quantize_weights(np.array([[1.0], [np.nan]], np.float32))
    with pytest.raises(ValueError, match="NaN or inf"):
        quantize_weights(np.array([np.inf], np.float32))
    with pytest.raises(ValueError, match="index \\(1,\\) exceeds the float32 range"):
        quantize_weights(np.array([1.0, 1e300]))
    with pytest.raises(TypeError, match="float"):
        quantize_weights(np.array([1, 2], np.int8))
    with pytest.raises(ValueError, match="precision"):
        quantize_weights(np.ones(2, np.float32), precision="fp16")
    with pytest.raises(ValueError, match="mode"):
        quantize_weights(np.ones(2, np.float32), mode="per_channel")
    with pytest.raises(ValueError, match="kernel_axis"):
        quantize_weights(np.ones(2, np.float32), kernel_axis=3)
    with pytest.raises(TypeError, match="kernel_axis: expected an integer, got 0.0"):
        quantize_weights(np.ones(2, np.float32), kernel_axis=0.0)
    with pytest.raises(ValueError, match="non-empty"):
        quantize_weights(np.ones((0, 2), np.float32))


# The binary16 scans behind the INF/NaN checks, on every instruction-set path, against NumPy's
# isinf/isnan of the same bit patterns. Lengths cover the SIMD blocks (32 and 64 halves), the
# 2048-half chunks and their remainders; one special value is planted at every kind of position.
SCANS = {
    "fp16_first_nonfinite": lambda h: int(np.flatnonzero(~np.isfinite(h))[0]) if (~np.isfinite(h)).any() else -1,
    "fp16_first_nan": lambda h: int(np.flatnonzero(np.isnan(h))[0]) if np.isnan(h).any() else -1,
    "fp16_any_inf": lambda h: bool(np.isinf(h).any()),
}


@pytest.mark.parametrize("path", ["auto", "avx2", "ssse3", "scalar"])
@pytest.mark.parametrize("scan", list(SCANS))
@pytest.mark.parametrize("n", [0, 1, 31, 32, 63, 64, 65, 2047, 2048, 2049, 4096 + 97])
def test_fp16_scans_against_numpy(scan, path, n, rng):
    from npupack import _core

    finite = rng.integers(0, 0x7C00, n, dtype=np.uint16) | (rng.integers(0, 2, n, dtype=np.uint16) << 15)
    specials = [0x7C00, 0xFC00, 0x7C01, 0x7E00, 0xFFFF, 0x7BFF]  # +-INF, NaNs, and the largest finite
    positions = sorted({0, n // 2, n - 1, max(0, n - 33), min(n - 1, 64)}) if n else []
    cases = [finite] + [_planted(finite, p, v) for p in positions for v in specials]
    for bits in cases:
        expected = SCANS[scan](bits.view(np.float16))
        assert getattr(_core, scan)(bits, path) == expected, (bits.size, path)


def _planted(bits, pos, value):
    out = bits.copy()
    out[pos] = value
    return out


def test_fp16_scan_bad_path():
    from npupack import _core

    with pytest.raises(ValueError, match="kernel path"):
        _core.fp16_first_nonfinite(np.zeros(4, np.uint16), "sse9")
