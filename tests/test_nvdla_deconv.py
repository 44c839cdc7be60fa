"""NVDLA deconvolution weights against the reference of docs/nvdla.md §10 (worked examples 10.2 / 16.8,
exhaustive small shapes, random shapes, round trips, a transposed convolution assembled from the
per-set stride-1 convolutions against the transposed convolution's definition, errors)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack import LayoutError, UnsupportedError
from npupack.nvdla import NV_FULL, NV_SMALL, Config, pack_weights, quantize_weights, unpack_weights, weights_nbytes
from tests.reference import nvdla as ref

PRESETS = list(Config.presets().values())
DTYPE = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}
STRIDES = [(1, 1), (2, 2), (1, 2), (2, 1), (3, 2), (4, 4)]


def expected_sets(w, stride, config, precision):
    kpg, cb = config.kernels_per_group(precision), config.mac_atomic_c
    return [(phase, ref.pack_deconv_set(s, kpg=kpg, cb=cb, tail=config.weight_size_alignment))
            for phase, s in ref.deconv_sets(w, *stride)]


def test_V1():
    sets = pack_weights(np.arange(9, dtype=np.int8).reshape(1, 1, 3, 3), kind="deconv", stride=(2, 2))
    assert [s.phase for s in sets] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [s.weight[:4].tolist() for s in sets] == [[8, 6, 2, 0], [0, 7, 0, 1], [0, 0, 5, 3], [0, 0, 0, 4]]
    assert all(s.weight.size == 128 and not s.weight[4:].any() and s.meaningful_bytes == 4 for s in sets)
    assert all(s.packed_shape == (1, 1, 2, 2) and s.shape == (1, 1, 3, 3) and s.stride == (2, 2) for s in sets)


def test_V2():
    sets = pack_weights(np.arange(24, dtype=np.int8).reshape(2, 3, 2, 2), kind="deconv", stride=(1, 2))
    assert [s.weight[:12].tolist() for s in sets] == [[2, 14, 6, 18, 10, 22, 0, 12, 4, 16, 8, 20],
                                                     [3, 15, 7, 19, 11, 23, 1, 13, 5, 17, 9, 21]]
    assert sets[0].packed_shape == (3, 2, 2, 1)


def test_V3_stride1_flip():
    (s,) = pack_weights(np.arange(4, dtype=np.int8).reshape(1, 1, 2, 2), kind="deconv")
    assert s.weight[:4].tolist() == [3, 2, 1, 0] and s.phase == (0, 0)


@pytest.mark.parametrize("config", PRESETS, ids=lambda c: c.name)
@pytest.mark.parametrize("stride", STRIDES)
def test_exhaustive_small(config, stride):
    rng = np.random.default_rng(sum(stride))
    for precision in config.precisions:
        kpg, cb = config.kernels_per_group(precision), config.mac_atomic_c
        for c_in, k_out, r, s in [(1, 1, 1, 1), (cb + 1, kpg + 1, 3, 2), (cb - 1 or 1, 2 * kpg, 4, 5)]:
            info = np.iinfo(np.int8)
            w = rng.integers(info.min, info.max, size=(c_in, k_out, r, s)).astype(DTYPE[precision])
            sets = pack_weights(w, kind="deconv", stride=stride, config=config)
            want = expected_sets(w, stride, config, precision)
            assert [x.phase for x in sets] == [p for p, _ in want]
            for got, (_, exp) in zip(sets, want):
                assert np.array_equal(got.weight, exp)
                assert got.weight.size == weights_nbytes((c_in, k_out, r, s), precision=precision, config=config,
                                                         kind="deconv", stride=stride)
            assert np.array_equal(unpack_weights(sets), w)


@given(c_in=st.integers(1, 70), k_out=st.integers(1, 40), r=st.integers(1, 6), s=st.integers(1, 6),
       stride=st.sampled_from(STRIDES), precision=st.sampled_from(["int8", "int16", "fp16"]),
       seed=st.integers(0, 2**32 - 1))
def test_random_shapes(c_in, k_out, r, s, stride, precision, seed):
    rng = np.random.default_rng(seed)
    w = rng.integers(-128, 127, size=(c_in, k_out, r, s)).astype(DTYPE[precision])
    sets = pack_weights(w, kind="deconv", stride=stride)
    for got, (_, exp) in zip(sets, expected_sets(w, stride, NV_FULL, precision)):
        assert np.array_equal(got.weight, exp)
    assert np.array_equal(unpack_weights(sets), w)
    single = unpack_weights(sets[-1], logical=False)
    assert np.array_equal(single, ref.deconv_sets(w, *stride)[-1][1])


def dc_decode(buf: np.ndarray, shape, precision, config=NV_FULL) -> np.ndarray:
    """Read DC weights back by the loop nest of docs/nvdla.md §6.1 (independent of the packer)."""
    K, C, R, S = shape
    elems = buf.view(DTYPE[precision])
    out = np.zeros(shape, dtype=DTYPE[precision])
    order = ref.dc_order_loops(K, C, R, S, config.kernels_per_group(precision), config.mac_atomic_c)
    for i, (k, c, r, s) in enumerate(order):
        out[k, c, r, s] = elems[i]
    return out


@pytest.mark.parametrize("stride, R, S", [((2, 2), 3, 3), ((2, 2), 4, 4), ((2, 2), 2, 2), ((3, 2), 5, 3),
                                          ((1, 1), 3, 3), ((1, 3), 2, 7)])
def test_sets_compute_the_transposed_convolution(stride, R, S):
    """Each set, used as an ordinary stride-1 convolution (input zero-padded by Rs-1, Ss-1) with
    the weights read back from its bytes, gives the outputs of its stride phase."""
    sy, sx = stride
    rng = np.random.default_rng(R * S)
    C_in, K_out, H, W = 3, 4, 5, 4
    w = rng.integers(-5, 5, size=(C_in, K_out, R, S)).astype(np.int16)
    x = rng.integers(-5, 5, size=(C_in, H, W)).astype(np.float64)
    want = ref.conv_transpose(x, w.astype(np.float64), sy, sx)
    got = np.full(want.shape, np.nan)
    for ws in pack_weights(w, kind="deconv", stride=stride):
        y, xph = ws.phase
        kernel = dc_decode(ws.weight, ws.packed_shape, "int16").astype(np.float64)
        part = ref.correlate_full(x, kernel)
        rows, cols = got[:, y::sy, xph::sx].shape[1:]
        got[:, y::sy, xph::sx] = part[:, :rows, :cols]
    assert np.array_equal(got, want)


def test_quantised_float_weights_per_output_channel():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((6, 5, 4, 4)).astype(np.float32)  # (C_in, K_out, R, S)
    q, scales = quantize_weights(w, mode="per_filter", kernel_axis=1)
    assert scales.shape == (5,)
    sets = pack_weights(q, kind="deconv", stride=(2, 2))
    assert np.array_equal(unpack_weights(sets), q)


def test_out_and_input_unchanged():
    w = np.arange(2 * 3 * 3 * 3, dtype=np.int8).reshape(2, 3, 3, 3)
    before = w.copy()
    out = np.full(256, 0xCD, np.uint8)
    sets = pack_weights(w[:, :, ::-1], kind="deconv", stride=(2, 2), out=out)
    assert np.shares_memory(sets[0].weight, out) and not np.shares_memory(sets[1].weight, out)
    assert np.array_equal(unpack_weights(sets), w[:, :, ::-1]) and np.array_equal(w, before)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", groups=2), UnsupportedError, "groups"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", stride=(0, 2)), LayoutError, "stride"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", stride=2), TypeError, "stride"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", stride=(1, 33)), UnsupportedError,
     r"stride: \(1, 33\); .* at most 32 .*D_DECONV_STRIDE"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", stride=(2**70, 1)), UnsupportedError,
     r"stride: \(1180591620717411303424, 1\)"),
    (lambda: weights_nbytes((2, 2, 3, 3), precision="int8", kind="deconv", stride=(33, 1)), UnsupportedError,
     r"stride: \(33, 1\); .* at most 32"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", scale=2.0), ValueError, "scale"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", post_extension=2), UnsupportedError,
     "post_extension"),
    (lambda: pack_weights(np.ones((2, 2, 3), np.int8), kind="deconv"), LayoutError, "dimensions"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.float32), kind="deconv", precision="int8"), TypeError,
     "quantize_weights"),
    (lambda: pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", config=NV_SMALL, precision="fp16"),
     UnsupportedError, "fp16"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_the_largest_stride_rubik_takes():
    """32 per axis (a 5-bit stride - 1 field): a 1x1 kernel at stride (32, 2) is 64 sets, the
    first holding the taps, the rest zero."""
    w = np.arange(1, 7, dtype=np.int8).reshape(2, 3, 1, 1)
    sets = pack_weights(w, kind="deconv", stride=(32, 2))
    assert len(sets) == 64 and sets[-1].phase == (31, 1)
    assert not any(ws.weight.any() for ws in sets[1:])
    assert np.array_equal(unpack_weights(sets), w)


def test_unpack_needs_every_set_in_order():
    sets = pack_weights(np.ones((2, 2, 3, 3), np.int8), kind="deconv", stride=(2, 2))
    with pytest.raises(LayoutError, match="all 4 sets"):
        unpack_weights(sets[:3])
    with pytest.raises(LayoutError, match="all 4 sets"):
        unpack_weights(sets[::-1])
    other = pack_weights(np.ones((2, 3, 3, 3), np.int8), kind="deconv", stride=(2, 2))
    with pytest.raises(LayoutError, match="one layer"):
        unpack_weights(sets[:2] + other[2:])
