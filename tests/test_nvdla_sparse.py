"""NVDLA sparse weight compression against the reference of docs/nvdla.md §11 (worked examples 11.4 /
16.9, element-by-element reference on exhaustive and random streams, round trips for every weight
kind and precision, all-zero / no-zero / partial groups, fp16 -0.0, "auto" decisions, sizes
before compressing, corrupted streams, pruning)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from npupack import LayoutError, UnsupportedError
from npupack.nvdla import (NV_SMALL, analyze_sparsity, compress_weights, decompress_weights, pack_weights,
                           prune, unpack_weights)
from tests.reference import nvdla as ref

ES = {"int8": 1, "int16": 2, "fp16": 2}
DTYPE = {"int8": np.int8, "int16": np.int16, "fp16": np.float16}


def check_against_reference(stream: np.ndarray, precision: str, group: int):
    raw = stream.reshape(-1).view(np.uint8)
    data, wmb, wgs = compress_weights(stream, precision=precision, kernel_group_elements=group)
    want = ref.compress_loops(raw.tobytes(), ES[precision], group)
    assert (data.tobytes(), wmb.tobytes(), wgs.tobytes()) == want
    back = decompress_weights(data, wmb, precision=precision, n_elements=raw.size // ES[precision], wgs=wgs,
                              kernel_group_elements=group)
    assert back.view(np.uint8).tobytes() == raw.tobytes()
    # Decompressed into a caller's buffer with room to spare: the same elements, nothing past them.
    dst = np.full(raw.size + 16, 0xEE, np.uint8)
    into = decompress_weights(data, wmb, precision=precision, n_elements=raw.size // ES[precision], out=dst)
    assert (raw.size == 0 or np.shares_memory(into, dst)) and into.dtype == DTYPE[precision]
    assert dst[:raw.size].tobytes() == raw.tobytes() and (dst[raw.size:] == 0xEE).all()
    report = analyze_sparsity(stream, precision=precision, kernel_group_elements=group)
    assert (report.data_bytes, report.wmb_bytes, report.wgs_bytes) == (data.size, wmb.size, wgs.size)
    # Into a caller's buffer with room to spare: the same surfaces, nothing written past DATA.
    out = np.full(report.data_bytes + 32, 0xEE, np.uint8)
    into = compress_weights(stream, precision=precision, kernel_group_elements=group, out=out)
    assert np.shares_memory(into[0], out) and tuple(a.tobytes() for a in into) == want
    assert (out[report.data_bytes:] == 0xEE).all()
    return data, wmb, wgs


# ---------------------------------------------------------------- worked examples (16.9)

def test_C1():
    data, wmb, wgs = check_against_reference(np.array([0, 5, 0, 0, -3, 0, 0, 0, 7, 0], np.int8), "int8", 10)
    assert wmb.tobytes() == bytes([0x12, 0x01]) + bytes(126)
    assert data.tobytes() == bytes([0x05, 0xFD, 0x07]) + bytes(125)
    assert wgs.tobytes() == bytes([3, 0, 0, 0]) + bytes(124)


def test_C2():
    data, wmb, wgs = check_against_reference(np.array([1, 0, 2, 0, 0, 0, 0, 3, 0, 0, 4, 5], np.int8), "int8", 6)
    assert wmb[:2].tolist() == [0x85, 0x0C] and data[:5].tolist() == [1, 2, 3, 4, 5]
    assert wgs[:8].tolist() == [2, 0, 0, 0, 3, 0, 0, 0] and not wgs[8:].any()


def test_C3_negative_zero_is_stored():
    stream = np.array([0x8000, 0x0000, 0x3C00], np.uint16).view(np.float16)
    data, wmb, wgs = check_against_reference(stream, "fp16", 3)
    assert wmb[0] == 0x05 and data[:4].tolist() == [0x00, 0x80, 0x00, 0x3C] and wgs[:4].tolist() == [4, 0, 0, 0]
    back = decompress_weights(data, wmb, precision="fp16", n_elements=3)
    assert back.view(np.uint16).tolist() == [0x8000, 0x0000, 0x3C00]


def test_C4_all_zero():
    ws = pack_weights(np.zeros((1, 1, 1, 1), np.int8), compress=True)
    assert [a.tobytes() for a in (ws.weight, ws.wmb, ws.wgs)] == [bytes(128)] * 3
    assert ws.nonzero == 0 and ws.encoding == "compressed"
    assert np.array_equal(unpack_weights(ws), np.zeros((1, 1, 1, 1), np.int8))


def sparse_dc(precision, zeros, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.integers(1, 100, size=(32, 64, 4, 4)).astype(DTYPE[precision])
    flat = w.reshape(-1)
    flat[rng.choice(flat.size, zeros, replace=False)] = 0
    return w


@pytest.mark.parametrize("precision, zeros, compressed, total", [
    ("int8", 4224, False, 32768),               # C5: 28544 + 4096 + 128 = 32768, not strictly smaller
    ("int8", 4352, True, 28416 + 4096 + 128),   # C6
    ("fp16", 2048, False, 65536),               # C7: 61440 + 4096 + 128 = 65664 >= 65536
    ("fp16", 2200, True, 61184 + 4096 + 128),
])
def test_C5_C6_C7_auto(precision, zeros, compressed, total):
    w = sparse_dc(precision, zeros)
    ws = pack_weights(w, compress="auto")
    assert ws.compressed is compressed and ws.total_bytes == total
    assert analyze_sparsity(pack_weights(w)).pays_off is compressed
    if precision == "fp16":
        assert ws.kernel_groups == 2
    assert np.array_equal(unpack_weights(ws), w)


def test_C8_and_auto_without_compression():
    w = np.zeros((2, 2, 1, 1), np.int8)
    with pytest.raises(UnsupportedError, match="compression"):
        pack_weights(w, compress=True, config=NV_SMALL)
    ws = pack_weights(w, compress="auto", config=NV_SMALL)
    assert not ws.compressed and ws.weight.size == NV_SMALL.weight_size_alignment


def test_C_example_4_group_boundary():
    """DC int8, K = 40 on NV_FULL: two kernel groups; kernel 32's first element is mask bit
    32*C*R*S (docs/nvdla.md §11.4 example 4)."""
    C, R, S = 3, 2, 2
    w = np.zeros((40, C, R, S), np.int8)
    w[32, 0, 0, 0] = 9
    ws = pack_weights(w, compress=True)
    bit = 32 * C * R * S
    assert ws.wmb[bit // 8] == 1 << (bit % 8) and ws.wmb.sum() == ws.wmb[bit // 8]
    assert ws.wgs[:8].tolist() == [0, 0, 0, 0, 1, 0, 0, 0] and ws.weight[0] == 9


# ---------------------------------------------------------------- streams

@pytest.mark.parametrize("precision", ["int8", "fp16"])
def test_exhaustive_lengths_and_groups(precision):
    """Every length 0..70 (so every SIMD tail), group sizes 1, 7, 16 and the whole stream, at
    zero fractions 0, 0.5 and 1."""
    rng = np.random.default_rng(1)
    for n in range(71):
        for frac in (0.0, 0.5, 1.0):
            bits = rng.integers(1, 2**(8 * ES[precision]), size=n)
            bits[rng.random(n) < frac] = 0
            stream = bits.astype(np.uint8 if ES[precision] == 1 else np.uint16).view(DTYPE[precision])
            for group in {1, 7, 16, max(n, 1)}:
                check_against_reference(stream, precision, group)


@given(data=st.binary(max_size=1200), precision=st.sampled_from(["int8", "int16", "fp16"]),
       group=st.integers(1, 300), zero_every=st.integers(1, 5))
def test_random_streams(data, precision, group, zero_every):
    raw = bytearray(data[:len(data) // ES[precision] * ES[precision]])
    raw[::zero_every] = bytes(len(raw[::zero_every]))  # plenty of zeros, some elements half zero
    check_against_reference(np.frombuffer(bytes(raw), np.uint8), precision, group)


def test_numpy_baseline_matches_reference():
    rng = np.random.default_rng(4)
    stream = rng.integers(-3, 3, size=5000).astype(np.int16)
    got = ref.compress_numpy(stream.view(np.uint8), 2, 333)
    assert tuple(a.tobytes() for a in got) == ref.compress_loops(stream.tobytes(), 2, 333)


def test_large_stream_simd_path():
    rng = np.random.default_rng(8)
    for precision in ("int8", "fp16"):
        v = rng.integers(-50, 50, size=1 << 17)
        stream = v.astype(DTYPE[precision])
        data, wmb, wgs = compress_weights(stream, precision=precision, kernel_group_elements=4096 + 3)
        want = ref.compress_numpy(stream.view(np.uint8), ES[precision], 4096 + 3)
        assert all(np.array_equal(a, b) for a, b in zip((data, wmb, wgs), want))
        back = decompress_weights(data, wmb, precision=precision, n_elements=stream.size, wgs=wgs,
                                  kernel_group_elements=4096 + 3)
        assert np.array_equal(back.view(np.uint8), stream.view(np.uint8))



@pytest.mark.parametrize("precision", ["int8", "fp16"])
@pytest.mark.parametrize("group", [8 * 4099, 4096 + 3, 1 << 16])
def test_large_uneven_stream_under_threads(precision, group):
    # A stream of 3 MiB whose sparsity varies by group, under one and two threads: the same bytes
    # as the reference (docs/nvdla.md §11.1), with and without out=, and no byte of out= past the
    # DATA surface written.
    import npupack
    rng = np.random.default_rng(11)
    n = (3 << 20) // ES[precision] + 77
    v = rng.integers(-50, 50, size=n)
    v[rng.random(n) < np.repeat(rng.random(n // 4096 + 1), 4096)[:n]] = 0
    stream = v.astype(DTYPE[precision])
    want = ref.compress_numpy(stream.view(np.uint8), ES[precision], group)
    for threads in (1, 2):
        with npupack.num_threads(threads):
            got = compress_weights(stream, precision=precision, kernel_group_elements=group)
            assert all(np.array_equal(a, b) for a, b in zip(got, want)), threads
            out = np.full(want[0].size + 300, 0xEE, np.uint8)
            got = compress_weights(stream, precision=precision, kernel_group_elements=group, out=out)
            assert all(np.array_equal(a, b) for a, b in zip(got, want)), threads
            assert (out[want[0].size:] == 0xEE).all()

# ---------------------------------------------------------------- every weight kind

def kinds(precision, rng, zero_fraction):
    info = np.iinfo(np.int8)

    def w(shape):
        a = rng.integers(info.min, info.max, size=shape)
        a[rng.random(shape) < zero_fraction] = 0
        return a.astype(DTYPE[precision])

    yield "dc", w((40, 70, 3, 3)), {}
    yield "grouped", w((36, 3, 3, 3)), {"groups": 4}
    yield "image", w((33, 3, 7, 7)), {"kind": "image", "pixel_format": {"fp16": "T_A16B16G16R16_F"}.get(
        precision, "T_A8B8G8R8"), "stride": (2, 2)}
    yield "image_post2", w((17, 3, 4, 3)), {"kind": "image", "post_extension": 2, "pixel_format": {
        "fp16": "T_A16B16G16R16_F"}.get(precision, "T_A8B8G8R8")}
    yield "deconv", w((20, 18, 4, 4)), {"kind": "deconv", "stride": (2, 2)}
    yield "winograd", w((33, 20, 3, 3)), {"kind": "winograd"}


@pytest.mark.parametrize("zero_fraction", [0.0, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("precision", ["int8", "int16", "fp16"])
def test_every_kind_round_trips(precision, zero_fraction):
    rng = np.random.default_rng(int(zero_fraction * 10))
    for name, w, kw in kinds(precision, rng, zero_fraction):
        plain = pack_weights(w, **kw)
        packed = pack_weights(w, compress=True, **kw)
        plain = plain if isinstance(plain, tuple) else (plain,)
        packed = packed if isinstance(packed, tuple) else (packed,)
        for u, c in zip(plain, packed):
            stream = u.weight[:u.meaningful_bytes]
            want = ref.compress_numpy(stream, ES[precision], u.kernel_group_elements)
            assert all(np.array_equal(a, b) for a, b in zip((c.weight, c.wmb, c.wgs), want)), name
            assert c.meaningful_bytes == u.meaningful_bytes and c.packed_shape == u.packed_shape
        logical = kw.get("kind") != "winograd"
        for s in (plain, packed):
            arg = s if kw.get("kind") == "deconv" else s[0]
            got = unpack_weights(arg, logical=logical)
            want = w if logical else unpack_weights(plain[0], logical=False)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), name


def test_fp16_negative_zero_survives_pack():
    w = np.zeros((2, 3, 1, 1), np.float16)
    w[1, 2] = -0.0
    ws = pack_weights(w, compress=True)
    assert ws.nonzero == 1 and ws.wgs[:4].tolist() == [2, 0, 0, 0]
    assert unpack_weights(ws).view(np.uint16)[1, 2, 0, 0] == 0x8000


@pytest.mark.parametrize("compress", [True, "auto"])
def test_compressed_out_buffer(compress):
    w = sparse_dc("int8", 30000)
    size = analyze_sparsity(pack_weights(w)).data_bytes
    out = np.full(size + 64, 0xEE, np.uint8)
    ws = pack_weights(w, compress=compress, out=out)
    assert ws.compressed and np.shares_memory(ws.weight, out) and ws.weight.size == size
    assert np.array_equal(ws.weight, pack_weights(w, compress=True).weight) and (out[size:] == 0xEE).all()
    small = np.full(size - 1, 0xEE, np.uint8)
    with pytest.raises(LayoutError, match=f"out: holds {size - 1} bytes, {size} are needed"):
        pack_weights(w, compress=compress, out=small)
    assert (small == 0xEE).all()  # refused before anything was written


# The SIMD compaction stores 8 (bytes) or 16 (halves) bytes per quarter of a 64-byte step at the
# offset of the data kept before it, so a step whose last elements are all zero stores past the
# data it keeps. Streams built for that to cross the 128-byte DATA surface: 124 of 192 bytes kept
# (int8), 60 of 96 halves kept (120 bytes); the last step is all zeros.
TAIL_STREAMS = {
    "int8": np.array([1] * 64 + [2] * 60 + [0] * 4 + [0] * 64, np.int8),
    "int16": np.array([1] * 32 + [2] * 28 + [0] * 4 + [0] * 32, np.int16),
}


@pytest.mark.parametrize("precision", ["int8", "int16"])
def test_out_is_written_only_inside_the_data_surface(precision):
    stream = TAIL_STREAMS[precision]
    want = ref.compress_loops(stream.view(np.uint8).tobytes(), ES[precision], stream.size)
    assert len(want[0]) == 128 and 120 <= (stream != 0).sum() * ES[precision] < 128
    out = np.full(256, 0xEE, np.uint8)
    data, wmb, wgs = compress_weights(stream, precision=precision, kernel_group_elements=stream.size, out=out)
    assert (data.tobytes(), wmb.tobytes(), wgs.tobytes()) == want
    assert np.shares_memory(data, out) and (out[128:] == 0xEE).all()
    # pack_weights(compress=..., out=): a (1, C, 1, 1) layer's stream is its C channels; trailing
    # zeros to 1,024 bytes keep DATA and make compression pay, so "auto" compresses too (it
    # counts the non-zeros itself, then writes DATA into out without counting again).
    w = np.concatenate([stream, np.zeros(1024 // ES[precision] - stream.size, stream.dtype)]).reshape(1, -1, 1, 1)
    for compress in (True, "auto"):
        ws = pack_weights(w, precision=precision, compress=compress)
        assert ws.compressed and ws.weight.tobytes() == want[0]
        out = np.full(256, 0xEE, np.uint8)
        assert pack_weights(w, precision=precision, compress=compress, out=out).weight.tobytes() == want[0]
        assert (out[128:] == 0xEE).all()


def test_compress_weights_out_errors():
    stream = np.arange(-50, 50, dtype=np.int8)  # 99 non-zeros: a 128-byte DATA surface
    for out, exc, match in [(np.zeros(127, np.uint8), LayoutError, "127 bytes, 128 are needed"),
                            (np.zeros(128, np.int8), TypeError, "uint8"),
                            (np.zeros(256, np.uint8)[::2], LayoutError, "C-contiguous"),
                            ([0] * 128, TypeError, "numpy uint8 array")]:
        with pytest.raises(exc, match=match):
            compress_weights(stream, precision="int8", kernel_group_elements=8, out=out)
    read_only = np.zeros(128, np.uint8)
    read_only.flags.writeable = False
    with pytest.raises(LayoutError, match="read-only"):
        compress_weights(stream, precision="int8", kernel_group_elements=8, out=read_only)
    raw = np.zeros(512, np.uint8)
    raw[:100] = stream.view(np.uint8)
    before = raw.copy()
    for start in (0, 50, 99):  # out starts inside the stream
        with pytest.raises(LayoutError, match="out: overlaps the memory stream spans"):
            compress_weights(raw[:100], precision="int8", kernel_group_elements=8, out=raw[start:])
    assert np.array_equal(raw, before)  # nothing was written
    side = compress_weights(raw[:100], precision="int8", kernel_group_elements=8, out=raw[100:])  # side by side
    assert side[0].tobytes() == compress_weights(stream, precision="int8", kernel_group_elements=8)[0].tobytes()


def test_analyze_report():
    stream = np.array([1, 0, 0, 0, 2, 0, 3, 4], np.int8)
    r = analyze_sparsity(stream, precision="int8", kernel_group_elements=3)
    assert r.group_nonzero.tolist() == [1, 1, 2] and r.nonzero == 4 and r.elements == 8
    assert np.allclose(r.group_zero_fraction, [2 / 3, 2 / 3, 0.0]) and r.zero_fraction == 0.5
    assert (r.data_bytes, r.wmb_bytes, r.wgs_bytes, r.uncompressed_bytes) == (128, 128, 128, 128)
    assert not r.pays_off


# ---------------------------------------------------------------- corrupted input

def test_corrupted_streams_raise():
    stream = np.arange(1, 301, dtype=np.int16)
    data, wmb, wgs = compress_weights(stream, precision="int16", kernel_group_elements=100)
    with pytest.raises(LayoutError, match="mask bits"):
        decompress_weights(data, wmb[:30], precision="int16", n_elements=300)
    with pytest.raises(LayoutError, match="DATA holds"):
        decompress_weights(data[:500], wmb, precision="int16", n_elements=300)
    bad = wgs.copy()
    bad[4] ^= 2
    with pytest.raises(LayoutError, match="kernel group 1"):
        decompress_weights(data, wmb, precision="int16", n_elements=300, wgs=bad, kernel_group_elements=100)
    with pytest.raises(LayoutError, match="entries"):
        decompress_weights(data, wmb, precision="int16", n_elements=300, wgs=wgs[:8], kernel_group_elements=100)
    with pytest.raises(TypeError, match="kernel_group_elements"):
        decompress_weights(data, wmb, precision="int16", n_elements=300, wgs=wgs)
    ws = pack_weights(np.ones((4, 4, 3, 3), np.int8), compress=True)
    broken = type(ws)._fast(**{**ws.__dict__, "weight": ws.weight[:8]})
    with pytest.raises(LayoutError, match="DATA holds"):
        unpack_weights(broken)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: compress_weights(np.zeros(4, np.int16), precision="int8", kernel_group_elements=2), TypeError,
     "does not match"),
    (lambda: compress_weights(np.zeros(3, np.uint8), precision="fp16", kernel_group_elements=2), LayoutError,
     "whole number"),
    (lambda: compress_weights(np.zeros(4, np.int8), precision="int8", kernel_group_elements=0), LayoutError, ">= 1"),
    (lambda: compress_weights([1, 2], precision="int8", kernel_group_elements=1), TypeError, "numpy array"),
    (lambda: compress_weights(np.zeros(4, np.int8), precision="int4", kernel_group_elements=1), ValueError,
     "precision"),
    (lambda: decompress_weights(np.zeros(4, np.int8), np.zeros(1, np.uint8), precision="int8", n_elements=8),
     TypeError, "uint8"),
    (lambda: decompress_weights(b"", b"", precision="int8", n_elements=-1), TypeError, "n_elements"),
    (lambda: analyze_sparsity(np.zeros(4, np.int8)), TypeError, "required"),
    (lambda: prune(np.ones((4, 2, 1, 1), np.float32), "0.5"), TypeError, "sparsity: expected a number, got '0.5'"),
    (lambda: prune(np.ones((4, 2, 1, 1), np.float32), 0.5, kernel_axis=1.0), TypeError,
     "kernel_axis: expected an integer"),
    (lambda: analyze_sparsity(pack_weights(np.ones((1, 1, 1, 1), np.int8), compress=True)), ValueError,
     "already compressed"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_inputs_not_modified():
    stream = np.array([0, 1, 0, 2], np.int8)
    before = stream.copy()
    data, wmb, wgs = compress_weights(stream, precision="int8", kernel_group_elements=2)
    copies = [a.copy() for a in (data, wmb, wgs)]
    decompress_weights(data, wmb, precision="int8", n_elements=4, wgs=wgs, kernel_group_elements=2)
    assert np.array_equal(stream, before) and all(np.array_equal(a, b) for a, b in zip((data, wmb, wgs), copies))


# ---------------------------------------------------------------- pruning

@pytest.mark.parametrize("sparsity", [0.0, 0.25, 0.5, 0.9, 1.0])
def test_prune_per_kernel_group(sparsity):
    rng = np.random.default_rng(6)
    w = rng.standard_normal((40, 5, 3, 3)).astype(np.float32)
    before = w.copy()
    p = prune(w, sparsity, precision="int8")  # kpg 32: groups of 32 and 8 kernels
    assert np.array_equal(w, before) and p.dtype == w.dtype and p.shape == w.shape
    for k0, kn in ((0, 32), (32, 8)):
        block, orig = p[k0:k0 + kn].reshape(-1), w[k0:k0 + kn].reshape(-1)
        drop = int(np.floor(sparsity * block.size + 0.5))
        assert (block == 0).sum() == drop
        kept = np.abs(orig[block != 0])
        if drop and kept.size:
            assert np.abs(orig[block == 0]).max() <= kept.min()
        assert np.array_equal(block[block != 0], orig[block != 0])


def test_prune_axis_ties_and_errors():
    w = np.ones((3, 20, 1, 1), np.int8)  # deconvolution layout: K_out on axis 1, groups of 16
    p = prune(w, 0.5, kernel_axis=1, precision="int16")
    assert (p[:, :16] == 0).sum() == 24 and (p[:, 16:] == 0).sum() == 6
    assert (p[:, :16].transpose(1, 0, 2, 3).reshape(-1)[:24] == 0).all()  # ties: first positions first
    with pytest.raises(ValueError, match="sparsity"):
        prune(w, 1.5)
    with pytest.raises(ValueError, match="kernel_axis"):
        prune(w, 0.5, kernel_axis=4)
    with pytest.raises(TypeError, match="real"):
        prune(np.ones((1, 1, 1, 1), complex), 0.5)


def _kernel_streams(es, seed):
    """(n, zero fraction, elements, stream bytes) on lengths around every kernel's step (64, 32
    and 16 bytes; 2..5 steps), dense, sparse and mixed, each starting with a dense run."""
    rng = np.random.default_rng(seed)
    for n in (0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 191, 192, 193, 200, 256, 320, 1000,
              4099):
        for frac in (0.0, 0.3, 0.9, 1.0):
            v = rng.integers(1, 2**(8 * es), size=n)
            v[rng.random(n) < frac] = 0
            v[: n // 3] = np.where(rng.random(n // 3) < 0.5, v[: n // 3], 1)
            yield n, frac, v, v.astype(np.uint8 if es == 1 else np.uint16).view(np.uint8)


@pytest.mark.parametrize("path", ["avx512", "avx2", "ssse3", "scalar"])
@pytest.mark.parametrize("es", [1, 2])
def test_every_compaction_kernel_agrees_with_the_reference(path, es):
    """Each kernel (the CPU picks one; the others are forced here) on lengths around its step
    sizes (the AVX2 step is 64 bytes: 64 int8 or 32 fp16 elements; its pipeline holds three
    steps, so 2..5 steps exercise its start and both ends), dense, sparse and mixed runs, and
    DATA buffers from exactly large enough (the SIMD steps stop up to 64 bytes early and leave
    the rest to the scalar loop) to one byte short."""
    from npupack import _core

    for n, frac, v, stream in _kernel_streams(es, seed=es):
        data_ref, wmb_ref, _ = ref.compress_numpy(stream, es, max(n, 1))
        need = int(np.count_nonzero(v)) * es
        wmb = np.full(-(-n // 8) + 3, 0xAA, np.uint8)
        data = np.full(need, 0xAA, np.uint8)
        assert _core.sparse_compress(stream, n, es, wmb, data, path) == need
        assert np.array_equal(data, data_ref[:need]) and np.array_equal(wmb[:-(-n // 8)], wmb_ref[:-(-n // 8)])
        if need:
            with pytest.raises(LayoutError, match="too small"):
                _core.sparse_compress(stream, n, es, wmb, np.zeros(need - 1, np.uint8), path)
        # Per kernel group: one call per group (whole WMB bytes) or a WMB popcount after.
        for group in (8, 24, 64, 136, 7, 33, 1000):
            wmb = np.full(-(-n // 8) + 3, 0xAA, np.uint8)
            data = np.full(need, 0xAA, np.uint8)
            written, counts = _core.sparse_compress_groups(stream, n, es, group, wmb, data, path)
            ref_counts = [np.count_nonzero(v[g:g + group]) for g in range(0, n, group)]
            assert written == need and counts.tolist() == ref_counts, (n, frac, group)
            assert np.array_equal(data, data_ref[:need]) and np.array_equal(wmb[:-(-n // 8)], wmb_ref[:-(-n // 8)])


@pytest.mark.parametrize("path", ["avx512", "ssse3", "scalar"])
@pytest.mark.parametrize("es", [1, 2])
def test_every_expansion_kernel_agrees_with_the_reference(path, es):
    """Each decompression kernel (forced; a CPU without it runs the next) on lengths around its
    steps (AVX-512: 64 bytes of output, SSSE3: 16), dense, sparse and mixed runs, from a DATA
    buffer holding exactly the kept bytes (the SIMD steps read 64 or 16 bytes of it and stop
    before its end) into a dirty output: every zero is written, every element in order."""
    from npupack import _core

    for n, frac, v, stream in _kernel_streams(es, seed=10 + es):
        data_ref, wmb_ref, _ = ref.compress_numpy(stream, es, max(n, 1))
        need = int(np.count_nonzero(v)) * es
        out = np.full(n * es, 0xAA, np.uint8)
        _core.sparse_decompress(data_ref[:need].copy(), wmb_ref, n, es, out, path)
        assert np.array_equal(out, stream), (n, frac)
        if need:
            with pytest.raises(LayoutError, match="DATA holds"):
                _core.sparse_decompress(data_ref[:need - 1].copy(), wmb_ref, n, es, out, path)


@pytest.mark.parametrize("es", [1, 2])
def test_encode_pads_every_surface_and_checks_its_buffers(es):
    """sparse_encode (the C++ pass behind compress_weights) writes the padding itself: buffers
    filled with 0xAA come back equal to the NumPy reference's padded surfaces, with the same
    0xAA past each surface's end; a buffer too small for its surface or padding is an error."""
    from npupack import _core

    rng = np.random.default_rng(7)
    for n, group in ((0, 8), (1, 8), (100, 24), (1000, 136), (1000, 7), (5000, 1000)):
        v = rng.integers(1, 2**(8 * es), size=n)
        v[rng.random(n) < 0.6] = 0
        stream = v.astype(np.uint8 if es == 1 else np.uint16).view(np.uint8)
        data_ref, wmb_ref, wgs_ref = ref.compress_numpy(stream, es, group)
        wmb = np.full(wmb_ref.size + 5, 0xAA, np.uint8)
        data = np.full(max(n * es, 128) + 200, 0xAA, np.uint8)
        wgs = np.full(wgs_ref.size + 5, 0xAA, np.uint8)
        written = _core.sparse_encode(stream, n, es, group, wmb[:-5], data, wgs[:-5], 128)
        assert written == np.count_nonzero(v) * es
        assert np.array_equal(data[:data_ref.size], data_ref), (n, group)
        assert np.array_equal(wmb[:-5], wmb_ref) and np.array_equal(wgs[:-5], wgs_ref), (n, group)
        assert (wmb[-5:] == 0xAA).all() and (wgs[-5:] == 0xAA).all()
        if n:
            with pytest.raises(LayoutError, match="WGS buffer too small"):
                _core.sparse_encode(stream, n, es, group, wmb, data, wgs[:4 * -(-n // group) - 1], 128)
            with pytest.raises(LayoutError, match="wmb too small"):
                _core.sparse_encode(stream, n, es, group, wmb[:-(-n // 8) - 1], data, wgs, 128)
        with pytest.raises(LayoutError, match="too small"):
            _core.sparse_encode(stream, n, es, group, wmb, data[:data_ref.size - 1], wgs, 128)


def test_wgs_entries_use_all_four_bytes():
    """A kernel group with 16 MiB + 2 bytes of non-zero data: its WGS entry's top byte is 1."""
    n = (1 << 23) + 1
    stream = np.ones(n, np.uint16).view(np.uint8)
    _, _, wgs = compress_weights(stream, precision="fp16", kernel_group_elements=n)
    assert wgs[:4].view("<u4")[0] == 2 * n == 0x01000002


def test_decompress_out_refused():
    data, wmb, _ = compress_weights(np.arange(-50, 50, dtype=np.int16), precision="int16", kernel_group_elements=100)
    with pytest.raises(LayoutError, match="out: holds 199 bytes, 200"):
        decompress_weights(data, wmb, precision="int16", n_elements=100, out=np.zeros(199, np.uint8))
    with pytest.raises(TypeError, match="out: expected dtype uint8"):
        decompress_weights(data, wmb, precision="int16", n_elements=100, out=np.zeros(100, np.int16))
    with pytest.raises(LayoutError, match="out"):
        decompress_weights(data, wmb, precision="int16", n_elements=100, out=np.zeros(400, np.uint8)[::2])
    both = np.concatenate([data, np.zeros(200, np.uint8)])
    with pytest.raises(ValueError, match="out"):  # out overlapping DATA: refused before anything is written
        decompress_weights(both[:data.size], wmb, precision="int16", n_elements=100, out=both)
