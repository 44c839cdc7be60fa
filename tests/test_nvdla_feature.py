"""NVDLA feature data against the reference of docs/nvdla.md §3 (worked examples 3.6 / 16.3,
exhaustive small shapes on every preset, random shapes and strides, round trips, errors)."""
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import npupack
from npupack import LayoutError, UnsupportedError
from npupack.nvdla import (NV_SMALL, Config, feature_layout, feature_strides, pack_feature,
                           unpack_feature)
from tests.reference import nvdla as ref

PRESETS = list(Config.presets().values())
DTYPE = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}


def random_tensor(rng, shape, precision):
    if precision == "fp16":
        return rng.standard_normal(shape).astype(np.float16)
    info = np.iinfo(DTYPE[precision])
    return rng.integers(info.min, info.max, size=shape, endpoint=True).astype(DTYPE[precision])


def test_worked_example_1_int8_40x2x3():
    st_ = feature_strides((40, 2, 3), "int8")
    assert (st_.line_stride, st_.surface_stride, st_.nbytes) == (96, 192, 384)
    layout = feature_layout((40, 2, 3), "int8")
    assert [layout.offset_of((0,) + i) for i in [(35, 1, 2), (31, 0, 0), (0, 1, 0), (32, 0, 0)]] == [355, 31, 96, 192]
    x = np.arange(1, 241, dtype=np.int16).reshape(40, 2, 3).astype(np.int8)
    buf = pack_feature(x)
    assert buf[355] == x[35, 1, 2].view(np.uint8)
    for j in range(6):
        assert not buf[192 + 8 + 32 * j:192 + 32 + 32 * j].any()


def test_worked_example_2_fp16():
    x = np.zeros((20, 1, 2), np.float16)
    x[17, 0, 1] = 1.0
    buf = pack_feature(x)
    assert buf.size == 128 and bytes(buf[98:100]) == b"\x00\x3c" and np.count_nonzero(buf) == 1


def test_worked_example_3_nv_small():
    layout = feature_layout((10, 1, 2), "int8", NV_SMALL)
    assert layout.nbytes == 32 and layout.offset_of((0, 9, 0, 1)) == 25


def test_worked_example_4_strides():
    x = np.random.default_rng(1).integers(1, 100, (2, 40, 2, 3)).astype(np.int8)
    kw = dict(line_stride=128, surface_stride=320, batch_stride=704)
    buf = pack_feature(x, **kw)
    assert buf.size == 1248 and buf[1219] == x[1, 35, 1, 2]
    assert np.array_equal(buf, ref.pack_feature_loops(x, atom_bytes=32, **kw))
    used = np.zeros(1248, bool)
    layout = feature_layout(x.shape, "int8", **kw)
    for i in np.ndindex(*x.shape):
        used[layout.offset_of(i)] = True
    assert not buf[~used].any()  # padding channels and every gap are zero


def test_worked_example_5_and_6():
    x = np.arange(70, dtype=np.int8).reshape(70, 1, 1)
    buf = pack_feature(x)
    assert buf.size == 96 and np.array_equal(buf[:70], np.arange(70)) and not buf[70:].any()
    y = np.arange(17, dtype=np.int16).reshape(17, 1, 1)
    b = pack_feature(y)
    assert b.size == 64 and bytes(b[32:34]) == b"\x10\x00"


def test_loop_reference_equals_vectorised_reference(rng):
    for shape in [(1, 1, 1, 1), (2, 33, 2, 3), (1, 70, 3, 1)]:
        for atom, dt in [(32, np.int8), (32, np.int16), (8, np.int8)]:
            x = rng.integers(-100, 100, shape).astype(dt)
            for kw in [{}, dict(line_stride=shape[3] * atom + atom)]:
                assert np.array_equal(ref.pack_feature_loops(x, atom_bytes=atom, **kw),
                                      ref.pack_feature_vectorised(x, atom_bytes=atom, **kw))


@pytest.mark.parametrize("config", PRESETS, ids=lambda c: c.name)
def test_exhaustive_small_shapes(config):
    rng = np.random.default_rng(0)
    for precision in config.precisions:
        A = config.atom_elements(precision)
        for c, h, w in itertools.product(range(1, 2 * A + 2), (1, 3), (1, 5, 8, 17)):
            x = random_tensor(rng, (1, c, h, w), precision)
            buf = pack_feature(x, config=config)
            expected = ref.pack_feature_vectorised(x, atom_bytes=config.atom_bytes)
            assert np.array_equal(buf, expected), (config.name, precision, c, h, w)
            back = unpack_feature(buf, x.shape, x.dtype, config=config)
            assert np.array_equal(back.view(np.uint8), x.view(np.uint8))


@given(st.sampled_from([(cfg, p) for cfg in PRESETS for p in cfg.precisions]),
       st.integers(1, 3), st.integers(1, 80), st.integers(1, 5), st.integers(1, 24),
       st.integers(0, 3), st.integers(0, 3), st.integers(0, 3), st.booleans(), st.integers(0, 2**32))
def test_random_shapes_and_strides(cfg_p, n, c, h, w, el, es_, eb, three_d, seed):
    config, precision = cfg_p
    atom = config.atom_bytes
    A = config.atom_elements(precision)
    g = -(-c // A)
    ls = w * atom + el * atom
    ss = h * ls + es_ * atom
    bs = g * ss + eb * atom
    x = random_tensor(np.random.default_rng(seed), (n, c, h, w), precision)
    kw = dict(line_stride=ls, surface_stride=ss, batch_stride=bs)
    buf = pack_feature(x, config=config, **kw)
    assert np.array_equal(buf, ref.pack_feature_vectorised(x, atom_bytes=atom, **kw))
    assert np.array_equal(unpack_feature(buf, x.shape, x.dtype, config=config, **kw).view(np.uint8),
                          x.view(np.uint8))
    if three_d:
        b3 = pack_feature(x[0], config=config, line_stride=ls, surface_stride=ss)
        assert np.array_equal(b3, buf[:b3.size])
        assert unpack_feature(b3, x[0].shape, precision=precision, config=config, line_stride=ls,
                              surface_stride=ss).shape == x[0].shape


def test_input_conversion_and_out(rng):
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    before = x.copy()
    buf = pack_feature(x)
    assert np.array_equal(x, before)
    assert np.array_equal(buf, pack_feature(x.astype(np.float16)))
    out = np.full(buf.size + 10, 0xAA, np.uint8)
    res = pack_feature(x, out=out)
    assert np.shares_memory(res, out) and np.array_equal(out[:buf.size], buf) and np.all(out[buf.size:] == 0xAA)
    # uint8 with explicit precision; int8 -> fp16 exact; non-contiguous input
    u = rng.integers(0, 128, (2, 3, 3)).astype(np.uint8)
    assert np.array_equal(pack_feature(u, precision="int8"), pack_feature(u.astype(np.int8)))
    i8 = rng.integers(-128, 128, (40, 2, 2)).astype(np.int8)
    assert np.array_equal(unpack_feature(pack_feature(i8, precision="fp16"), i8.shape, np.float16), i8)
    big = rng.integers(-9, 9, (8, 6, 6)).astype(np.int8)
    assert np.array_equal(pack_feature(big[::2, 1:, ::-2]), pack_feature(np.ascontiguousarray(big[::2, 1:, ::-2])))
    # NaN in feature data is converted, never rejected; padding stays zero
    nan = np.full((1, 1, 1), np.nan, np.float32)
    b = pack_feature(nan).view(np.uint16)
    assert b[0] == 0x7E00 and not b[1:].any()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("shape, strides", [
    ((3, 40, 90, 90), {}),                                  # 2.9 MB packed: split across threads
    ((40, 33, 35), {}),                                     # (C, H, W)
    ((2, 20, 9, 11), dict(line_stride=384, surface_stride=4096)),  # gaps between lines and surfaces
    # Whole 16-channel surfaces of 32 KB and more: after the first, the transposes test what
    # they move; smaller ones are each checked before they are packed
    ((1, 64, 40, 40), {}),                                  # one image: a slab per surface
    ((3, 32, 45, 45), {}),                                  # several: N merged into the C-block loop
    ((2, 48, 41, 31), {}),                                  # H*W = 1271: an overlapping last step
    ((1, 256, 56, 56), {}),                                 # split across threads
    ((1, 32, 40, 40), dict(line_stride=40 * 32, surface_stride=40 * 40 * 32 + 512)),  # a gap after each surface
    ((2, 32, 20, 20), {}),                                  # 12.8 KB surfaces: checked
], ids=str)
def test_fp16_feature_checked_surface_by_surface(threads, where, shape, strides):
    # float16 activations are checked for INF / NaN one surface at a time as they are packed; a
    # surface with INF sends the whole tensor down the converting path (INF saturates to 65504
    # unless saturate=False), whatever the other surfaces wrote into out; NaN is kept.
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float16)
    pos = {"first": (0,) * len(shape), "middle": tuple(d // 2 for d in shape),
           "last": tuple(d - 1 for d in shape)}[where]
    four = (lambda a: a) if len(shape) == 4 else (lambda a: a[np.newaxis])
    expect = lambda a: ref.pack_feature_vectorised(four(a), atom_bytes=32, **strides)  # noqa: E731
    with npupack.num_threads(threads):
        size = expect(x).size
        out = np.full(size + 64, 0xA5, np.uint8)
        assert np.array_equal(pack_feature(x, out=out, **strides), expect(x))
        for bad, saturate, logical in ((np.inf, True, 65504.0), (-np.inf, True, -65504.0), (np.inf, False, np.inf),
                                       (np.nan, True, np.nan)):
            x_bad, x_exp = x.copy(), x.copy()
            x_bad[pos], x_exp[pos] = bad, logical
            out[:] = 0xA5
            got = pack_feature(x_bad, saturate=saturate, out=out, **strides)
            assert np.array_equal(got, expect(x_exp)) and np.all(out[size:] == 0xA5)
            assert x_bad[pos] == bad or np.isnan(x_bad[pos])  # the caller's tensor is left as it was


@pytest.mark.parametrize("call, exc, match", [
    (lambda: pack_feature(np.zeros((40, 2, 3), np.int8), line_stride=100), LayoutError, "multiple of the 32-byte"),
    (lambda: pack_feature(np.zeros((40, 2, 3), np.int8), line_stride=64), LayoutError, "smaller than one line"),
    (lambda: pack_feature(np.zeros((40, 2, 3), np.int8), surface_stride=160), LayoutError, "H\\*line_stride"),
    (lambda: pack_feature(np.zeros((40, 2, 3), np.int8), batch_stride=192), LayoutError, "G\\*surface_stride"),
    (lambda: pack_feature(np.zeros((40, 2, 3), np.int8), line_stride=-32), LayoutError, "positive multiple"),
    (lambda: pack_feature(np.zeros((40, 2, 3), np.int8), line_stride=96.0), TypeError, "line_stride"),
    (lambda: pack_feature(np.zeros((10, 1, 2), np.float16), config=NV_SMALL), UnsupportedError, "not supported"),
    (lambda: pack_feature(np.zeros((4, 4), np.int8)), LayoutError, "got 2 dimensions"),
    (lambda: pack_feature(np.zeros((1, 0, 4, 4), np.int8)), LayoutError, ">= 1"),
    (lambda: pack_feature(np.zeros((2, 2, 2), np.float32), precision="int8"), TypeError, "quantize_weights"),
    (lambda: pack_feature(np.zeros((2, 2, 2), np.int64)), TypeError, "not accepted"),
    (lambda: pack_feature(np.zeros((2, 2, 2), np.uint8)), TypeError, "explicit precision"),
    (lambda: pack_feature(np.full((2, 2, 2), 200, np.uint8), precision="int8"), ValueError, "do not fit"),
    (lambda: pack_feature(np.zeros((2, 2, 2), np.int8), out=np.zeros(10, np.uint8)), LayoutError, "needed"),
    (lambda: pack_feature(np.zeros((2, 2, 2), np.int8), line_stride=2**62), LayoutError, "overflow"),
    (lambda: feature_strides((2**40, 2**40, 2**40), "int8"), LayoutError, "overflow"),
    (lambda: unpack_feature(np.zeros(10, np.uint8), (2, 2, 2), np.int8), LayoutError, "needs 128"),
    (lambda: unpack_feature(np.zeros(128, np.uint8), (2, 2, 2), np.float32), TypeError, "dtype"),
    (lambda: unpack_feature(np.zeros(128, np.uint8), (2, 2, 2), "f3"), TypeError, "dtype: 'f3' is not a NumPy dtype"),
    (lambda: unpack_feature(np.zeros(128, np.uint8), (2, 2, 2), "i9", precision="int8"), TypeError,
     "dtype: 'i9' is not a NumPy dtype"),
    (lambda: unpack_feature(np.zeros(128, np.float32), (2, 2, 2), np.int8), TypeError, "uint8"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_read_only_out_is_rejected_before_writing():
    out = np.zeros(256, np.uint8)
    out.flags.writeable = False
    with pytest.raises(LayoutError, match="read-only"):
        pack_feature(np.ones((2, 2, 2), np.int8), out=out)
    small = np.full(100, 0x55, np.uint8)
    with pytest.raises(LayoutError):
        pack_feature(np.ones((2, 2, 2), np.int8), out=small)
    assert np.all(small == 0x55)
