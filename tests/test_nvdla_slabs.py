"""One rule per format for grouped DC and Winograd weights. Winograd weights are packed by one
pass that writes each cube where the Winograd descriptor places it; grouped DC weights by an
address loop that the DC descriptor of the densified weights must agree with. These tests check
the bytes against references written from docs/nvdla.md §6.1, §7.1 and §9.6 and against the
descriptors, the property the Winograd pass relies on (a run of a kernel group's channels is one
contiguous run of the descriptor's nest at the full descriptor's offset of its first element),
and that weights_nbytes is the size of what pack_weights writes."""
import itertools
import re

import numpy as np
import pytest

from npupack import LayoutError
from npupack.nvdla import (NV_FULL, Config, dc_layout, pack_weights, pack_weights_many, unpack_weights,
                           weights_nbytes, winograd_layout)
from tests.reference import nvdla as ref

# kpg 4 (int8) / 2 (int16, fp16), cb 4, atom 8 / 4 elements: box edges at small sizes.
TINY = Config("tiny", 8, 4, 4, 8, 32, ("int8", "int16", "fp16"), winograd=True, compression=True)
DTYPE = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}


def grouped_reference(w, groups, kpg, cb, tail):
    """docs/nvdla.md §7.1 (element w[k][j][r][s] is dense[k][g*Cg + j][r][s], g = k // Kg) and the
    closed form of §6.1, evaluated for every element at once; the rest of the surface is zero."""
    K, cg, R, S = w.shape
    C = cg * groups
    k, j, r, s = np.meshgrid(*(np.arange(n) for n in w.shape), indexing="ij")
    c = (k // (K // groups)) * cg + j
    k0, c0 = k // kpg * kpg, c // cb * cb
    kn, cn = np.minimum(kpg, K - k0), np.minimum(cb, C - c0)
    index = k0 * C * R * S + kn * c0 * R * S + ((r * S + s) * kn + (k - k0)) * cn + (c - c0)
    es = w.dtype.itemsize
    out = np.zeros(-(-K * C * R * S * es // tail) * tail, np.uint8)
    out.view(w.dtype)[:K * C * R * S][index.ravel()] = w.ravel()
    return out


def descriptor_of_dense(w, groups, precision, config):
    """The rule: the DC descriptor (docs/nvdla.md §6.2) packing the densified weights (§7.1)."""
    K, cg = w.shape[:2]
    dense = np.zeros((K, cg * groups) + w.shape[2:], w.dtype)
    for k in range(K):
        g = k // (K // groups)
        dense[k, g * cg:(g + 1) * cg] = w[k]
    layout = dc_layout(dense.shape, precision, config)
    return layout.pack(dense)[:layout.nbytes]


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_grouped_exhaustive_small(precision):
    """The address loop against the DC descriptor and against the closed form."""
    rng = np.random.default_rng(3)
    kpg, cb = TINY.kernels_per_group(precision), TINY.channels_per_block
    for groups, kg, cg, R, S in itertools.product((1, 2, 3, 5), (1, 2, 3), (1, 2, 5), (1, 2), (1, 3)):
        w = rng.integers(1, 100, size=(groups * kg, cg, R, S)).astype(DTYPE[precision])
        want = grouped_reference(w, groups, kpg, cb, TINY.weight_size_alignment)
        ws = pack_weights(w, groups=groups, config=TINY)
        assert np.array_equal(ws.weight, want), (groups, kg, cg, R, S)
        assert np.array_equal(ws.weight[:ws.meaningful_bytes], descriptor_of_dense(w, groups, precision, TINY))
        assert ws.weight.size == weights_nbytes(w.shape, precision=precision, groups=groups, config=TINY)
        assert np.array_equal(unpack_weights(ws), w)


def test_grouped_random_shapes_strides_and_out():
    """NV_FULL (kpg 32, cb 64): depthwise and grouped layers over several kernel groups and
    channel blocks, a strided input, a dirty ``out`` (tail zeroed) and the batch API, against
    the closed form and the DC descriptor."""
    rng = np.random.default_rng(5)
    for _ in range(12):
        groups = int(rng.choice([2, 3, 8, 96, 200]))
        kg, cg = int(rng.integers(1, 4)), int(rng.integers(1, 5))
        R = S = int(rng.choice([1, 3]))
        w = rng.integers(-128, 128, size=(groups * kg, cg, R, S * 2)).astype(np.int8)[..., ::2]
        want = grouped_reference(np.ascontiguousarray(w), groups, 32, 64, NV_FULL.weight_size_alignment)
        rule = descriptor_of_dense(w, groups, "int8", NV_FULL)
        assert np.array_equal(want[:rule.size], rule) and not want[rule.size:].any()
        out = np.full(want.size + 100, 0xA5, np.uint8)
        assert np.array_equal(pack_weights(w, groups=groups, out=out).weight, want)
        assert (out[want.size:] == 0xA5).all()
        assert np.array_equal(pack_weights(w, groups=groups).weight, want)
        assert np.array_equal(unpack_weights(pack_weights(w, groups=groups, compress=True)), w)
        assert np.array_equal(pack_weights_many([w], groups=groups)[0].weight, want)


def _laid_out(v: np.ndarray, how: str) -> np.ndarray:
    """A copy of ``v`` C-contiguous, strided (every other element of a wider array) or C-contiguous
    one byte off its element alignment."""
    if how == "strided":
        return np.repeat(v, 2, axis=-1)[..., ::2]
    if how == "unaligned":
        u = np.frombuffer(bytearray(v.nbytes + 1), np.uint8)[1:].view(v.dtype).reshape(v.shape)
        u[...] = v
        assert not u.flags.aligned
        return u
    return v.copy()


@pytest.mark.parametrize("how", ["contiguous", "strided", "unaligned"])
def test_grouped_fp16_inf_and_nan_take_the_converting_path(how):
    """float16 depthwise weights are packed as they are only when no value is INF or NaN (the
    address loop scans them first; strided and unaligned ones are converted): INF saturates to
    65504 (or stays INF with saturate=False), NaN is a ValueError naming its index, into a dirty
    ``out`` and a new buffer alike."""
    rng = np.random.default_rng(9)
    shape, groups = (96, 1, 3, 3), 96
    w0 = rng.standard_normal(shape).astype(np.float16)
    geometry = (NV_FULL.kernels_per_group("fp16"), NV_FULL.channels_per_block, NV_FULL.weight_size_alignment)
    size = weights_nbytes(shape, precision="fp16", groups=groups)
    out = np.full(size + 16, 0xA5, np.uint8)
    assert np.array_equal(pack_weights(_laid_out(w0, how), groups=groups, out=out).weight,
                          grouped_reference(w0, groups, *geometry))
    for where in [(0, 0, 0, 0), (50, 0, 1, 2), (95, 0, 2, 2)]:
        for bad, saturate, logical in ((np.inf, True, 65504.0), (-np.inf, False, -np.inf)):
            w_bad, w_exp = _laid_out(w0, how), w0.copy()
            w_bad[where], w_exp[where] = bad, logical
            want = grouped_reference(w_exp, groups, *geometry)
            out[:] = 0xA5
            assert np.array_equal(pack_weights(w_bad, groups=groups, saturate=saturate, out=out).weight, want)
            assert (out[size:] == 0xA5).all()
            assert np.array_equal(pack_weights(w_bad, groups=groups, saturate=saturate).weight, want)
        w_nan = _laid_out(w0, how)
        w_nan[where] = np.nan
        with pytest.raises(ValueError, match=re.escape(f"NaN at index {where}")):
            pack_weights(w_nan, groups=groups, out=out)


@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_winograd_exhaustive_small(precision):
    """Every K and C around the group and atom edges, stride 1 and 2: the bytes are the
    reference's (transform of docs/nvdla.md §9.4, mapping loops of §9.6) and the Winograd
    descriptor packing the reference's transformed tensor."""
    rng = np.random.default_rng(11)
    kpg, atom = TINY.kernels_per_group(precision), TINY.atom_elements(precision)
    for K, C, (R, sy) in itertools.product(range(1, 2 * kpg + 2), range(1, 2 * atom + 2), ((3, 1), (5, 2))):
        w = rng.integers(-20, 21, size=(K, C, R, R)).astype(DTYPE[precision])
        ws = pack_weights(w, kind="winograd", stride=(sy, sy), config=TINY)
        want, T = ref.pack_winograd(w, precision, atom=atom, kpg=kpg, stride=(sy, sy), tail=128)
        assert np.array_equal(ws.weight, want), (K, C, R)
        layout = winograd_layout(T.shape, precision, TINY)
        assert np.array_equal(ws.weight[:layout.nbytes], layout.pack(T)[:layout.nbytes])
        assert ws.weight.size == weights_nbytes(w.shape, precision=precision, kind="winograd", stride=(sy, sy),
                                                config=TINY)


def test_winograd_many_rows_and_threads():
    """A layer of several MB: cube rows shared out to threads."""
    import npupack

    rng = np.random.default_rng(13)
    w = rng.integers(-100, 101, size=(70, 300, 3, 3)).astype(np.int8)
    want = ref.pack_winograd_vectorised(w, "int8", atom=32, kpg=32)
    for threads in (1, 2):
        with npupack.num_threads(threads):
            assert np.array_equal(pack_weights(w, kind="winograd").weight, want)


@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_box_is_one_run_at_the_full_offset(precision):
    """The property the Winograd pass relies on (it takes each cube row's offset from the
    descriptor and writes the row's cubes one after the other), for every box of 4-channel-aligned
    starts, a whole or last kernel group by any run of whole 4-channel blocks."""
    rng = np.random.default_rng(17)
    kpg = TINY.kernels_per_group(precision)
    for K, C in [(2 * kpg + 1, 20), (kpg, 8), (1, 4), (3 * kpg, 12)]:
        R = S = 4
        full = winograd_layout((K, C, R, S), precision, TINY)
        x = rng.integers(-50, 50, size=(K, C, R, S)).astype(DTYPE[precision])
        packed = full.pack(x)
        for k0, c0 in itertools.product(range(0, K, kpg), range(0, C, 4)):
            kn = min(kpg, K - k0)
            for cn in range(4, C - c0 + 1, 4):
                box = winograd_layout((kn, cn, R, S), precision, TINY)
                off = full.offset_of((k0, c0, 0, 0))
                got = packed[off:off + box.nbytes]
                assert np.array_equal(got, box.pack(np.ascontiguousarray(x[k0:k0 + kn, c0:c0 + cn]))[:box.nbytes])


def test_winograd_pass_refuses_another_cube_order():
    """The C++ pass checks that the descriptor it is given holds the cube order it writes: a
    descriptor of the right shape and size but another nest is refused before anything is written."""
    from npupack import _core
    from npupack.layout import BlockedLayout, Dim

    w = np.ones((3, 4, 3, 3), np.int8)
    right = winograd_layout((3, 32, 4, 4), "int8", NV_FULL)
    wrong = BlockedLayout([Dim("K", 3, (32,), ragged=True), Dim("C", 32, (4,)), Dim("R", 4), Dim("S", 4)],
                          [("K", 0), ("C", 0), ("K", 1), ("S", 0), ("R", 0), ("C", 1)], np.int8)
    out = np.full(right.nbytes, 0xA5, np.uint8)
    assert wrong.nbytes == right.nbytes
    with pytest.raises(LayoutError, match="cubes"):
        _core.winograd_pack(w, out, 1, 1, 32, 32, wrong._core, 0, 0, False, True, 1.0)
    assert (out == 0xA5).all()
    assert _core.winograd_pack(w, out, 1, 1, 32, 32, right._core, 0, 0, False, True, 1.0) == right.nbytes
    assert np.array_equal(out, pack_weights(w, kind="winograd").weight[:right.nbytes])


def test_weights_nbytes_is_the_descriptor_size():
    """One size for each kind: weights_nbytes and the surface pack_weights returns."""
    rng = np.random.default_rng(19)
    for shape, kw in [((5, 3, 3, 3), {}), ((6, 2, 1, 1), {"groups": 3}), ((4, 3, 5, 5), {"kind": "winograd",
                                                                                         "stride": (2, 2)}),
                      ((3, 4, 4, 4), {"kind": "deconv", "stride": (2, 2)}),
                      ((4, 3, 3, 3), {"kind": "image", "pixel_format": "T_A8B8G8R8"})]:
        w = rng.integers(-9, 9, size=shape).astype(np.int8)
        packed = pack_weights(w, **kw)
        first = packed[0] if isinstance(packed, tuple) else packed
        assert first.weight.size == weights_nbytes(shape, precision="int8", **kw), kw
    with pytest.raises(LayoutError, match="overflow"):
        weights_nbytes((2**40, 2**40, 3, 3), precision="int8", kind="winograd")
