"""NVDLA direct-convolution and grouped weights against the reference of docs/nvdla.md §6 and 7
(worked examples 6.2 / 7.2 / 16.5, loop nest vs closed form, exhaustive boundary shapes on every
preset and precision, random shapes, round trips, errors)."""
import dataclasses
import itertools
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import npupack
from npupack import LayoutError, UnsupportedError
from npupack.nvdla import (NV_FULL, NV_LARGE, NV_SMALL, Config, WeightSurfaces, pack_weights, quantize_weights,
                           unpack_weights, weights_nbytes)
from tests.reference import nvdla as ref

PRESETS = list(Config.presets().values())
DTYPE = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}
RS = (1, 2, 3, 5, 7)


def random_weights(rng, shape, precision):
    if precision == "fp16":
        return rng.standard_normal(shape).astype(np.float16)
    info = np.iinfo(DTYPE[precision])
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(DTYPE[precision])


def expected(w, config, precision, groups=1):
    dense = ref.densify_groups(w, groups)
    return ref.pack_dc_vectorised(dense, kpg=config.kernels_per_group(precision), cb=config.mac_atomic_c,
                                  tail=config.weight_size_alignment)


def test_worked_example_D1():
    ws = pack_weights(np.arange(24, dtype=np.int8).reshape(2, 3, 2, 2))
    assert ws.weight.tolist() == [0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22,
                                  3, 7, 11, 15, 19, 23] + [0] * 104
    assert (ws.kind, ws.precision, ws.packed_shape, ws.kernel_groups, ws.bytes_per_kernel, ws.meaningful_bytes) == \
        ("dc", "int8", (2, 3, 2, 2), 1, 12, 24)


def index_coded_offsets(shape, config, precision, **kw):
    """Pack w = index and return {logical index: byte offset} read back from the bytes."""
    n = int(np.prod(shape))
    dt = np.int16 if precision != "fp16" else np.float32
    w = np.arange(n, dtype=dt).reshape(shape)
    ws = pack_weights(w, precision=precision, config=config, **kw)
    vals = ws.weight[:ws.meaningful_bytes]
    vals = vals.view(np.int16) if precision == "int16" else vals.view(np.float16).astype(np.int64)
    return {int(v): i * 2 for i, v in enumerate(vals)}, ws


def test_worked_example_D2_nv_small():
    w = np.zeros((9, 10, 1, 1), np.int8)
    w[7, 7], w[0, 8], w[3, 9], w[8, 0], w[8, 9] = 1, 2, 3, 4, 5
    ws = pack_weights(w, config=NV_SMALL)
    assert [int(np.flatnonzero(ws.weight == v)[0]) for v in (1, 2, 3, 4, 5)] == [63, 64, 71, 80, 89]
    assert ws.meaningful_bytes == 90 and ws.weight.size == 128 and ws.kernel_groups == 2
    import dataclasses
    small8 = dataclasses.replace(NV_SMALL, weight_size_alignment=8)
    assert pack_weights(w, config=small8).weight.size == 96


def test_worked_example_D3_fp16():
    offsets, ws = index_coded_offsets((17, 65, 1, 1), NV_FULL, "fp16")
    at = lambda k, c: offsets[k * 65 + c]  # noqa: E731
    assert [at(1, 0), at(5, 64), at(16, 0), at(16, 64)] == [128, 2058, 2080, 2208]
    assert ws.meaningful_bytes == 2210 and ws.weight.size == 2304


def test_worked_example_D4_nv_large():
    w = np.zeros((1, 65, 1, 2), np.int8)
    w[0, 0, 0, 1], w[0, 64, 0, 0], w[0, 64, 0, 1] = 1, 2, 3
    ws = pack_weights(w, config=NV_LARGE)
    assert [int(np.flatnonzero(ws.weight == v)[0]) for v in (1, 2, 3)] == [64, 128, 129]
    assert ws.meaningful_bytes == 130 and ws.weight.size == 256
    import dataclasses
    assert pack_weights(w, config=dataclasses.replace(NV_LARGE, weight_size_alignment=64)).weight.size == 192


def test_worked_example_D5_partial_group():
    w = np.zeros((33, 1, 1, 1), np.int8)
    w[32] = 9
    ws = pack_weights(w)
    assert ws.kernel_groups == 2 and ws.weight[32] == 9 and np.count_nonzero(ws.weight) == 1


def test_worked_example_G1_grouped():
    w = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.int8).reshape(4, 2, 1, 1)
    ws = pack_weights(w, groups=2)
    assert ws.weight.tolist() == [1, 2, 0, 0, 3, 4, 0, 0, 0, 0, 5, 6, 0, 0, 7, 8] + [0] * 112
    assert ws.packed_shape == (4, 4, 1, 1) and ws.groups == 2 and ws.bytes_per_kernel == 4
    assert np.array_equal(unpack_weights(ws), w)
    assert unpack_weights(ws, logical=False).shape == (4, 4, 1, 1)


def test_grouped_G2_and_densify_reference():
    with pytest.raises(LayoutError, match="not divisible"):
        pack_weights(np.zeros((3, 2, 1, 1), np.int8), groups=2)
    w = np.arange(4 * 2 * 3 * 3, dtype=np.int8).reshape(4, 2, 3, 3)
    assert np.array_equal(ref.densify_groups(w, 2)[:2, :2], w[:2]) and not ref.densify_groups(w, 2)[:2, 2:].any()


def test_loop_nest_closed_form_and_vectorised_reference_agree():
    rng = np.random.default_rng(3)
    for K, C, R, S, kpg, cb in itertools.product((1, 3, 4, 5, 9), (1, 2, 4, 5, 9), (1, 2), (1, 3), (2, 4), (2, 4)):
        order = ref.dc_order_loops(K, C, R, S, kpg, cb)
        assert sorted(order) == sorted(itertools.product(range(K), range(C), range(R), range(S)))
        for pos, (k, c, r, s) in enumerate(order):
            assert ref.dc_closed_form(k, c, r, s, K, C, R, S, kpg, cb) == pos
        w = rng.integers(-100, 100, (K, C, R, S)).astype(np.int16)
        assert np.array_equal(ref.pack_dc_loops(w, kpg=kpg, cb=cb, tail=128),
                              ref.pack_dc_vectorised(w, kpg=kpg, cb=cb, tail=128))


def boundary(n):
    return sorted({1, n - 1, n, n + 1, 2 * n - 1, 2 * n} - {0})


@pytest.mark.parametrize("config", PRESETS, ids=lambda c: c.name)
def test_exhaustive_boundary_shapes(config):
    """K and C across 1..2x the group/block size (at every boundary), R, S in {1,2,3,5,7}."""
    rng = np.random.default_rng(7)
    for precision in config.precisions:
        kpg, cb = config.kernels_per_group(precision), config.mac_atomic_c
        for K, C in itertools.product(boundary(kpg), boundary(cb)):
            every_rs = (K, C) in {(1, 1), (kpg + 1, cb + 1)}
            for R, S in itertools.product(RS, RS) if every_rs else [(1, 1), (3, 3), (7, 5)]:
                w = random_weights(rng, (K, C, R, S), precision)
                ws = pack_weights(w, config=config)
                assert np.array_equal(ws.weight, expected(w, config, precision)), (precision, K, C, R, S)
                assert ws.weight.size == weights_nbytes(w.shape, precision=precision, config=config)
                assert np.array_equal(unpack_weights(ws).view(np.uint8), w.view(np.uint8))


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_kernels_of_two_to_seven_taps(precision):
    """1xN, Nx1 and 2x2 kernels (2..7 taps): each kernel's channel block is a matrix of 2..7
    columns with back-to-back rows, which the engine transposes by gathering 16 bytes of rows
    per column (16 rows of int8, 8 of 16-bit) with an overlapping last step, and unpacking
    spreads 2..7 rows back into such columns the same way, both over a batch of kernels per call:
    channel blocks around those counts, K over several kernels, against the reference, and back."""
    rng = np.random.default_rng(13)
    taps = [(1, 2), (2, 1), (1, 3), (3, 1), (2, 2), (1, 4), (1, 5), (5, 1), (2, 3), (3, 2), (1, 6), (1, 7), (7, 1)]
    for K, C, (R, S) in itertools.product((3, 33), (7, 8, 9, 15, 16, 17, 31, 33, 64, 65), taps):
        w = random_weights(rng, (K, C, R, S), precision)
        ws = pack_weights(w)
        assert np.array_equal(ws.weight, expected(w, NV_FULL, precision)), (K, C, R, S)
        assert np.array_equal(unpack_weights(ws).view(np.uint8), w.view(np.uint8)), (K, C, R, S)


@pytest.mark.parametrize("config", [NV_SMALL, NV_FULL], ids=lambda c: c.name)
def test_every_small_k_and_c(config):
    """Every K in 1..2*kpg+1 and C in 1..2*cb+1 (1x1 kernels), int8 and a 16-bit precision."""
    rng = np.random.default_rng(11)
    for precision in config.precisions[:2] if config is NV_FULL else config.precisions:
        kpg, cb = config.kernels_per_group(precision), config.mac_atomic_c
        for K in range(1, 2 * kpg + 2):
            for C in (range(1, 2 * cb + 2) if config is NV_SMALL or K in (1, kpg, kpg + 1) else (1, cb, cb + 1)):
                w = random_weights(rng, (K, C, 1, 1), precision)
                assert np.array_equal(pack_weights(w, config=config).weight, expected(w, config, precision))


@given(st.sampled_from([(cfg, p) for cfg in PRESETS for p in cfg.precisions]), st.integers(1, 70),
       st.integers(1, 140), st.integers(1, 7), st.integers(1, 7), st.sampled_from([1, 2, 3, 4]), st.integers(0, 2**32))
def test_random_shapes(cfg_p, K, C, R, S, groups, seed):
    config, precision = cfg_p
    K = max(groups, K - K % groups)
    w = random_weights(np.random.default_rng(seed), (K, C, R, S), precision)
    ws = pack_weights(w, config=config, groups=groups)
    assert np.array_equal(ws.weight, expected(w, config, precision, groups))
    assert ws.weight.size % config.weight_size_alignment == 0
    assert not ws.weight[ws.meaningful_bytes:].any()
    assert np.array_equal(unpack_weights(ws).view(np.uint8), w.view(np.uint8))


def test_index_coded_permutation_and_zero_tail():
    offsets, ws = index_coded_offsets((5, 70, 3, 2), NV_FULL, "int16")
    assert sorted(offsets) == list(range(5 * 70 * 3 * 2))
    assert not ws.weight[ws.meaningful_bytes:].any()
    K, C, R, S = 5, 70, 3, 2
    for (k, c, r, s) in [(0, 0, 0, 0), (4, 69, 2, 1), (3, 64, 1, 0)]:
        assert offsets[((k * C + c) * R + r) * S + s] == 2 * ref.dc_closed_form(k, c, r, s, K, C, R, S, 16, 64)


def test_precisions_and_conversions(rng):
    w32 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    before = w32.copy()
    ws = pack_weights(w32)
    assert ws.precision == "fp16" and np.array_equal(w32, before)
    assert np.array_equal(unpack_weights(ws), w32.astype(np.float16))
    away = pack_weights(w32, rounding="nearest_away", saturate=False)
    assert np.array_equal(unpack_weights(away).view(np.uint16),
                          __import__("npupack.nvdla", fromlist=["to_fp16"]).to_fp16(
                              w32, rounding="nearest_away", saturate=False).view(np.uint16))
    q, scales = quantize_weights(w32, mode="per_filter")
    ws8 = pack_weights(q)
    assert ws8.precision == "int8" and np.array_equal(unpack_weights(ws8), q)
    q16, _ = quantize_weights(w32, precision="int16", mode="per_filter")
    assert np.array_equal(unpack_weights(pack_weights(q16)), q16)
    # int8 -> int16 sign-extends; uint8 -> int16 zero-extends; int -> fp16 exact
    i8 = rng.integers(-128, 128, (2, 2, 1, 1)).astype(np.int8)
    assert np.array_equal(unpack_weights(pack_weights(i8, precision="int16")), i8)
    u8 = np.array([200, 1, 2, 255], np.uint8).reshape(1, 4, 1, 1)
    assert np.array_equal(unpack_weights(pack_weights(u8, precision="int16")), u8)
    assert np.array_equal(unpack_weights(pack_weights(i8, precision="fp16")), i8)
    # non-contiguous input
    big = rng.integers(-9, 9, (8, 6, 3, 3)).astype(np.int8)
    view = big[::2, ::-1]
    assert np.array_equal(pack_weights(view).weight, pack_weights(np.ascontiguousarray(view)).weight)


def test_nan_policy():
    w = np.ones((2, 2, 1, 1), np.float32)
    w[1, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"NaN at index \(1, 0, 0, 0\)"):
        pack_weights(w, precision="fp16")
    ws = pack_weights(w, precision="fp16", allow_nan=True)
    assert np.isnan(unpack_weights(ws)[1, 0, 0, 0])
    # float16 weights: the C++ scan (contiguous) and the NumPy one (strided) agree on the index
    h = np.zeros((3, 5000, 1, 1), np.float16)
    h[2, 4321, 0, 0] = np.float16("nan")
    with pytest.raises(ValueError, match=r"NaN at index \(2, 4321, 0, 0\)"):
        pack_weights(h)
    with pytest.raises(ValueError, match=r"NaN at index \(1, 4321, 0, 0\)"):
        pack_weights(h[::2])
    h[2, 4321, 0, 0] = -np.inf
    assert unpack_weights(pack_weights(h)).view(np.uint16)[2, 4321, 0, 0] == 0xFBFF
    assert unpack_weights(pack_weights(h, saturate=False)).view(np.uint16)[2, 4321, 0, 0] == 0xFC00


def test_fp16_dimension_of_extent_one_with_any_stride():
    # np.newaxis gives a dimension of extent 1 and stride 0, and NumPy still calls the array
    # C-contiguous: the checked fp16 path must take it like its contiguous copy.
    w = np.random.default_rng(5).standard_normal((40, 3, 3)).astype(np.float16)[:, np.newaxis]
    assert w.strides[1] == 0 and w.flags.c_contiguous
    expect = ref.pack_dc_vectorised(np.ascontiguousarray(w), kpg=16, cb=64, tail=128)
    assert np.array_equal(pack_weights(w).weight, expect)
    w_inf = w.copy()
    w_inf[3, 0, 1, 1] = np.inf
    w_inf = np.ascontiguousarray(w_inf[:, 0])[:, np.newaxis]
    w_exp = np.ascontiguousarray(w_inf)
    w_exp[3, 0, 1, 1] = 65504.0
    assert np.array_equal(pack_weights(w_inf).weight, ref.pack_dc_vectorised(w_exp, kpg=16, cb=64, tail=128))


@pytest.mark.parametrize("shape", [(48, 160, 3, 3), (48, 64, 3, 3)], ids=str)
def test_fp16_3x3_watch_sees_every_tap(shape):
    # After the first kernel group, 3x3 fp16 groups of 32 KB and more are tested by the
    # transpose that packs them: C = 160 (46 KB per group), the 3x3 kernel on blocks of 16
    # channel rows (nine 16-byte chunks per 8 rows, each tested). C = 64 (18 KB per group):
    # each group is checked just before it is packed. INF in any tap of any row of a 16-row
    # block (channels 32..47), in a later group, takes the converting path like INF in the first.
    rng = np.random.default_rng(11)
    w = rng.standard_normal(shape).astype(np.float16)
    for k, c in [(40, c) for c in range(32, 48)] + [(47, shape[1] - 1), (17, 0), (33, 65)]:
        for r in range(3):
            for s in range(3):
                w_bad, w_exp = w.copy(), w.copy()
                w_bad[k, c % shape[1], r, s], w_exp[k, c % shape[1], r, s] = np.inf, 65504.0
                expect = ref.pack_dc_vectorised(w_exp, kpg=16, cb=64, tail=128)
                assert np.array_equal(pack_weights(w_bad).weight, expect), (k, c, r, s)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("shape", [(169, 400, 3, 3), (169, 392, 3, 3), (169, 4000, 1, 1), (169, 4003, 1, 1)],
                         ids=str)
def test_fp16_checked_kernel_group_by_kernel_group(threads, where, shape):
    # float16 weights are checked for INF / NaN one kernel group at a time as they are packed (the
    # short last group included, and across threads: 1.2-1.4 MB is split); a group with INF or NaN
    # sends the whole tensor down the converting path, whatever the other groups wrote into out.
    # The first group is checked before it is packed; the kernels that move the later groups test
    # them as they go where they can: 3x3 kernels with channel blocks of 16 rows or more (C = 400:
    # 12 blocks of 32 and one of 16) by the row-pair transpose, 1x1 kernels with C % 8 == 0 by the
    # row copies. C = 392 (a last block of 8 rows) and C = 4003 (the last block's rows are 6
    # bytes): those rows are not tested as they move, so each group is checked after it is packed.
    k, c, r, s = shape
    where = {"first": (0, 0, 0, 0), "middle": (77, 123, r // 2, s - 1), "last": (k - 1, c - 1, r - 1, s - 1)}[where]
    rng = np.random.default_rng(7)
    w = rng.standard_normal(shape).astype(np.float16)
    kpg, cb, tail = 16, 64, 128
    size = ref.pack_dc_vectorised(w, kpg=kpg, cb=cb, tail=tail).size
    with npupack.num_threads(threads):
        out = np.full(size + 64, 0xA5, np.uint8)
        assert np.array_equal(pack_weights(w, out=out).weight, ref.pack_dc_vectorised(w, kpg=kpg, cb=cb, tail=tail))
        for bad, saturate, logical in ((np.inf, True, 65504.0), (-np.inf, False, -np.inf)):
            w_bad, w_exp = w.copy(), w.copy()
            w_bad[where], w_exp[where] = bad, logical
            out[:] = 0xA5
            got = pack_weights(w_bad, saturate=saturate, out=out).weight
            assert np.array_equal(got, ref.pack_dc_vectorised(w_exp, kpg=kpg, cb=cb, tail=tail))
            assert np.all(out[size:] == 0xA5)
        w_nan = w.copy()
        w_nan[where] = np.nan
        with pytest.raises(ValueError, match=re.escape(f"NaN at index {where}")):
            pack_weights(w_nan, out=out)
        got = pack_weights(w_nan, allow_nan=True, out=out).weight
        assert np.array_equal(got, ref.pack_dc_vectorised(w_nan, kpg=kpg, cb=cb, tail=tail))
    assert np.isnan(w_nan[where])  # the caller's tensor is left as it was


@pytest.mark.parametrize("shape", [(40, 64, 1, 1), (40, 72, 1, 1), (40, 70, 1, 1), (40, 64, 3, 3)], ids=str)
def test_fp16_fast_path_verdict_on_edge_values(shape):
    # The packer's own INF/NaN verdict (the row copies' test for 1x1 kernels with C % 8 == 0, the
    # slab scan otherwise): zeros, -0, subnormals and the largest finite values are finite, every
    # all-ones exponent is not, in the first, a middle and the last kernel group.
    from npupack.nvdla.surfaces import _dc_layout

    layout = _dc_layout(shape, "fp16", NV_FULL)
    edge = np.array([0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00], np.uint16)
    bits = np.resize(edge, shape).astype(np.uint16)
    out = np.empty(layout.nbytes, np.uint8)
    assert layout._pack_finite_fp16_into(bits, out)
    assert np.array_equal(out, ref.pack_dc_vectorised(bits.view(np.float16), kpg=16, cb=64, tail=1)[:layout.nbytes])
    for bad in (0x7C00, 0xFC00, 0x7C01, 0xFE00, 0xFFFF):
        for where in ((0, 0, 0, 0), (17, shape[1] // 2, 0, 0), (39, shape[1] - 1, shape[2] - 1, shape[3] - 1)):
            b = bits.copy()
            b[where] = bad
            assert not layout._pack_finite_fp16_into(b, out), (hex(bad), where)


@pytest.mark.parametrize("k", [2, 3, 5, 32, 33])
@pytest.mark.parametrize("c", [16, 80, 144])
def test_int8_channel_blocks_of_16_rows(k, c):
    # A channel block of 16 channels (C = 16, or the short last block of 80 and 144): the kernels
    # of a group are 16-row matrices, transposed two at a time side by side, an odd last one alone.
    w = np.random.default_rng(k * c).integers(-128, 128, (k, c, 3, 3)).astype(np.int8)
    out = np.full(weights_nbytes(w.shape, precision="int8") + 64, 0xA5, np.uint8)
    got = pack_weights(w, out=out).weight
    assert np.array_equal(got, expected(w, NV_FULL, "int8"))
    assert np.array_equal(unpack_weights(pack_weights(w)), w)


def test_fp16_checked_pack_rejects_strided_bits():
    from npupack.nvdla import dc_layout
    layout = dc_layout((4, 6, 3, 3), "fp16")
    bits = np.zeros((4, 12, 3, 3), np.uint16)[:, ::2]
    with pytest.raises(LayoutError, match="C-contiguous"):
        layout._pack_finite_fp16_into(bits, np.zeros(layout.nbytes, np.uint8))


def test_fp16_checked_pack_takes_float16_or_its_bits_only():
    """float16 packs as its uint16 view does; other element types and a byte-swapped float16
    are refused (the check reads native binary16 patterns)."""
    from npupack.nvdla import dc_layout
    layout = dc_layout((20, 70, 3, 3), "fp16")
    w = (np.random.default_rng(3).standard_normal((20, 70, 3, 3)) * 10).astype(np.float16)
    a, b = np.zeros(layout.nbytes, np.uint8), np.ones(layout.nbytes, np.uint8)
    assert layout._pack_finite_fp16_into(w, a) and layout._pack_finite_fp16_into(w.view(np.uint16), b)
    assert np.array_equal(a, b)
    for bad in (w.astype(np.float32), w.view(np.int8), w.astype(">f2")):
        with pytest.raises(TypeError, match="float16 or uint16"):
            layout._pack_finite_fp16_into(bad, a)


@pytest.mark.parametrize("shape", [(48, 131, 1, 1), (48, 141, 1, 1), (40, 72, 1, 1), (64, 1000, 1, 1)])
def test_fp16_1x1_short_channel_block_is_tested_as_it_is_copied(shape):
    """1x1 fp16 weights whose last channel block is short (3, 13, 8 or 40 channels: rows of 6,
    26, 16 and 80 bytes) are copied row by row with the INF/NaN test riding on the copy, also in
    those rows: the bytes are docs/nvdla.md §6.1's, the largest finite half passes, and an INF
    (saturated) or NaN (refused) in the short block, a full block, the first and the last kernel
    group is found."""
    rng = np.random.default_rng(shape[1])
    w = (rng.standard_normal(shape) * 100).astype(np.float16)
    w[-1, -1, 0, 0] = np.float16(65504)
    w[0, -1, 0, 0] = np.float16(-65504)
    expected = ref.pack_dc_vectorised(w, kpg=16, cb=64, tail=128)
    for _ in range(2):
        assert np.array_equal(pack_weights(w).weight, expected)
    # The checked pack itself: the largest finite halves pass, each INF / NaN is seen (the Python
    # fallback would give the same bytes either way).
    from npupack.nvdla.surfaces import _dc_layout

    layout = _dc_layout(shape, "fp16", NV_FULL)
    buf = np.empty(layout.nbytes, np.uint8)
    assert layout._pack_finite_fp16_into(w.view(np.uint16), buf)
    assert np.array_equal(buf, expected[:layout.nbytes])
    for where in ((0, shape[1] - 1), (shape[0] - 1, shape[1] - 1), (shape[0] // 2, shape[1] - 2), (17, 0)):
        for bad in (np.inf, -np.inf, np.nan):
            b = w.copy()
            b[where + (0, 0)] = bad
            assert not layout._pack_finite_fp16_into(b.view(np.uint16), buf), (where, bad)
    for where in ((0, shape[1] - 1), (shape[0] - 1, shape[1] - 1), (shape[0] // 2, shape[1] - 2), (17, 0)):
        inf = w.copy()
        inf[where + (0, 0)] = -np.inf
        clipped = inf.copy()
        clipped[where + (0, 0)] = -65504
        assert np.array_equal(pack_weights(inf).weight, ref.pack_dc_vectorised(clipped, kpg=16, cb=64, tail=128)), where
        inf[where + (0, 0)] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            pack_weights(inf)


def test_out_buffer():
    w = np.arange(24, dtype=np.int8).reshape(2, 3, 2, 2)
    out = np.full(200, 0xEE, np.uint8)
    ws = pack_weights(w, out=out)
    assert np.shares_memory(ws.weight, out) and ws.weight.size == 128
    assert np.array_equal(out[:128], pack_weights(w).weight) and np.all(out[128:] == 0xEE)
    with pytest.raises(LayoutError, match="127 bytes, 128 are needed"):
        pack_weights(w, out=np.zeros(127, np.uint8))
    ro = np.zeros(128, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(LayoutError, match="read-only"):
        pack_weights(w, out=ro)
    with pytest.raises(TypeError, match="uint8"):
        pack_weights(w, out=np.zeros(128, np.int16))


@pytest.mark.parametrize("call, exc, match", [
    (lambda: pack_weights(np.zeros((2, 3, 3), np.int8)), LayoutError, "got 3 dimensions"),
    (lambda: pack_weights(np.zeros((2, 0, 3, 3), np.int8)), LayoutError, ">= 1"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.float32), precision="int8"), TypeError, "quantize_weights"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.float64), precision="int16"), TypeError, "quantize_weights"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int32)), TypeError, "not accepted"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.bool_)), TypeError, "not accepted"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.uint16)), TypeError, "explicit precision"),
    (lambda: pack_weights(np.full((1, 1, 1, 1), 300, np.int16), precision="int8"), ValueError, "do not fit"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.float16), config=NV_SMALL), UnsupportedError, "nv_small"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), precision="int4"), ValueError, "precision"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), kind="winograd"), UnsupportedError, "3x3"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), kind="bogus"), ValueError, "kind"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), post_extension=2), UnsupportedError, "image-input"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), compress=True, config=NV_SMALL), UnsupportedError,
     "compression"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), compress="yes"), ValueError, "compress"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), stride=(0, 1)), LayoutError, "stride"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), scale=2.0), ValueError, "Winograd"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.float32), rounding="truncate"), ValueError, "rounding"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), groups=0), LayoutError, "groups"),
    (lambda: pack_weights(np.zeros((2, 2, 1, 1), np.int8), config="nv_full"), TypeError, "config"),
    (lambda: weights_nbytes((2**31, 2**31, 2**31, 2**31), precision="int8"), LayoutError, "overflow"),
    (lambda: unpack_weights("nope"), TypeError, "WeightSurfaces"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_unpack_rejects_short_surface():
    ws = pack_weights(np.ones((2, 3, 3, 3), np.int8))
    import dataclasses
    short = dataclasses.replace(ws, weight=ws.weight[:10])
    with pytest.raises(LayoutError, match="holds 10 bytes"):
        unpack_weights(short)
    assert isinstance(ws, WeightSurfaces)


@pytest.mark.parametrize("config", PRESETS, ids=lambda c: c.name)
def test_config_named_and_fields(config):
    assert Config.named(config.name.upper()) is config
    assert config.kernels_per_group("int8") == config.mac_atomic_k
    assert config.channels_per_block == config.mac_atomic_c


def test_presets_table():
    rows = {c.name: (c.atom_bytes, c.mac_atomic_c, c.mac_atomic_k, c.cbuf_entry_width, c.weight_size_alignment,
                     c.precisions, c.winograd, c.compression) for c in PRESETS}
    assert rows == {
        "nv_full": (32, 64, 32, 128, 128, ("int8", "int16", "fp16"), True, True),
        "nv_large": (32, 64, 32, 64, 128, ("int8",), False, False),
        "nv_small": (8, 8, 8, 8, 128, ("int8",), False, False),
        "nv_small_256": (8, 32, 8, 32, 128, ("int8",), False, False),
        "nv_medium_512": (16, 32, 16, 32, 128, ("int8",), False, False),
        "nv_medium_1024_full": (32, 32, 32, 32, 128, ("int8",), False, False),
    }
    assert Config.named("nvdlav1") is NV_FULL
    assert NV_FULL.kernels_per_group("fp16") == 16 and NV_FULL.atom_elements("int16") == 16
    with pytest.raises(ValueError, match="unknown NVDLA configuration"):
        Config.named("nv_tiny")


@pytest.mark.parametrize("kwargs, match", [
    (dict(atom_bytes=24), "power of two"),
    (dict(atom_bytes=0), "positive integer"),
    (dict(weight_size_alignment=8192), "<= 4096"),
    (dict(precisions=("int8", "int4")), "subset"),
    (dict(precisions=()), "subset"),
    (dict(precisions=("fp16",), mac_atomic_k=7), "even"),
    (dict(precisions=("fp16",), atom_bytes=4, winograd=True), "multiple of 4"),
])
def test_custom_config_validation(kwargs, match):
    base = dict(name="custom", atom_bytes=32, mac_atomic_c=64, mac_atomic_k=32, cbuf_entry_width=128)
    base.update(kwargs)
    with pytest.raises(LayoutError, match=match):
        Config(**base)


def test_pack_weights_many_equals_one_by_one():
    from npupack.nvdla import pack_weights_many

    rng = np.random.default_rng(11)
    layers = [random_weights(rng, s, p) for s, p in [((40, 70, 3, 3), "int8"), ((8, 1, 3, 3), "int8"),
                                                      ((64, 32, 1, 1), "fp16"), ((17, 5, 7, 7), "int16")]]
    groups = [1, 8, 1, 1]
    many = pack_weights_many(layers, groups=groups)
    for w, g, ws in zip(layers, groups, many):
        one = pack_weights(w, groups=g)
        assert np.array_equal(ws.weight, one.weight) and ws.packed_shape == one.packed_shape
        assert np.array_equal(unpack_weights(ws), w)
    # Layer plans are cached by shape, dtype, precision, config and groups (and shared with
    # pack_weights): one shape under each of them, again and again, in both orders, against the
    # reference and pack_weights field by field.
    w8 = rng.integers(-128, 128, (32, 4, 3, 3), dtype=np.int8)
    variants = [(w8, "int8", NV_FULL, 1), (w8.astype(np.int16), "int16", NV_FULL, 1), (w8, "int16", NV_FULL, 1),
                (w8, "int8", NV_FULL, 2), (w8, "int8", NV_FULL, 4), (w8, "int8", NV_SMALL, 1)]
    for first_many in (True, False):
        for w, precision, config, g in variants * 2:
            kw = dict(precision=None if w.dtype == DTYPE[precision] else precision, config=config, groups=g)
            one = None if first_many else pack_weights(w, **kw)
            [ws] = pack_weights_many([w], **kw)
            one = pack_weights(w, **kw) if one is None else one
            assert np.array_equal(ws.weight, expected(w.astype(DTYPE[precision]), config, precision, g)), kw
            assert ws.precision == precision and ws.groups == g and ws.packed_shape == (32, 4 * g, 3, 3), kw
            for f in dataclasses.fields(ws):
                a, b = getattr(ws, f.name), getattr(one, f.name)
                assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b, (kw, f.name)
    assert pack_weights_many([]) == []
    images = pack_weights_many([layers[0][:, :3]], kind="image", pixel_format="T_A8B8G8R8", stride=(2, 2))
    assert np.array_equal(images[0].weight, pack_weights(layers[0][:, :3], kind="image",
                                                         pixel_format="T_A8B8G8R8", stride=(2, 2)).weight)
    with pytest.raises(TypeError, match="layer 1"):
        pack_weights_many([layers[0], np.ones((2, 2, 1, 1), np.float32)], precision="int8")
    with pytest.raises(LayoutError, match="groups"):
        pack_weights_many(layers, groups=[1, 2])


def test_grouped_into_dirty_out_and_fresh_buffers_agree():
    rng = np.random.default_rng(12)
    w = rng.integers(-128, 128, (96, 1, 5, 5)).astype(np.int8)
    fresh = pack_weights(w, groups=96)
    dirty = np.full(fresh.weight.size + 10, 0xEE, np.uint8)
    into = pack_weights(w, groups=96, out=dirty)
    assert np.array_equal(into.weight, fresh.weight) and (dirty[fresh.weight.size:] == 0xEE).all()
    assert np.array_equal(fresh.weight, expected(w, NV_FULL, "int8", groups=96))


def test_repeated_shapes_keep_every_check():
    # The second call of a shape takes the cached plan; the value checks, the buffer checks and
    # the argument types must still hold there, and the bytes must not change.
    rng = np.random.default_rng(13)
    shape = (24, 10, 3, 3)
    w8 = rng.integers(-128, 128, shape).astype(np.int8)
    wf = rng.standard_normal(shape).astype(np.float16)
    for w in (w8, wf):
        first = pack_weights(w)
        again = pack_weights(w)
        assert np.array_equal(first.weight, again.weight)
        assert np.array_equal(again.weight, expected(w, NV_FULL, first.precision))
        assert {k: v for k, v in vars(first).items() if k != "weight"} == \
               {k: v for k, v in vars(again).items() if k != "weight"}
    bad = wf.copy()
    bad[3, 2, 1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        pack_weights(bad)
    inf = wf.copy()
    inf[0, 0, 0, 0] = np.inf
    assert np.frombuffer(pack_weights(inf).weight[:2].tobytes(), np.float16)[0] == 65504  # saturated
    assert np.isinf(unpack_weights(pack_weights(inf, saturate=False)).astype(np.float32)[0, 0, 0, 0])
    with pytest.raises(ValueError, match="rounding"):
        pack_weights(w8, rounding="up")
    with pytest.raises(TypeError, match="groups"):
        pack_weights(w8, groups=True)
    n8 = pack_weights(w8).weight.size
    with pytest.raises(LayoutError, match="out"):
        pack_weights(w8, out=np.empty(n8 - 1, np.uint8))
    read_only = np.empty(n8, np.uint8)
    read_only.flags.writeable = False
    with pytest.raises(LayoutError, match="read-only"):
        pack_weights(w8, out=read_only)
    u8 = w8.view(np.uint8)
    with pytest.raises(ValueError, match="fit"):
        pack_weights(u8, precision="int8")
    with pytest.raises(ValueError, match="fit"):
        pack_weights(u8, precision="int8")
    # Another config, precision or group count of the same array is another plan.
    for config in (NV_SMALL, NV_FULL, NV_SMALL):
        assert np.array_equal(pack_weights(w8, config=config).weight, expected(w8, config, "int8"))
    assert np.array_equal(pack_weights(w8, precision="int16").weight,
                          expected(w8.astype(np.int16), NV_FULL, "int16"))
    grouped = pack_weights(w8[:, :5], groups=2)
    assert np.array_equal(grouped.weight, expected(w8[:, :5], NV_FULL, "int8", groups=2))
    assert np.array_equal(pack_weights(w8[:, :5], groups=2).weight, grouped.weight)


@pytest.mark.parametrize("kind", ["dc", "image", "winograd", "deconv"])
@pytest.mark.parametrize("config", [NV_FULL, Config.named("nv_small")])
@pytest.mark.parametrize("options", [{}, dict(groups=2), dict(groups=True), dict(groups="2"),
                                     dict(pixel_format="T_R8"), dict(pixel_format="T_A8B8G8R8"), dict(stride=(2, 2)),
                                     dict(stride=(0, 1)), dict(stride=(2, 2), groups=2)])
def test_weights_nbytes_refuses_what_pack_weights_refuses(kind, config, options):
    """weights_nbytes is the size of what pack_weights would produce: for the same arguments
    both give that size or both raise the same error. It used to give a size for options
    pack_weights refuses (a Winograd or deconvolution layer with groups=2 or a pixel format, DC
    weights with a pixel format or a zero stride, Winograd on a config without it)."""
    precision = "int8"
    w = np.ones((4, 2, 3, 3), np.int8)
    if kind == "image" and "pixel_format" not in options:
        options = {**options, "pixel_format": "T_A8B8G8R8"}
    try:
        ws = pack_weights(w, kind=kind, precision=precision, config=config, **options)
    except (TypeError, ValueError) as e:
        # the same rule; the argument is "w" for one and "shape" for the other
        with pytest.raises(type(e), match=re.escape(str(e).partition(": ")[2])):
            weights_nbytes(w.shape, kind=kind, precision=precision, config=config, **options)
        return
    first = ws[0] if isinstance(ws, tuple) else ws
    assert weights_nbytes(w.shape, kind=kind, precision=precision, config=config, **options) == first.weight.size


_STREAMED_REFS = {}


def _streamed_case(precision, taps):
    """DC weights of more than 8 MiB (where whole lines stream) with a short last kernel group and
    a short last channel block, 3x3 or 1x1, their NumPy reference, and a copy with an INF in the
    last kernel group whose reference holds 65504 there (fp16)."""
    if (precision, taps) not in _STREAMED_REFS:
        r = 3 if taps == 9 else 1
        k, c = (500, 2040 if precision == "int8" else 1020) if r == 3 else (4100, 2100 if precision == "int8" else 1050)
        w = random_weights(np.random.default_rng(16), (k, c, r, r), precision)
        kpg, cb = 32 if precision == "int8" else 16, 64  # docs/nvdla.md §6.1 on NV_FULL
        expect = ref.pack_dc_vectorised(w, kpg=kpg, cb=cb, tail=128)
        bad = exp_bad = None
        if precision == "fp16":
            at = (k - 10, 1000, r - 1, r // 2)
            bad, w_exp = w.copy(), w.copy()
            bad[at], w_exp[at] = np.inf, 65504.0
            exp_bad = ref.pack_dc_vectorised(w_exp, kpg=kpg, cb=cb, tail=128)
        _STREAMED_REFS[precision, taps] = (w, expect, bad, exp_bad)
    return _STREAMED_REFS[precision, taps]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("buffer", ["new", "aligned", "16 past a line", "1 past a line"])
@pytest.mark.parametrize("taps", [9, 1], ids=["3x3", "1x1"])
@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_dc_weights_past_8_mib_stream_whole_lines_where_aligned(precision, taps, buffer, threads):
    """Past 8 MiB, DC weights write each 64-byte column of a channel block (3x3: the rotation
    kernels) or each row of one (1x1: the row copies, fp16 tested as it moves) with streaming
    stores where the output is line-aligned (docs/design.md §3.8): a new result and an
    npupack.aligned_empty buffer are, an np.empty one is 16 bytes past a line and gets plain
    stores. Every form gives the reference bytes (short last kernel group and channel block
    included), writes nothing past the surface, and still finds an fp16 INF."""
    w, expect, bad, exp_bad = _streamed_case(precision, taps)
    n = expect.size
    with npupack.num_threads(threads):
        if buffer == "new":
            ws = pack_weights(w)
            assert ws.weight.ctypes.data % 64 == 0
            assert np.array_equal(ws.weight, expect)
            if bad is not None:
                assert np.array_equal(pack_weights(bad).weight, exp_bad)
            return
        shift = {"aligned": 0, "16 past a line": 16, "1 past a line": 1}[buffer]
        raw = npupack.aligned_empty(n + 64 + 100)
        out = raw[shift:shift + n + 100]
        out[:] = 0xA5
        assert np.array_equal(pack_weights(w, out=out).weight, expect)
        assert np.all(out[n:] == 0xA5)
        if bad is not None:
            assert np.array_equal(pack_weights(bad, out=out).weight, exp_bad)


def test_3x3_and_5x5_weights_plans_stream_whole_lines_where_their_rotation_streams():
    """The plan of 3x3 and 5x5 weights past 8 MiB streams in its batch calls where the AVX-512
    rotation kernels run; with the AVX2 ones 3x3 streams and 5x5 (a transpose network with no
    streamed form) stores plainly."""
    from npupack import plan

    runs = {k["name"] for k in npupack._core.kernel_list() if k["runs"]}
    vbmi, avx2 = "transpose_x8_64xn_avx512vbmi" in runs, "transpose_x8_32x9_avx2" in runs
    for precision, shape in (("int8", (500, 2040, 3, 3)), ("fp16", (500, 1020, 3, 3)), ("int16", (500, 1020, 3, 3)),
                             ("int8", (1000, 2040, 3, 3)), ("int8", (500, 1000, 5, 5)), ("fp16", (400, 500, 5, 5)),
                             ("int16", (400, 500, 5, 5))):
        text = plan.describe(npupack.nvdla.dc_layout(shape, precision), shape, DTYPE[precision])
        streams = vbmi or (avx2 and shape[2] == 3)
        want = "streaming stores: yes, in whole 64-byte lines where the output is line-aligned" \
            if streams else "streaming stores: no"
        assert want in text, text
        small = (400, 2040, 3, 3) if precision == "int8" else (400, 1020, 3, 3)  # under 8 MiB: plain stores
        assert "streaming stores: no" in plan.describe(npupack.nvdla.dc_layout(small, precision), small,
                                                       DTYPE[precision])


@pytest.mark.parametrize("precision, shape, prefetched", [
    ("int8", (64, 1024, 5, 5), True), ("int8", (64, 2048, 5, 5), False), ("int8", (64, 4096, 3, 3), True),
    ("int8", (64, 8192, 3, 3), False), ("int8", (64, 65536, 1, 1), True),
    ("fp16", (32, 1024, 5, 5), True), ("fp16", (32, 2048, 5, 5), False)])
def test_dc_plan_prefetches_the_next_kernel_group_only_up_to_a_slab_size(precision, shape, prefetched):
    """A kernel group's slab (32 int8 or 16 fp16 kernels x C x R x S elements; fp16 (32,2048,5,5):
    1.6 MB in 0.8 M elements) of up to 1.5 MiB is prefetched while the one before it is packed; a
    larger one of the batched transposes is not (the kernels prefetch each kernel's next channel
    block instead, docs/design.md §3.8). The row copies of 1x1 weights keep it at any size."""
    from npupack import plan

    text = plan.describe(npupack.nvdla.dc_layout(shape, precision), shape, DTYPE[precision])
    assert f"prefetch of the next outer slab: {'yes' if prefetched else 'no'}" in text, text


@pytest.mark.parametrize("shape", [(33, 6, 3, 3), (77, 6, 3, 3), (100, 64, 1, 1), (1000, 3, 5, 5), (45, 100, 3, 3),
                                   (70, 145, 3, 3), (64, 81, 3, 3), (40, 100, 5, 5), (96, 200, 1, 1)])
@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_dc_weights_with_a_short_kernel_group_or_channel_block_match_the_reference(shape, precision):
    """K not a multiple of the kernel group: the full groups and the short one are packed as two
    layouts (docs/design.md §3.13); C not a multiple of the channel block: the short blocks of a
    group's kernels are gathered into one transpose (§3.3). The bytes are docs/nvdla.md §6.1's,
    and an fp16 INF or NaN in either part is still found."""
    rng = np.random.default_rng(sum(shape))
    dtype = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}[precision]
    w = (rng.standard_normal(shape) * 100).astype(dtype) if precision == "fp16" else \
        rng.integers(-100, 100, shape, dtype=dtype)
    kpg, cb = 32 if precision == "int8" else 16, 64  # docs/nvdla.md §6.1 on NV_FULL
    expected = ref.pack_dc_vectorised(w, kpg=kpg, cb=cb, tail=128)
    out = np.full(expected.size + 64, 0xAB, np.uint8)
    for _ in range(2):  # the second call finds the peel and the plans kept
        got = pack_weights(w, precision=precision, out=out)
        assert np.array_equal(got.weight, expected) and (out[expected.size:] == 0xAB).all()
        assert np.array_equal(unpack_weights(got), w)
    if precision == "fp16":
        for k in (0, shape[0] - 1):  # a full group, the short one
            inf = w.copy()
            inf[k, 0, 0, 0] = np.inf
            clipped = inf.copy()
            clipped[k, 0, 0, 0] = 65504
            assert np.array_equal(pack_weights(inf).weight, ref.pack_dc_vectorised(clipped, kpg=kpg, cb=cb, tail=128))
            inf[k, 0, 0, 0] = np.nan
            with pytest.raises(ValueError, match="NaN"):
                pack_weights(inf)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_weights_one_byte_off_their_alignment(dtype):
    # A float array at an odd offset of a buffer (np.frombuffer at offset 1): its elements are read
    # through an aligned copy by the INF/NaN scan and the fp16 conversion (a misaligned read is
    # undefined behaviour, which the sanitizer build aborts on), with the bytes of the closed form.
    w = np.random.default_rng(5).standard_normal((20, 9, 3, 3)).astype(dtype)
    u = np.frombuffer(bytearray(w.nbytes + 1), np.uint8)[1:].view(dtype).reshape(w.shape)
    u[...] = w
    assert not u.flags.aligned
    expect = ref.pack_dc_vectorised(w.astype(np.float16), kpg=NV_FULL.kernels_per_group("fp16"),
                                    cb=NV_FULL.mac_atomic_c, tail=NV_FULL.weight_size_alignment)
    assert np.array_equal(pack_weights(u).weight, expect)
    empty = np.frombuffer(bytearray(w.itemsize + 1), np.uint8)[1:1 + w.itemsize].view(dtype)[:0]
    assert npupack.nvdla.to_fp16(empty).size == 0  # no element, no copy of one
