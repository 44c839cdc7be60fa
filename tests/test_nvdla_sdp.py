"""NVDLA SDP operands against the reference of docs/nvdla.md §12 (worked examples 12.7 / 16.11, every
precision x mode x data size, round trips, feature-layout equality, errors) and nvdla/sw's int16
quantisation of bias and rescale factors."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack import LayoutError, UnsupportedError
from npupack.nvdla import (NV_FULL, NV_SMALL, Config, bytes_per_atom, factorize_scales, pack_batchnorm, pack_bias,
                           pack_eltwise, pack_feature, pack_prelu, quantize_bias, unpack_sdp)
from tests.reference import nvdla as ref

PRESETS = list(Config.presets().values())


def ints(rng, shape, data_size):
    lo, hi = (-128, 127) if data_size == 1 else (-32768, 32767)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(np.int8 if data_size == 1 else np.int16)


def values(rng, shape, precision, data_size):
    if precision == "fp16":
        return rng.standard_normal(shape).astype(np.float16)
    return ints(rng, shape, data_size)


# ---------------------------------------------------------------- worked examples (S1-S10)

def test_S1_bias_per_channel_int8_pipeline():
    op = pack_bias([1, -2, 300], precision="int8")
    assert op.data.tobytes() == bytes([0x01, 0x00, 0xFE, 0xFF, 0x2C, 0x01]) + bytes(58)
    assert (op.data_size, op.elements_per_atom, op.nbytes) == (2, 32, 64)


def test_S2_batchnorm_fp16():
    op = pack_batchnorm([-1.0], [0.5], precision="fp16")
    assert op.data.tobytes() == bytes([0x00, 0xBC, 0x00, 0x38]) + bytes(60)


def test_S3_prelu_1_byte():
    op = pack_prelu([1, -1, 127], precision="int8", data_size=1)
    assert op.data.tobytes() == bytes([0x01, 0xFF, 0x7F]) + bytes(29)


def test_S4_S5_bias_per_element_offsets():
    rng = np.random.default_rng(4)
    b = ints(rng, (33, 1, 2), 2)
    op = pack_bias(b, precision="int8", mode="per_element")
    assert (op.line_stride, op.surface_stride, op.nbytes) == (128, 128, 256)
    assert op.data[192:194].view(np.int16)[0] == b[32, 0, 1] and op.data[74:76].view(np.int16)[0] == b[5, 0, 1]
    s = ints(rng, (33, 1, 2), 2)
    pair = pack_bias(b, mul=s, precision="int8", mode="per_element")
    assert pair.line_stride == 256 and pair.components == 2
    assert pair.data[148:150].view(np.int16)[0] == b[5, 0, 1] and pair.data[150:152].view(np.int16)[0] == s[5, 0, 1]
    assert pair.data[256:258].view(np.int16)[0] == b[32, 0, 0]


def test_S6_eltwise_equals_feature():
    rng = np.random.default_rng(6)
    x = ints(rng, (10, 1, 2), 1)
    op = pack_eltwise(alu=x, precision="int8", config=NV_SMALL)
    assert op.line_stride == 16 and op.data[25] == x[9, 0, 1].view(np.uint8)
    assert np.array_equal(op.data, pack_feature(x, config=NV_SMALL))


@pytest.mark.parametrize("precision, use, data_size, want", [
    ("int8", "bias", 2, 64), ("int8", "batchnorm", 2, 128), ("int8", "eltwise_both", 1, 64),
    ("fp16", "bias", 2, 32), ("fp16", "batchnorm", 2, 64), ("int16", "bias", 2, 32)])
def test_S7_S8_bytes_per_atom(precision, use, data_size, want):
    assert bytes_per_atom(precision, use, data_size, NV_FULL) == want


@pytest.mark.parametrize("call, exc, match", [
    (lambda: pack_bias(np.zeros(3, np.float32), precision="int8"), TypeError, "quantise"),       # S9
    (lambda: pack_prelu([200], precision="int8", data_size=1), ValueError, "fit"),              # S10
    (lambda: pack_bias([1, 2], precision="int8", mode="per_element"), LayoutError, "per_element"),
    (lambda: pack_bias([1, 2], precision="int8", mode="sideways"), ValueError, "mode"),
    (lambda: pack_bias([1, 2], precision="fp16", data_size=1), ValueError, "2 bytes"),
    (lambda: pack_bias([1, 2], precision="int8", data_size=3), ValueError, "data_size"),
    (lambda: pack_bias([1, 2], precision="int4"), ValueError, "precision"),
    (lambda: pack_bias([1, 2], precision="fp16", config=NV_SMALL), UnsupportedError, "fp16"),
    (lambda: pack_bias([1, 2], mul=[1, 2, 3], precision="int8"), LayoutError, "shape"),
    (lambda: pack_bias(np.zeros((2, 1, 1), np.int16), precision="int8", mode="per_element", line_stride=40),
     LayoutError, "multiple"),
    (lambda: pack_bias([1, 2], precision="int8", line_stride=64), LayoutError, "per-element"),
    (lambda: pack_bias(5, precision="int8", mode="per_layer", out=np.zeros(64, np.uint8)), LayoutError,
     "registers"),
    (lambda: pack_batchnorm(np.zeros((1, 1, 1)), np.zeros((1, 1, 1)), precision="fp16", mode="per_element"),
     UnsupportedError, "pack_eltwise"),
    (lambda: pack_eltwise(precision="int8"), ValueError, "alu"),
    (lambda: bytes_per_atom("int8", "weights", 2), ValueError, "use"),
    (lambda: pack_bias(np.array(["a"]), precision="fp16"), TypeError, "real"),
    (lambda: unpack_sdp(b"xx"), TypeError, "SdpOperand"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------- every precision x mode x data size

CASES = [(p, d) for p in ("int8", "int16") for d in (1, 2)] + [("fp16", 2)]
CONFIG_CASES = [(c, p, d) for c in PRESETS for p, d in CASES if p in c.precisions]


@pytest.mark.parametrize("config, precision, data_size", CONFIG_CASES, ids=lambda v: getattr(v, "name", str(v)))
def test_per_channel_and_per_element_against_reference(config, precision, data_size):
    rng = np.random.default_rng(data_size)
    E = config.atom_elements(precision)
    for C in (1, E - 1 or 1, E, E + 1, 2 * E + 3):
        for k in (1, 2):
            comps = [values(rng, (C,), precision, data_size) for _ in range(k)]
            op = pack_bias(comps[0], mul=comps[1] if k == 2 else None, precision=precision, data_size=data_size,
                           config=config)
            assert op.data.tobytes() == ref.sdp_per_channel(comps, E=E, data_size=data_size)
            back = unpack_sdp(op)
            assert all(np.array_equal(a.view(np.uint8), b.view(np.uint8))
                       for a, b in zip(back if k == 2 else (back,), comps))
        for shape in ((1, 1, 1), (C, 2, 3), (C, 1, 1)):
            comps = [values(rng, shape, precision, data_size) for _ in range(2)]
            op = pack_eltwise(comps[0], comps[1], precision=precision, data_size=data_size, config=config)
            want, ls, ss = ref.sdp_per_element(comps, E=E, data_size=data_size, atom=config.atom_bytes)
            assert op.data.tobytes() == want and (op.line_stride, op.surface_stride) == (ls, ss)
            alu, mul = unpack_sdp(op)
            assert np.array_equal(alu.view(np.uint8), comps[0].view(np.uint8))
            assert np.array_equal(mul.view(np.uint8), comps[1].view(np.uint8))


@given(C=st.integers(1, 70), H=st.integers(1, 4), W=st.integers(1, 5), k=st.integers(1, 2),
       case=st.sampled_from(CASES), extra_line=st.integers(0, 2), extra_surface=st.integers(0, 2),
       seed=st.integers(0, 2**32 - 1))
def test_per_element_random_strides(C, H, W, k, case, extra_line, extra_surface, seed):
    precision, data_size = case
    rng = np.random.default_rng(seed)
    E, atom = NV_FULL.atom_elements(precision), NV_FULL.atom_bytes
    row = W * E * k * data_size
    ls = -(-row // atom) * atom + extra_line * atom
    ss = H * ls + extra_surface * atom
    comps = [values(rng, (C, H, W), precision, data_size) for _ in range(k)]
    op = pack_eltwise(*comps, precision=precision, data_size=data_size, line_stride=ls, surface_stride=ss)
    want, _, _ = ref.sdp_per_element(comps, E=E, data_size=data_size, atom=atom, line_stride=ls, surface_stride=ss)
    assert op.data.tobytes() == want


@pytest.mark.parametrize("precision, data_size", CASES)
def test_per_layer_registers(precision, data_size):
    if precision == "fp16":
        op = pack_batchnorm(-1.0, 0.5, precision="fp16", mode="per_layer")
        assert op.registers == (0xBC00, 0x3800) and op.data is None
        assert unpack_sdp(op)[0] == -1.0
        return
    v = -3
    op = pack_bias(np.array(v), precision=precision, mode="per_layer", data_size=data_size)
    assert op.registers == (0xFFFD,) and op.nbytes == 0 and unpack_sdp(op) == v


def test_inputs_not_modified_and_out():
    b = np.arange(40, dtype=np.int16)
    before = b.copy()
    out = np.full(256, 0xAA, np.uint8)
    op = pack_bias(b, precision="int8", out=out)
    assert np.shares_memory(op.data, out) and np.array_equal(b, before) and (out[128:] == 0xAA).all()


# ---------------------------------------------------------------- nvdla/sw's quantisation

def reference_bias(bias, si, sw):
    """scaleBiasToInt16 of nvdla/sw, written out with Python floats rounded to float32."""
    f32 = lambda v: float(np.float32(v))  # noqa: E731
    m = [math.floor(f32(f32(b / f32(si * s)) + 0.5)) for b, s in zip(map(f32, bias), map(f32, sw))]
    peak = max(abs(v) for v in m)
    bits = math.ceil(math.log(peak) / math.log(2)) + 1 if peak else 0
    shift = min(16, max(0, bits - 16))
    return [v >> shift for v in m], shift


@pytest.mark.parametrize("magnitude", [1e-3, 1.0, 30.0, 3e3])
def test_quantize_bias_matches_nvdla_sw(magnitude):
    rng = np.random.default_rng(int(magnitude * 10))
    bias = (rng.standard_normal(37) * magnitude).astype(np.float32)
    sw = rng.uniform(1e-3, 1e-2, 37).astype(np.float32)
    q, shift = quantize_bias(bias, input_scale=0.05, weight_scales=sw)
    want, want_shift = reference_bias(bias, 0.05, sw)
    assert q.dtype == np.int16 and shift == want_shift and q.tolist() == want
    # per kernel: one weight scale
    q1, _ = quantize_bias(bias, input_scale=0.05, weight_scales=float(sw[0]))
    assert q1.tolist() == reference_bias(bias, 0.05, [sw[0]] * 37)[0]


def test_quantize_bias_power_of_two_does_not_wrap():
    q, shift = quantize_bias([65536.0, -3.0], input_scale=1.0, weight_scales=1.0)
    assert q.tolist() == [16384, -1] and shift == 2  # nvdla/sw's cast would wrap at shift 1


def test_factorize_scales():
    s = np.array([0.75, -0.001, 0.3], np.float32)
    n, t = factorize_scales(s)
    assert t == 15 and n.tolist() == [int(0.75 * 2**15), -int(np.float32(0.001) * 2**15), int(np.float32(0.3) * 2**15)]
    assert np.allclose(n * 2.0**-t, s, atol=2.0**-t)
    zero, t0 = factorize_scales([0.0])
    assert zero.tolist() == [0] and t0 == 1
    with pytest.raises(ValueError, match="int32"):
        quantize_bias([3e5], input_scale=1e-3, weight_scales=1e-3)
    with pytest.raises(ValueError, match="int16"):
        factorize_scales([40000.0])
    with pytest.raises(ValueError, match="finite"):
        quantize_bias([1.0], input_scale=0.0, weight_scales=1.0)


def test_pipeline_keyword():
    a = pack_bias([1, -2, 300], pipeline="int8")
    assert a.data.tobytes() == pack_bias([1, -2, 300], precision="int8").data.tobytes() and a.data_size == 2
    assert pack_eltwise(np.ones((3, 1, 1), np.int8), pipeline="int8").data_size == 1
    with pytest.raises(ValueError, match="contradicts"):
        pack_bias([1], precision="int8", pipeline="fp16")
    with pytest.raises(TypeError, match="processing precision"):
        pack_prelu([1])


def test_bytes_per_atom_whole_seed_table():
    """BytesPerAtom = ElementPerAtom x ComponentsPerElement x BytesPerComponent with the three
    tables of NVDLA's hardware documentation (NV_FULL; fp16 components are always two bytes)."""
    element_per_atom = {"int8": 32, "int16": 16, "fp16": 16}
    components = {"bias": 1, "prelu": 1, "batchnorm": 2, "eltwise_alu": 1, "eltwise_mul": 1, "eltwise_both": 2}
    for precision, e in element_per_atom.items():
        for use, k in components.items():
            for data_size in ((2,) if precision == "fp16" else (1, 2)):
                assert bytes_per_atom(precision, use, data_size) == e * k * data_size
