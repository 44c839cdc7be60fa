"""Kneron and Horizon re-layouts: npupack vs a NumPy implementation vs np.copyto of the same bytes,
single thread, in one run (issue targets: >= 5x NumPy, >= 0.5x memcpy)."""
import numpy as np
import pytest

from npupack import horizon as hz
from npupack import kneron as kn

IMPLS = ("npupack", "numpy", "memcpy")


def _np_16w1c8b_decode(buf, C, H, W):
    w16 = -(-W // 16) * 16
    return buf.view(np.int8).reshape(C, H, w16)[:, :, :W].copy()


def _np_4w4c8b_encode(x):
    C, H, W = x.shape
    w4, c4 = -(-W // 4) * 4, -(-C // 4) * 4
    p = np.zeros((c4, H, w4), np.int8)
    p[:C, :, :W] = x
    return np.ascontiguousarray(p.reshape(c4 // 4, 4, H, w4).transpose(0, 2, 3, 1)).reshape(-1).view(np.uint8)


def _np_pad(x, aligned):
    out = np.zeros(aligned, x.dtype)
    out[tuple(slice(0, s) for s in x.shape)] = x
    return out.reshape(-1).view(np.uint8)


def _np_strip(buf, shape, aligned):
    return buf.view(np.int8).reshape(aligned)[tuple(slice(0, s) for s in shape)].copy()


@pytest.mark.parametrize("impl", IMPLS)
def bench_kneron_16w1c8b_decode(measure, impl):
    C, H, W = 255, 80, 80
    x = np.random.default_rng(0).integers(-100, 100, (C, H, W)).astype(np.int8)
    buf = kn.pack(x, "16W1C8B", chip="kl720")
    dst = np.empty(C * H * W, np.int8)
    if impl == "npupack":
        fn = lambda: kn.unpack(buf, "16W1C8B", (1, C, H, W), chip="kl720")  # noqa: E731
    elif impl == "numpy":
        fn = lambda: _np_16w1c8b_decode(buf, C, H, W)  # noqa: E731
    else:
        src = np.ones_like(dst)
        fn = lambda: np.copyto(dst, src)  # noqa: E731
    measure("kneron 16W1C8B decode (1,255,80,80) kl720", impl, dst.size, fn)


@pytest.mark.parametrize("impl", IMPLS)
def bench_kneron_4w4c8b_encode(measure, impl):
    x = np.random.default_rng(0).integers(-100, 100, (3, 640, 640)).astype(np.int8)
    out = np.empty(kn.nbytes("4W4C8B", x.shape, chip="kl720"), np.uint8)
    if impl == "npupack":
        fn = lambda: kn.pack(x, "4W4C8B", chip="kl720", out=out)  # noqa: E731
    elif impl == "numpy":
        fn = lambda: _np_4w4c8b_encode(x)  # noqa: E731
    else:
        src = np.ones_like(out)
        fn = lambda: np.copyto(out, src)  # noqa: E731
    measure("kneron 4W4C8B encode 3x640x640 kl720", impl, out.size, fn)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape, role", [((1, 640, 640, 3), "input"), ((1, 80, 80, 255), "output")], ids=str)
def bench_horizon_pad(measure, impl, shape, role):
    x = np.random.default_rng(0).integers(-100, 100, shape).astype(np.int8)
    aligned = hz.aligned_shape(shape, np.int8, role=role)
    out = np.empty(hz.nbytes(shape, np.int8, aligned_shape=aligned), np.uint8)
    if impl == "npupack":
        fn = lambda: hz.pad(x, aligned_shape=aligned, out=out)  # noqa: E731
    elif impl == "numpy":
        fn = lambda: _np_pad(x, aligned)  # noqa: E731
    else:
        src = np.ones_like(out)
        fn = lambda: np.copyto(out, src)  # noqa: E731
    measure(f"horizon pad {shape} int8", impl, out.size, fn)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape, role", [((1, 640, 640, 3), "input"), ((1, 80, 80, 255), "output")], ids=str)
def bench_horizon_strip(measure, impl, shape, role):
    x = np.random.default_rng(0).integers(-100, 100, shape).astype(np.int8)
    aligned = hz.aligned_shape(shape, np.int8, role=role)
    buf = hz.pad(x, aligned_shape=aligned)
    dst = np.empty(x.size, np.int8)
    if impl == "npupack":
        fn = lambda: hz.strip(buf, shape, np.int8, aligned_shape=aligned)  # noqa: E731
    elif impl == "numpy":
        fn = lambda: _np_strip(buf, shape, aligned)  # noqa: E731
    else:
        src = np.ones_like(dst)
        fn = lambda: np.copyto(dst, src)  # noqa: E731
    measure(f"horizon strip {shape} int8", impl, dst.size, fn)
