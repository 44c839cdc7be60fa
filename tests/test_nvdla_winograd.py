"""NVDLA Winograd weights against the reference of docs/nvdla.md §9 (worked examples 9.7 / 16.7, loop
nest vs closed form, exhaustive small shapes for every extendable kernel, random shapes, the
transformed tensor read back, a Winograd F(2x2, 3x3) convolution with the packed weights against
direct convolution, strided kernels through channel extension, errors)."""
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack import LayoutError, UnsupportedError
from npupack.nvdla import NV_FULL, NV_LARGE, Config, pack_weights, unpack_weights, weights_nbytes, winograd_layout
from tests.reference import nvdla as ref

# A second configuration with Winograd: other atom, group size and tail than NV_FULL.
SMALL_WG = Config("wg_small", 16, 16, 8, 16, 256, ("int8", "int16", "fp16"), winograd=True, compression=True)
DTYPE = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}
# (R, S, sy, sx): every kernel the spec's rule allows up to 9x9, and unequal strides.
KERNELS = [(3, 3, 1, 1), (5, 5, 2, 2), (6, 6, 2, 2), (7, 7, 3, 3), (8, 8, 3, 3), (9, 9, 3, 3), (3, 5, 1, 2),
           (3, 6, 1, 2), (6, 3, 2, 1), (5, 9, 2, 3)]


def expected(w, precision, config=NV_FULL, stride=(1, 1), **kw):
    return ref.pack_winograd(w, precision, atom=config.atom_elements(precision),
                             kpg=config.kernels_per_group(precision), stride=stride,
                             tail=max(128, config.weight_size_alignment), **kw)


def small_ints(rng, shape, lo=-4, hi=4):
    return rng.integers(lo, hi, size=shape, endpoint=True)


G9 = np.arange(9).reshape(1, 1, 3, 3)
T_97 = [[0.0, 1.5, 0.5, 2.0], [4.5, 9.0, 3.0, 7.5], [1.5, 3.0, 1.0, 2.5], [6.0, 10.5, 3.5, 8.0]]


def test_transform_example_9_7():
    assert ref.winograd_transform(G9.astype(np.float64))[0, 0].tolist() == T_97


def test_W1_fp16():
    ws = pack_weights(G9.astype(np.float32), kind="winograd")
    assert ws.weight.size == 512 and ws.meaningful_bytes == 512 and ws.packed_shape == (1, 16, 4, 4)
    bits = ws.weight.view(np.uint16)
    got = [[int(bits[(r * 4 + s) * 4]) for s in range(4)] for r in range(4)]
    assert got == [[0x0000, 0x3E00, 0x3800, 0x4000], [0x4480, 0x4880, 0x4200, 0x4780],
                   [0x3E00, 0x4200, 0x3C00, 0x4100], [0x4600, 0x4940, 0x4300, 0x4800]]
    assert ws.weight[40:42].tolist() == [0x80, 0x48]
    mask = np.ones(256, bool)
    mask[::4][:16] = False
    assert not bits[mask].any()


@pytest.mark.parametrize("kw, rows", [
    ({}, [[0, 2, 0, 2], [4, 9, 3, 8], [2, 3, 1, 2], [6, 10, 4, 8]]),
    ({"rounding": "truncate"}, [[0, 1, 0, 2], [4, 9, 3, 7], [1, 3, 1, 2], [6, 10, 3, 8]]),
    ({"scale": 4}, [[0, 6, 2, 8], [18, 36, 12, 30], [6, 12, 4, 10], [24, 42, 14, 32]]),
])
def test_W2_int8(kw, rows):
    ws = pack_weights(G9.astype(np.int8), kind="winograd", **kw)
    assert ws.weight.size == 512 and ws.packed_shape == (1, 32, 4, 4)
    q = ws.weight.view(np.int8)
    assert [[int(q[(r * 4 + s) * 4]) for s in range(4)] for r in range(4)] == rows
    assert q[20] == rows[1][1] and q[52] == rows[3][1]


def test_W3_offsets():
    rng = np.random.default_rng(3)
    w = small_ints(rng, (17, 16, 3, 3)).astype(np.float16)
    ws = pack_weights(w, kind="winograd")
    assert ws.meaningful_bytes == 8704 and ws.kernel_groups == 2
    T = unpack_weights(ws, logical=False)
    for (k, c, r, s), off in [((1, 0, 0, 0), 128), ((0, 4, 0, 0), 2048), ((3, 5, 2, 1), 2506), ((16, 0, 0, 0), 8192)]:
        assert 2 * ref.winograd_closed_form(k, c, r, s, 17, 16, 16) == off
        assert ws.weight[off:off + 2].view(np.float16)[0] == T[k, c, r, s]


def test_W4_stride2_5x5():
    w = np.arange(25).reshape(1, 1, 5, 5).astype(np.int8)
    g = ref.winograd_extend(w, 2, 2, 32)
    assert g.shape == (1, 128, 3, 3)
    assert g[0, 0].tolist() == [[0, 2, 4], [10, 12, 14], [20, 22, 24]]
    assert g[0, 32].tolist() == [[1, 3, 0], [11, 13, 0], [21, 23, 0]]
    assert g[0, 64].tolist() == [[5, 7, 9], [15, 17, 19], [0, 0, 0]]
    assert g[0, 96].tolist() == [[6, 8, 0], [16, 18, 0], [0, 0, 0]]
    assert not np.delete(g[0], [0, 32, 64, 96], axis=0).any()
    ws = pack_weights(w, kind="winograd", stride=(2, 2), scale=4)
    assert ws.weight.size == 2048 and ws.packed_shape == (1, 128, 4, 4)
    T32 = ref.winograd_round(ref.winograd_transform(g[0, 32]), "int8", scale=4)
    q = ws.weight.view(np.int8)
    assert [int(q[8 * 64 + (r * 4 + s) * 4]) for r in range(4) for s in range(4)] == T32.reshape(-1).tolist()
    assert np.array_equal(ws.weight, expected(w, "int8", stride=(2, 2), scale=4)[0])


@pytest.mark.parametrize("shape, stride, config, match", [
    ((1, 1, 5, 5), (1, 1), NV_FULL, r"ceil\(R/sy\) = ceil\(5/1\) = 5"),   # W5
    ((1, 1, 7, 7), (2, 2), NV_FULL, r"ceil\(7/2\) = 4"),                    # W6
    ((1, 1, 3, 3), (1, 1), NV_LARGE, "no Winograd"),                        # W7
    ((1, 1, 4, 4), (2, 2), NV_FULL, "3x3"),
    ((1, 1, 1, 1), (1, 1), NV_FULL, "3x3"),
])
def test_W5_W6_W7_unsupported(shape, stride, config, match):
    with pytest.raises(UnsupportedError, match=match):
        pack_weights(np.zeros(shape, np.int8), kind="winograd", stride=stride, config=config)


def test_W8_fp16_options():
    w = np.ones((1, 1, 3, 3), np.float32)
    with pytest.raises(ValueError, match="rounding"):
        pack_weights(w, kind="winograd", rounding="truncate")
    with pytest.raises(ValueError, match="scale"):
        pack_weights(w, kind="winograd", scale=2.0)


def test_W9_channel_padding():
    rng = np.random.default_rng(9)
    w = small_ints(rng, (2, 5, 3, 3)).astype(np.float16)
    ws = pack_weights(w, kind="winograd")
    T = unpack_weights(ws, logical=False)
    assert T.shape == (2, 16, 4, 4) and not T[:, 5:].astype(np.float64).any()
    assert np.array_equal(ws.weight, expected(w, "fp16")[0])


def test_mapping_loops_match_closed_form_and_engine():
    for K, C_ext, kpg in [(5, 8, 2), (3, 12, 4), (1, 4, 16)]:
        T = np.arange(K * C_ext * 16, dtype=np.int16).reshape(K, C_ext, 4, 4)
        stream = ref.winograd_map(T, kpg, 1).view(np.int16)
        for k, c, r, s in itertools.product(range(K), range(C_ext), range(4), range(4)):
            assert stream[ref.winograd_closed_form(k, c, r, s, K, C_ext, kpg)] == T[k, c, r, s]
        cfg = Config("m", 8, 8, 2 * kpg, 8, 128, ("int8", "int16"), winograd=True)
        layout = winograd_layout((K, C_ext, 4, 4), "int16", cfg)
        assert np.array_equal(layout.pack(T)[:layout.nbytes], stream.view(np.uint8))


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
@pytest.mark.parametrize("R, S, sy, sx", KERNELS)
def test_exhaustive_small(precision, R, S, sy, sx):
    """Every extendable kernel; K and C around the group and atom boundaries."""
    rng = np.random.default_rng(R * 100 + S * 10 + sy)
    for config in (NV_FULL, SMALL_WG):
        kpg, atom = config.kernels_per_group(precision), config.atom_elements(precision)
        for K, C in [(1, 1), (kpg + 1, atom - 1), (kpg, atom + 1)]:
            w = small_ints(rng, (K, C, R, S), -20, 20).astype(DTYPE[precision])
            kw = {"scale": 2} if precision != "fp16" else {}
            ws = pack_weights(w, kind="winograd", stride=(sy, sx), config=config, **kw)
            want, T = expected(w, precision, config, (sy, sx), **kw)
            assert np.array_equal(ws.weight, want), (config.name, K, C)
            assert np.array_equal(unpack_weights(ws, logical=False).view(np.uint8), T.view(np.uint8))
            assert ws.packed_shape == (K, -(-C // atom) * atom * sy * sx, 4, 4)
            assert ws.weight.size == weights_nbytes((K, C, R, S), precision=precision, config=config,
                                                    kind="winograd", stride=(sy, sx))


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
@pytest.mark.parametrize("precision", ["int8", "int16"])
def test_integer_rounding_modes_and_saturation(precision, rounding):
    rng = np.random.default_rng(7)
    info = np.iinfo(DTYPE[precision])
    w = rng.integers(info.min, info.max, size=(3, 4, 3, 3), endpoint=True).astype(DTYPE[precision])
    for scale in (1.0, 0.3, 4.0):
        ws = pack_weights(w, kind="winograd", rounding=rounding, scale=scale)
        assert np.array_equal(ws.weight, expected(w, precision, rounding=rounding, scale=scale)[0])


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
@pytest.mark.parametrize("precision", ["int8", "int16"])
def test_integer_weights_many_cube_rows(precision, rounding):
    """Full-range integers (ties of t = q / 4 included) over several kernel groups (odd and even
    kernel counts), channel blocks and channel padding, at scale 1, where integer weights are
    transformed in integer arithmetic, and at another scale, against the float64 reference."""
    rng = np.random.default_rng(23)
    info = np.iinfo(DTYPE[precision])
    kpg, atom = NV_FULL.kernels_per_group(precision), NV_FULL.atom_elements(precision)
    for K, C in [(2 * kpg + 3, atom + 12), (kpg, 2 * atom), (5, 7)]:
        w = rng.integers(info.min, info.max, size=(K, C, 3, 3), endpoint=True).astype(DTYPE[precision])
        c_pad = -(-C // atom) * atom
        g = np.pad(w.astype(np.float64), ((0, 0), (0, c_pad - C), (0, 0), (0, 0)))
        for scale in (1.0, 0.75):
            T = ref.winograd_round(ref.winograd_transform(g), precision, rounding=rounding, scale=scale)
            ws = pack_weights(w, kind="winograd", rounding=rounding, scale=scale)
            assert np.array_equal(ws.weight, ref.winograd_map(T, kpg, 128)), (K, C, scale)


@pytest.mark.parametrize("rounding, saturate", [("nearest_even", True), ("nearest_away", False)])
def test_fp16_from_float32_and_overflow(rounding, saturate):
    rng = np.random.default_rng(11)
    w = (rng.standard_normal((2, 3, 3, 3)) * rng.choice([1e-3, 1.0, 3e4], size=(2, 3, 3, 3))).astype(np.float32)
    ws = pack_weights(w, kind="winograd", rounding=rounding, saturate=saturate)
    assert np.array_equal(ws.weight, expected(w, "fp16", rounding=rounding, saturate=saturate)[0])


@given(K=st.integers(1, 40), C=st.integers(1, 40), kernel=st.sampled_from(KERNELS),
       precision=st.sampled_from(["int8", "int16", "fp16"]), seed=st.integers(0, 2**32 - 1))
def test_random_shapes(K, C, kernel, precision, seed):
    R, S, sy, sx = kernel
    rng = np.random.default_rng(seed)
    w = small_ints(rng, (K, C, R, S), -100, 100).astype(DTYPE[precision])
    ws = pack_weights(w, kind="winograd", stride=(sy, sx))
    assert np.array_equal(ws.weight, expected(w, precision, stride=(sy, sx))[0])


def test_any_input_dtype_and_strides_input_unchanged():
    rng = np.random.default_rng(5)
    base = small_ints(rng, (6, 5, 3, 3), 0, 100)
    want = pack_weights(base.astype(np.float64), kind="winograd").weight
    for dt in (np.uint8, np.int16, np.uint16, np.float16, np.float32, np.float64):
        w = base.astype(dt)
        assert np.array_equal(pack_weights(w, kind="winograd", precision="fp16").weight, want), dt
    w = np.asfortranarray(base.astype(np.int8))
    before = w.copy()
    view = w[:, :, ::-1, :][:, :, ::-1, :]  # negative strides, same values
    assert np.array_equal(pack_weights(view, kind="winograd").weight,
                          pack_weights(np.ascontiguousarray(base.astype(np.int8)), kind="winograd").weight)
    assert np.array_equal(w, before)


# ---------------------------------------------------------------- the weights compute a convolution

BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)


def winograd_conv(T: np.ndarray, x: np.ndarray) -> np.ndarray:
    """F(2x2, 3x3) over a (C_ext, H, W) input, stride 1, no padding: 2x2 output tiles, each
    Aᵀ [Σ_c T[k, c] ⊙ (Bᵀ d_c B)] A."""
    C, H, W = x.shape
    oh, ow = H - 2, W - 2
    y = np.zeros((T.shape[0], oh, ow))
    for i in range(0, oh, 2):
        for j in range(0, ow, 2):
            d = x[:, i:i + 4, j:j + 4]
            U = BT @ d @ BT.T
            M = np.einsum("kcrs,crs->krs", T, U)
            y[:, i:i + 2, j:j + 2] = AT @ M @ AT.T
    return y


def direct_conv(w: np.ndarray, x: np.ndarray, sy: int, sx: int, oh: int, ow: int) -> np.ndarray:
    K, C, R, S = w.shape
    y = np.zeros((K, oh, ow))
    for oy in range(oh):
        for ox in range(ow):
            patch = x[:, oy * sy:oy * sy + R, ox * sx:ox * sx + S]
            y[:, oy, ox] = np.einsum("kcrs,crs->k", w, patch)
    return y


def phase_split(x: np.ndarray, sy: int, sx: int, c_pad: int, h: int, w: int) -> np.ndarray:
    """The hardware's data-side channel extension: channel (py*sx + px)*C_pad + c holds
    x[c][i*sy + py][j*sx + px] (docs/nvdla.md §9.3)."""
    C = x.shape[0]
    xe = np.zeros((c_pad * sy * sx, h, w))
    for py in range(sy):
        for px in range(sx):
            part = x[:, py::sy, px::sx][:, :h, :w]
            xe[(py * sx + px) * c_pad:(py * sx + px) * c_pad + C, :part.shape[1], :part.shape[2]] = part
    return xe


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
@pytest.mark.parametrize("R, S, sy, sx", KERNELS)
def test_winograd_convolution_equals_direct(precision, R, S, sy, sx):
    rng = np.random.default_rng(R + 7 * S + 31 * sy)
    K, C = 3, 5
    w = small_ints(rng, (K, C, R, S), -3, 3).astype(DTYPE[precision])
    kw = {} if precision == "fp16" else {"scale": 4}  # scale 4 keeps integer weights exact
    ws = pack_weights(w, kind="winograd", stride=(sy, sx), **kw)
    T = unpack_weights(ws, logical=False).astype(np.float64) / kw.get("scale", 1)
    oh = ow = 4  # two 2x2 tiles each way
    x = rng.integers(-5, 5, size=(C, (oh - 1) * sy + R + sy, (ow - 1) * sx + S + sx)).astype(np.float64)
    xe = phase_split(x, sy, sx, ws.packed_shape[1] // (sy * sx), oh + 2, ow + 2)
    assert np.array_equal(winograd_conv(T, xe), direct_conv(w.astype(np.float64), x, sy, sx, oh, ow))


# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("call, exc, match", [
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.float32), kind="winograd", precision="int8"), TypeError,
     "quantize_weights"),
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd", saturate=False), ValueError, "saturate"),
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd", scale=0), ValueError, "scale"),
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd", scale=float("inf")), ValueError, "scale"),
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd", rounding="up"), ValueError, "rounding"),
    (lambda: pack_weights(np.ones((2, 1, 3, 3), np.int8), kind="winograd", groups=2), UnsupportedError, "groups"),
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd", post_extension=2), UnsupportedError,
     "post_extension"),
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd", pixel_format="T_R8"), UnsupportedError,
     "pixel_format"),
    (lambda: pack_weights(np.full((1, 1, 3, 3), np.nan, np.float32), kind="winograd"), ValueError, "NaN"),
    (lambda: pack_weights(np.full((1, 1, 3, 3), np.inf, np.float32), kind="winograd"), ValueError, "INF"),
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd", stride=(0, 1)), LayoutError, "stride"),
    (lambda: pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd", out=np.zeros(64, np.uint8)), LayoutError,
     "512 are needed"),
    (lambda: unpack_weights(pack_weights(np.ones((1, 1, 3, 3), np.int8), kind="winograd")), ValueError,
     "no logical inverse"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_nan_allowed_propagates():
    w = np.zeros((1, 1, 3, 3), np.float32)
    w[0, 0, 1, 1] = np.nan
    T = unpack_weights(pack_weights(w, kind="winograd", allow_nan=True), logical=False)
    assert np.isnan(T[0, 0, 1:3, 1:3].astype(np.float32)).all() and not np.isnan(T[0, 0, 0].astype(np.float32)).any()


def test_out_buffer():
    w = np.ones((2, 3, 3, 3), np.int16)
    out = np.full(4096, 0xAB, np.uint8)
    ws = pack_weights(w, kind="winograd", out=out)
    assert np.shares_memory(ws.weight, out) and np.array_equal(ws.weight, expected(w, "int16")[0])
    assert (out[ws.weight.size:] == 0xAB).all()


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_vectorised_reference_matches_loops(precision):
    """The NumPy baseline of the benchmarks is the spec's algorithm too."""
    rng = np.random.default_rng(2)
    shape = (NV_FULL.kernels_per_group(precision) + 3, 40, 3, 3)
    w = small_ints(rng, shape, -50, 50).astype(DTYPE[precision])
    got = ref.pack_winograd_vectorised(w, precision, atom=NV_FULL.atom_elements(precision),
                                       kpg=NV_FULL.kernels_per_group(precision))
    assert np.array_equal(got, expected(w, precision)[0])
    assert np.array_equal(got, pack_weights(w, kind="winograd").weight)


@pytest.mark.parametrize("rounding, saturate", [("nearest_even", True), ("nearest_even", False),
                                                ("nearest_away", True), ("nearest_away", False)])
def test_fp16_rounding_of_hard_values(rounding, saturate):
    """t[0][0] = g[0][0], so every slice's corner checks the fp16 rounding of one float64
    value against to_fp16 (itself checked against the rational oracle): exact ties between two
    halves and their neighbours one double ulp away, half subnormals, the overflow boundary,
    INF and NaN (the vectorised and the scalar conversion paths)."""
    from npupack.nvdla import to_fp16

    rng = np.random.default_rng(17)
    halves = rng.integers(0, 0x7BFF, size=300).astype(np.uint16).view(np.float16).astype(np.float64)
    nxt = np.nextafter(halves.astype(np.float16), np.float16(np.inf)).astype(np.float64)
    ties = (halves + nxt) / 2
    values = np.concatenate([ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf), halves,
                             [65504.0, 65519.99, 65520.0, 1e300, 2.0**-25, 2.0**-24 * 1.5, 2.0**-26, 5e-324,
                              np.inf, np.nan, -0.0]])
    values = np.concatenate([values, -values])
    K = -(-values.size // 16)
    w = np.zeros((K, 16, 3, 3))
    w[:, :, 0, 0].reshape(-1)[:values.size] = values
    T = unpack_weights(pack_weights(w, kind="winograd", rounding=rounding, saturate=saturate, allow_nan=True),
                       logical=False)
    got = T[:, :, 0, 0].reshape(-1)[:values.size].view(np.uint16)
    want = to_fp16(values, rounding=rounding, saturate=saturate).view(np.uint16).copy()
    want[values == 0] = 0  # a computed zero is +0 (docs/nvdla.md §9.4, npupack's rule)
    assert np.array_equal(got, want)


def test_float16_weights_every_half_and_layout():
    """float16 weights are read by the vector kernels when their taps are back to back and
    element by element otherwise: every finite half bit pattern (subnormals, -0.0, the largest
    values) through both paths, against the reference."""
    bits = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
    finite = bits[(bits & 0x7C00) != 0x7C00].view(np.float16)
    w = np.zeros(-(-finite.size // 72) * 72, np.float16)
    w[:finite.size] = finite
    w = w.reshape(-1, 8, 3, 3)  # C = 8: every 4-channel block takes the back-to-back path
    want = expected(w, "fp16")[0]
    assert np.array_equal(pack_weights(w, kind="winograd").weight, want)
    strided = np.zeros(w.shape[:3] + (6,), np.float16)[..., ::2]  # the same values, taps 4 bytes apart
    strided[...] = w
    assert np.array_equal(pack_weights(strided, kind="winograd").weight, want)


def _pack_by_path(w, precision, saturate=True):
    """{path: bytes} of Winograd weights w (K, C, 3, 3) packed by each cube kernel forced in turn
    (avx512, avx2, scalar; a path the CPU lacks takes the next one down), into a buffer 64 bytes
    longer than the layout and filled with 0xA5 first; and the layout."""
    from npupack import _core
    from npupack.nvdla.winograd import _TARGET_CODE, winograd_descriptor

    layout = winograd_descriptor(w.shape, (1, 1), precision, NV_FULL)
    got = {}
    for path in ("avx512", "avx2", "scalar"):
        out = np.full(layout.nbytes + 64, 0xA5, np.uint8)
        _core.winograd_pack(w, out, 1, 1, layout.shape[1], NV_FULL.kernels_per_group(precision), layout._core,
                            _TARGET_CODE[precision], 0, False, saturate, 1.0, path)
        got[path] = out
    return layout, got


@pytest.mark.parametrize("precision, saturate", [("fp16", True), ("fp16", False), ("int8", True), ("int16", True)])
def test_every_kernel_path_gives_the_reference_bytes(precision, saturate):
    """The cube kernels by instruction set, each forced in turn (float16: AVX-512 pairs of kernels;
    int8: AVX-512 fours of kernels on int16 lanes; every precision: AVX2 and plain C++): the same
    bytes as the reference, with full-range integers, an odd last kernel in a group (three: no
    four of them), a short last channel block, fp16 values that overflow and half subnormals;
    nothing written past the layout."""
    rng = np.random.default_rng(23)
    K, C = 2 * NV_FULL.kernels_per_group(precision) + 3, 13
    if precision == "fp16":
        mags = rng.choice([2.0**-20, 1e-3, 1.0, 2e4, 6e4], size=(K, C, 3, 3))
        w = np.clip(rng.standard_normal((K, C, 3, 3)) * mags, -65504, 65504).astype(np.float16)
    else:
        info = np.iinfo(DTYPE[precision])
        w = rng.integers(info.min, info.max, size=(K, C, 3, 3), endpoint=True).astype(DTYPE[precision])
    want = expected(w, precision, saturate=saturate)[0]
    layout, got = _pack_by_path(w, precision, saturate)
    for path, out in got.items():
        assert np.array_equal(out[:layout.nbytes], want[:layout.nbytes]), path
        assert (out[layout.nbytes:] == 0xA5).all(), path


def _transform_in(g, dtype):
    """t = G g Gᵀ of taps g (n, 9: r, s) evaluated in `dtype` by docs/nvdla.md §9.4's matrix, in
    the kernels' order of operations (sums left to right, then halved); (n, 16) outputs."""
    g = [g[:, j].astype(dtype) for j in range(9)]
    half, zero = dtype(0.5), dtype(0.0)
    a = []
    for g0, g1, g2 in ((g[0], g[3], g[6]), (g[1], g[4], g[7]), (g[2], g[5], g[8])):
        a.append((g0, half * ((g0 + g1) + g2), half * ((g0 - g1) + g2), g2))
    t = []
    for i in range(4):
        a0, a1, a2 = a[0][i], a[1][i], a[2][i]
        t += [a0 + zero, half * ((a0 + a1) + a2) + zero, half * ((a0 - a1) + a2) + zero, a2 + zero]
    return np.stack(t, axis=1)


def _edge_slices(rng, span, n):
    """n 3x3 float16 slices (n, 9) at the edge of float32's exactness: eight taps in [1.5, 2) * 2^E
    (below the largest half of that exponent) and one of exponent E - span with every mantissa bit
    set, at a random tap, so that the sums need every bit float has."""
    E = rng.integers(-3, 4, n)
    top = np.float16(2.0 - 2.0**-10) * np.float16(2.0) ** E[:, None].astype(np.float16)
    g = np.minimum((rng.uniform(1.5, 2.0, (n, 9)) * 2.0 ** E[:, None]).astype(np.float16), top)
    small = (2.0 - 2.0**-10) * 2.0 ** (E - span) * rng.choice([-1.0, 1.0], n)
    g[np.arange(n), rng.integers(0, 9, n)] = small.astype(np.float16)
    e = (g.view(np.uint16) >> 10) & 0x1F
    assert (e.max(axis=1) - e.min(axis=1) == span).all()
    return g


def _float32_differs(g):
    """Whether G g Gᵀ evaluated in float32 rounds to other halves than evaluated in float64."""
    return (_transform_in(g, np.float64).astype(np.float16).view(np.uint16)
            != _transform_in(g, np.float32).astype(np.float16).view(np.uint16)).any(axis=1)


@pytest.mark.parametrize("span", [8, 9, 10])
def test_fp16_float32_lanes_up_to_their_exactness_bound(span):
    """float16 to fp16 takes float32 lanes (AVX2, docs/design.md §4.3) where the exponents of a
    lane's nonzero taps span at most 10. Slices at the edge of that bound (_edge_slices) round to
    the same halves in float32 as in float64 (NumPy's float32, in the kernels' order), and every
    path packs the float64 reference's bytes."""
    g = _edge_slices(np.random.default_rng(span), span, 4000)
    assert not _float32_differs(g).any()
    w = g[:64].reshape(2, 32, 3, 3)  # every 4-channel block of the two kernels: eight such lanes
    want = expected(w, "fp16")[0]
    layout, got = _pack_by_path(w, "fp16")
    for path, out in got.items():
        assert np.array_equal(out[:layout.nbytes], want[:layout.nbytes]), path


def test_fp16_one_lane_past_the_bound_sends_its_pair_to_float64():
    """Pairs of kernels with seven lanes of span 10 and one of span 11 whose float32 evaluation
    rounds differently (found among edge slices): the one lane, at each of the eight lane
    positions and with its small tap at tap 8 or elsewhere, sends the pair to the float64 cube, so
    every path packs the reference's bytes."""
    rng = np.random.default_rng(11)
    wide = _edge_slices(rng, 11, 4000)
    differs = _float32_differs(wide)
    assert differs.sum() > 100
    wide = wide[differs]
    last_tap = wide[(wide[:, 8] != 0) & (np.abs(wide[:, 8]) < np.abs(wide[:, 0]) / 512)]
    assert len(last_tap) >= 8
    w = _edge_slices(rng, 10, 2 * 64).reshape(2, 64, 9)  # 16 blocks of eight lanes
    for block in range(16):
        lane = block % 8
        w[lane // 4, 4 * block + lane % 4] = (last_tap if block < 8 else wide)[block]
    w = w.reshape(2, 64, 3, 3)
    want = expected(w, "fp16")[0]
    layout, got = _pack_by_path(w, "fp16")
    for path, out in got.items():
        assert np.array_equal(out[:layout.nbytes], want[:layout.nbytes]), path


@pytest.mark.parametrize("saturate", [True, False])
def test_fp16_float32_lanes_overflow_subnormals_and_signed_zeros(saturate):
    """Lanes within the float32 bound carrying the hard values: taps of half's largest exponent
    whose sums overflow (INF, or +-65504 when saturating), subnormal taps only, and +-0 beside
    ordinary taps: every path packs the reference's bytes."""
    rng = np.random.default_rng(29)
    n = 2 * 64
    huge = rng.uniform(32768, 65504, (n, 9)) * rng.choice([-1.0, 1.0], (n, 1))
    subnormal = (rng.integers(1, 0x400, (n, 9)) * 2.0**-24) * rng.choice([-1.0, 1.0], (n, 9))
    zeros = rng.uniform(1, 2, (n, 9)) * rng.choice([-1.0, 1.0], (n, 9))
    zeros[rng.random((n, 9)) < 0.4] = 0.0
    zeros[rng.random((n, 9)) < 0.3] = -0.0
    kind = rng.integers(0, 3, n)[:, None]
    w = np.where(kind == 0, huge, np.where(kind == 1, subnormal, zeros)).astype(np.float16)
    assert (kind == 0).any() and np.signbit(w[w == 0]).any()
    w = w.reshape(2, 64, 3, 3)
    want = expected(w, "fp16", saturate=saturate)[0]
    assert (want.view(np.uint16) & 0x7FFF == (0x7BFF if saturate else 0x7C00)).any()
    layout, got = _pack_by_path(w, "fp16", saturate)
    for path, out in got.items():
        assert np.array_equal(out[:layout.nbytes], want[:layout.nbytes]), path


@pytest.mark.parametrize("saturate", [True, False])
def test_fp16_lanes_of_infinities_and_zeros(saturate):
    """Lanes whose taps are only INF, -INF and zeros (a span of 0 for the float32 lanes): NaN where
    §9.4's sums in float64 give NaN, INF (+-65504 when saturating) and the same halves elsewhere
    (+0 for zero), on every path."""
    bits = np.random.default_rng(3).choice(np.array([0x7C00, 0xFC00, 0x0000, 0x8000], np.uint16), (2, 32, 3, 3))
    w = bits.view(np.float16)
    with np.errstate(invalid="ignore"):
        want = _transform_in(w.reshape(-1, 9), np.float64).astype(np.float16).reshape(2, 32, 4, 4)
    want[want == 0] = 0
    assert np.isnan(want).any() and np.isinf(want).any()
    if saturate:
        want[np.isinf(want)] = np.copysign(np.float16(65504), want[np.isinf(want)])
    nan = np.isnan(want)
    layout, got = _pack_by_path(w, "fp16", saturate)
    for path, out in got.items():
        T = layout.unpack(out[:layout.nbytes])[:, :32]
        assert np.array_equal(np.isnan(T), nan), path
        assert np.array_equal(T[~nan].view(np.uint16), want[~nan].view(np.uint16)), path


def test_kernels_per_group_beyond_any_size_packs_as_one_group():
    """A kpg above K (any size, up to the largest int64) maps as one group of K kernels: the same
    bytes as kpg = K, no size computed from it; byte-swapped weights are a TypeError."""
    from npupack import _core
    from npupack.nvdla.winograd import _TARGET_CODE, winograd_descriptor

    w = np.random.default_rng(2).standard_normal((16, 64, 3, 3)).astype(np.float16)
    layout = winograd_descriptor(w.shape, (1, 1), "fp16", NV_FULL)  # kpg 16 = K
    want = pack_weights(w, kind="winograd").weight[:layout.nbytes]
    for kpg in (16, 2**62, 2**63 - 1):
        out = np.zeros(layout.nbytes, np.uint8)
        assert _core.winograd_pack(w, out, 1, 1, 64, kpg, layout._core, _TARGET_CODE["fp16"], 0, False, True,
                                   1.0) == layout.nbytes
        assert np.array_equal(out, want), kpg
    with pytest.raises(TypeError, match="big-endian"):
        _core.winograd_pack(w.astype(">f2"), out, 1, 1, 64, 16, layout._core, 2, 0, False, True, 1.0)


def test_a_streamed_int8_surface_is_the_reference():
    """int8 surfaces of 8 MiB and more, into a line-aligned buffer, stream their whole cube lines
    past the caches (AVX-512 fours of kernels): the same bytes as NumPy's transform and mapping,
    and as the same layer packed into a buffer 16 bytes past a line, which does not stream."""
    import npupack

    w = np.random.default_rng(5).integers(-128, 128, (1024, 512, 3, 3)).astype(np.int8)
    want = ref.pack_winograd_vectorised(w, "int8", atom=32, kpg=32)
    assert want.size >= 8 << 20
    aligned = npupack.aligned_empty(want.size)
    assert np.array_equal(pack_weights(w, kind="winograd", out=aligned).weight, want)
    shifted = np.empty(want.size + 64, np.uint8)
    at = (-shifted.ctypes.data + 16) % 64
    assert np.array_equal(pack_weights(w, kind="winograd", out=shifted[at:at + want.size]).weight, want)
