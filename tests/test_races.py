"""Inputs mutated by another thread during a call: undefined values in the result, never a crash
(npupack._gate). One test per kernel, a writer thread storing into the input while the kernel
runs with the GIL released; CI runs them under AddressSanitizer (.ci/run), where a read or write
past a buffer is a failure even when it would not crash. The decompressor is the case with a
history: it counted the mask's bits once and read DATA by that count, so a writer setting mask
bits made it read past DATA."""
import dataclasses
import threading
import time

import numpy as np
import pytest

import npupack
from npupack import _core, horizon, kneron, nvdla
from npupack import openvino as ov

RNG = np.random.default_rng(99)
SECONDS = 0.15  # per kernel: a few hundred calls against the writer


def _race(target: np.ndarray, call) -> tuple[int, int]:
    """Run ``call`` in a loop while a thread keeps switching the bytes of ``target`` between
    their values and all ones (set mask bits, NaN, -1); returns the calls made and those that
    passed the argument checks (a result, not an error). So a call may
    find the input valid when it checks it and changed while it works on it. Errors the checks
    raise for a half-written input (a NaN that appeared, a count that changed) are allowed; a
    crash ends the test process."""
    raw = target.view(np.uint8).reshape(-1)
    orig = raw.copy()
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            raw[...] = orig if i % 2 == 0 else 0xFF
            i += 1
            time.sleep(0)  # hand the GIL over: the caller's thread must get to start its calls

    t = threading.Thread(target=writer)
    t.start()
    calls = results = 0
    try:
        end = time.perf_counter() + SECONDS
        while time.perf_counter() < end:
            calls += 1
            try:
                call()
                results += 1
            except (ValueError, TypeError):
                pass
    finally:
        stop.set()
        t.join()
        raw[...] = orig  # the next race starts from the true values
    return calls, results


def _sparse(shape, dtype=np.int8, density=0.05):
    w = RNG.integers(1, 100, shape).astype(dtype)
    w[RNG.random(shape) > density] = 0
    return w


def test_decompress_under_a_writer_setting_mask_bits():
    stream = _sparse(1 << 16)
    data, wmb, _ = nvdla.compress_weights(stream, precision="int8", kernel_group_elements=1024)
    data, wmb = data.copy(), wmb.copy()
    for path in ("auto", "avx512", "ssse3", "scalar"):
        out = np.empty(stream.size, np.uint8)
        # Results: calls whose count check saw the true mask, while the writer went on.
        assert _race(wmb, lambda: _core.sparse_decompress(data, wmb, stream.size, 1, out, path))[1] > 0
    assert _race(wmb, lambda: nvdla.decompress_weights(data, wmb, precision="int8", n_elements=stream.size))[1] > 0


def test_unpack_weights_of_compressed_weights_under_a_writer():
    w = _sparse((64, 64, 3, 3))
    ws = nvdla.pack_weights(w, compress=True)
    wmb = ws.wmb.copy()
    mutable = dataclasses.replace(ws, wmb=wmb)
    assert _race(wmb, lambda: nvdla.unpack_weights(mutable))[1] > 0


# name -> (the input array the writer mutates, the call reading it)
def _cases():
    x8 = RNG.integers(-100, 100, (2, 64, 28, 28)).astype(np.int8)
    x16 = RNG.standard_normal((1, 64, 28, 28)).astype(np.float16)
    w8 = RNG.integers(-100, 100, (64, 64, 3, 3)).astype(np.int8)
    wf = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    wg = RNG.integers(-100, 100, (64, 8, 3, 3)).astype(np.int8)
    stream = _sparse(1 << 16)
    packed = npupack.pack(x8, "NCHW16c").copy()
    feature = nvdla.pack_feature(x8).copy()
    img = RNG.integers(0, 256, (64, 96, 4)).astype(np.uint8)
    i16 = RNG.integers(-1000, 1000, (1, 32, 14, 14)).astype(np.int16)
    bn = RNG.standard_normal(4096).astype(np.float32)
    return {
        "pack (engine)": (x8, lambda: npupack.pack(x8, "NCHW16c")),
        "pack fp16 finite check": (x16, lambda: nvdla.pack_feature(x16)),
        "unpack (engine)": (packed, lambda: npupack.unpack(packed, "NCHW16c", x8.shape, np.int8)),
        "openvino transposes": (w8, lambda: ov.pack(w8, "os_is_yx_isv16_osv16")),
        "pack_feature": (x8, lambda: nvdla.pack_feature(x8)),
        "unpack_feature": (feature, lambda: nvdla.unpack_feature(feature, x8.shape, np.int8)),
        "pack_weights dc": (w8, lambda: nvdla.pack_weights(w8)),
        "pack_weights fp16 conversion": (wf, lambda: nvdla.pack_weights(wf, precision="fp16", allow_nan=True)),
        "pack_weights grouped": (wg, lambda: nvdla.pack_weights(wg, groups=8)),
        "pack_weights winograd": (wf, lambda: nvdla.pack_weights(wf, kind="winograd", precision="fp16",
                                                                 allow_nan=True)),
        "compress": (stream, lambda: nvdla.compress_weights(stream, precision="int8", kernel_group_elements=1024)),
        "sparse_count": (stream, lambda: _core.sparse_count(stream.view(np.uint8), stream.size, 1, 1024)),
        "pixels": (img, lambda: nvdla.pack_pixels(img, "T_A8B8G8R8")),
        "kneron high/low": (i16, lambda: kneron.pack(i16, "16W1C8BHL", chip="kl830",
                                                     stride_npu=kneron.predict_stride_npu(i16.shape, "16W1C8BHL"))),
        "horizon": (x8, lambda: horizon.pad(x8, aligned_shape=(2, 64, 28, 32))),
        "sdp": (bn, lambda: nvdla.pack_batchnorm(bn, bn, precision="fp16")),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_kernel_under_a_writer(name):
    target, call = _cases()[name]
    assert _race(target, call)[0] > 0
