"""The kernel tester for the sections of the kernel list after the transposes (docs/design.md
§4.9), each kernel the CPU runs called by name whatever the dispatch would choose. The bitmask
kernels compress and decompress iota-based, random, all-zero and dense weights of 8 and 16 bits
at lengths around their steps, into 0xA5 buffers with guards, against a NumPy reference of
docs/nvdla.md §11; the fp16 scans find INF and NaN (docs/nvdla.md §14) planted at every position
of a step, against NumPy's isinf / isnan; the streaming copies copy every length around their
stores to every alignment of the destination; the spreads write zero-padded blocks of one column
of values, against NumPy."""
import itertools

import numpy as np
import pytest

from npupack import LayoutError, _core
from tests.test_kernels import FILL, GUARD, KERNELS, PATHS, _iota

ALL = _core.kernel_list()
BITMASK = [k for k in ALL if k["op"].startswith("bitmask-")]
BITMASK_RUNS = [k for k in BITMASK if k["runs"]]
SCANS = [k for k in ALL if k["op"] == "fp16-scan"]
SCAN_RUNS = [k for k in SCANS if k["runs"]]
COPIES = [k for k in ALL if k["op"] == "stream-copy"]
COPY_RUNS = [k for k in COPIES if k["runs"]]
SPREADS = [k for k in ALL if k["op"] == "spread"]
SPREAD_RUNS = [k for k in SPREADS if k["runs"]]


def test_the_list_has_its_sections():
    """The transposes, the bitmask kernels, the fp16 scans, the streaming copies, the spreads
    (x86 only), the pixel shuffles and YUV splits (tests/test_kernel_pixels.py); nothing else."""
    pixels = [k for k in ALL if k["op"] in ("pixel-shuffle", "yuv-split")]
    assert ALL == KERNELS + BITMASK + SCANS + COPIES + SPREADS + pixels and KERNELS and BITMASK and SCANS and COPIES
    assert pixels


def test_bitmask_list_follows_the_grammar():
    """<operation>_x8x16_<step bytes>_<isa>, each operation ending in its scalar kernel."""
    for k in BITMASK:
        op, elem, tile, isa = k["name"].split("_")
        assert op == k["op"] and elem == "x8x16" and k["elem"] == 0 and isa == k["isa"], k
        assert tile == ("any" if isa == "scalar" else str(k["tile"])), k
    for op in ("bitmask-compress", "bitmask-decompress"):
        assert [k["isa"] for k in BITMASK if k["op"] == op][-1] == "scalar"


def _weights(n, es, kind, rng):
    """n elements of es bytes: an iota with every third element zero (and 0 where the iota wraps),
    random with about half zero, all zero or none zero."""
    dt = np.uint8 if es == 1 else np.uint16
    if kind == "iota":
        v = (np.arange(n) % 251 + (0 if es == 1 else 0x3C00)).astype(dt)
        v[::3] = 0
    elif kind == "random":
        v = rng.integers(1, 2 ** (8 * es), size=n).astype(dt)
        v[rng.random(n) < 0.5] = 0
    elif kind == "zero":
        v = np.zeros(n, dt)
    else:
        v = rng.integers(1, 2 ** (8 * es), size=n).astype(dt)
    return v


BITMASK_LENGTHS = (1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 192, 255, 256, 257, 1000)


@pytest.mark.parametrize("k", BITMASK_RUNS, ids=[k["name"] for k in BITMASK_RUNS])
def test_every_bitmask_kernel_against_numpy(k):
    """Compression: the WMB bytes (bit i of byte i // 8 for a non-zero element i, LSB first) and
    the kept elements in order; DATA exactly as large as they need and 64 bytes larger; nothing
    written past either buffer. Decompression: from DATA of exactly the kept bytes, the dense
    elements back. Every SIMD kernel must move part of the longer streams itself."""
    rng = np.random.default_rng(44)
    compress = k["op"] == "bitmask-compress"
    moved_any = False
    for es, n, kind in itertools.product((1, 2), BITMASK_LENGTHS, ("iota", "random", "zero", "dense")):
        v = _weights(n, es, kind, rng)
        dense = v.view(np.uint8)
        nz = v != 0
        wmb_ref = np.packbits(nz, bitorder="little")
        data_ref = v[nz].view(np.uint8)
        case = f"{k['name']} es={es} n={n} {kind}"
        if compress:
            for room in (0, 64):
                cap = data_ref.size + room
                wmb_full = np.full(wmb_ref.size + 2 * GUARD, FILL, np.uint8)
                data_full = np.full(cap + 2 * GUARD, FILL, np.uint8)
                before = dense.copy()
                moved, written = _core.bitmask_compress_run(k["name"], dense, es, wmb_full[GUARD:GUARD + wmb_ref.size],
                                                            data_full[GUARD:GUARD + cap])
                assert written == data_ref.size, case
                np.testing.assert_array_equal(wmb_full[GUARD:GUARD + wmb_ref.size], wmb_ref, err_msg=case)
                np.testing.assert_array_equal(data_full[GUARD:GUARD + written], data_ref, err_msg=case)
                assert np.all(wmb_full[:GUARD] == FILL) and np.all(wmb_full[GUARD + wmb_ref.size:] == FILL), case
                assert np.all(data_full[:GUARD] == FILL) and np.all(data_full[GUARD + cap:] == FILL), case
                assert np.array_equal(dense, before), case
                moved_any |= 0 < moved
        else:
            out_full = np.full(dense.size + 2 * GUARD, FILL, np.uint8)
            moved = _core.bitmask_decompress_run(k["name"], data_ref.copy(), wmb_ref, es,
                                                 out_full[GUARD:GUARD + dense.size])
            np.testing.assert_array_equal(out_full[GUARD:GUARD + dense.size], dense, err_msg=case)
            assert np.all(out_full[:GUARD] == FILL) and np.all(out_full[GUARD + dense.size:] == FILL), case
            moved_any |= 0 < moved
    assert moved_any, f"{k['name']} moved no element itself"


def test_bitmask_dispatch_matches_every_kernel():
    """The public compression under each forced path gives the bytes of the kernel tester's
    reference; a DATA buffer one byte short is refused, never overrun."""
    rng = np.random.default_rng(7)
    for es, n in itertools.product((1, 2), (5, 64, 200, 1000)):
        v = _weights(n, es, "random", rng)
        nz = v != 0
        need = int(nz.sum()) * es
        for path in PATHS:
            wmb = np.full((n + 7) // 8, FILL, np.uint8)
            data = np.full(need, FILL, np.uint8)
            assert _core.sparse_compress(v.view(np.uint8), n, es, wmb, data, path) == need
            assert np.array_equal(wmb, np.packbits(nz, bitorder="little")), (es, n, path)
            assert np.array_equal(data, v[nz].view(np.uint8)), (es, n, path)
            if need:
                with pytest.raises(LayoutError, match="too small"):
                    _core.sparse_compress(v.view(np.uint8), n, es, wmb, np.zeros(need - 1, np.uint8), path)


def test_bitmask_run_refusals():
    dense = np.ones(64, np.uint8)
    wmb = np.zeros(8, np.uint8)
    data = np.zeros(64, np.uint8)
    with pytest.raises(LayoutError, match="unknown kernel"):
        _core.bitmask_compress_run("bitmask-compress_x8x16_64_avx1024", dense, 1, wmb, data)
    with pytest.raises(LayoutError, match="not a bitmask-compress kernel"):
        _core.bitmask_compress_run("bitmask-decompress_x8x16_any_scalar", dense, 1, wmb, data)
    with pytest.raises(LayoutError, match="es must be"):
        _core.bitmask_compress_run("bitmask-compress_x8x16_any_scalar", dense, 4, wmb, data)
    with pytest.raises(LayoutError, match="whole number"):
        _core.bitmask_compress_run("bitmask-compress_x8x16_any_scalar", dense[:63], 2, wmb, data)
    with pytest.raises(LayoutError, match="wmb is shorter"):
        _core.bitmask_compress_run("bitmask-compress_x8x16_any_scalar", dense, 1, wmb[:7], data)
    with pytest.raises(LayoutError, match="too small"):
        _core.bitmask_compress_run("bitmask-compress_x8x16_any_scalar", dense, 1, wmb, data[:63])
    with pytest.raises(LayoutError, match="read-only"):
        ro = data.copy()
        ro.flags.writeable = False
        _core.bitmask_compress_run("bitmask-compress_x8x16_any_scalar", dense, 1, wmb, ro)
    with pytest.raises(LayoutError, match="wmb is shorter"):
        _core.bitmask_decompress_run("bitmask-decompress_x8x16_any_scalar", data, wmb[:7], 1, dense.copy())
    missing = [k for k in BITMASK if not k["runs"]]
    if missing:
        with pytest.raises(LayoutError, match="this CPU lacks"):
            fn = _core.bitmask_compress_run if missing[0]["op"] == "bitmask-compress" else _core.bitmask_decompress_run
            fn(missing[0]["name"], dense, 1, wmb, data)


def test_bitmask_decompress_reads_no_further_than_data():
    """Mask bits that mark more elements than DATA holds: every kernel stops at DATA's end (the
    rest zeros), whatever lies past it."""
    n = 512
    wmb = np.full(n // 8, 0xFF, np.uint8)
    backing = np.arange(300, dtype=np.uint8)
    data = backing[:100]
    for k in (k for k in BITMASK_RUNS if k["op"] == "bitmask-decompress"):
        out = np.full(n, FILL, np.uint8)
        _core.bitmask_decompress_run(k["name"], data, wmb, 1, out)
        np.testing.assert_array_equal(out[:100], data, err_msg=k["name"])
        assert np.all(out[100:] == 0), k["name"]


def test_fp16_scan_list_follows_the_grammar():
    for k in SCANS:
        op, elem, tile, isa = k["name"].split("_")
        assert op == k["op"] and elem == "x16" and k["elem"] == 2 and isa == k["isa"], k
        assert tile == ("any" if isa == "scalar" else str(k["tile"])), k
    assert SCANS[-1]["isa"] == "scalar"


SPECIALS = {"inf": (0x7C00, 0xFC00), "nan": (0x7E00, 0xFC01, 0x7C01, 0xFFFF)}


@pytest.mark.parametrize("k", SCAN_RUNS, ids=[k["name"] for k in SCAN_RUNS])
def test_every_fp16_scan_kernel_against_numpy(k):
    """Finite halves (iota and random, largest finite magnitudes included) with one INF or NaN
    planted at the first, last and every position of the first step, over 1, 2 and 3 steps;
    each test's answer that of NumPy's float16 isinf / isnan."""
    rng = np.random.default_rng(14)
    step = k["tile"] or 16
    for steps in (1, 2, 3):
        n = step * steps
        base = (rng.integers(0, 0x7C00, size=n) | (rng.integers(0, 2, size=n) << 15)).astype(np.uint16)
        base[:2] = (0x7BFF, 0xFBFF)
        positions = sorted(set(range(step)) | {n - 1, n // 2})
        cases = [base] + [_planted(base, p, b) for b in SPECIALS["inf"] + SPECIALS["nan"] for p in positions]
        for bits in cases:
            h = bits.view(np.float16)
            want = {"inf": bool(np.isinf(h).any()), "nan": bool(np.isnan(h).any())}
            want["nonfinite"] = want["inf"] or want["nan"]
            before = bits.copy()
            for test, expected in want.items():
                assert _core.fp16_scan_run(k["name"], bits, test) == expected, (k["name"], n, test)
            assert np.array_equal(bits, before)


def _planted(base, pos, value):
    bits = base.copy()
    bits[pos] = value
    return bits


def test_fp16_scan_refusals_and_every_path():
    with pytest.raises(LayoutError, match="unknown kernel"):
        _core.fp16_scan_run("fp16-scan_x16_8_avx1024", np.zeros(8, np.uint16), "inf")
    with pytest.raises(LayoutError, match="test must be"):
        _core.fp16_scan_run("fp16-scan_x16_any_scalar", np.zeros(8, np.uint16), "denormal")
    with pytest.raises(LayoutError, match="whole number"):
        _core.fp16_scan_run("fp16-scan_x16_any_scalar", np.zeros(3, np.uint8), "inf")
    with pytest.raises(LayoutError, match="2-byte boundary"):
        _core.fp16_scan_run("fp16-scan_x16_any_scalar", np.zeros(9, np.uint8)[1:], "inf")
    for k in SCAN_RUNS:
        if k["tile"]:
            with pytest.raises(LayoutError, match="does not take"):
                _core.fp16_scan_run(k["name"], np.zeros(k["tile"] + 1, np.uint16), "inf")


def test_stream_copy_list_follows_the_grammar():
    for k in COPIES:
        op, elem, tile, isa = k["name"].split("_")
        assert op == k["op"] and elem == "x8" and k["elem"] == 1 and isa == k["isa"], k
        assert tile == ("any" if isa == "scalar" else str(k["tile"])), k
    assert COPIES[-1]["isa"] == "scalar"


@pytest.mark.parametrize("k", COPY_RUNS, ids=[k["name"] for k in COPY_RUNS])
def test_every_stream_copy_kernel_against_numpy(k):
    """Lengths around the 16- and 32-byte stores (and the 16-byte head that aligns dst) at every
    destination offset within 32 bytes; guard bytes untouched, the source unchanged."""
    src_full = _iota(4096 + 64)
    for n in (0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 100, 1000, 4096):
        for offset in range(32):
            raw = np.full(n + 2 * GUARD + 64, FILL, np.uint8)
            at = GUARD + (-(raw.ctypes.data + GUARD)) % 32 + offset
            src = src_full[offset % 7:offset % 7 + n]
            _core.stream_copy_run(k["name"], src, raw[at:at + n])
            want = np.full(raw.size, FILL, np.uint8)
            want[at:at + n] = src
            np.testing.assert_array_equal(raw, want, err_msg=f"{k['name']} n={n} offset={offset}")
    assert np.array_equal(src_full, _iota(4096 + 64))


def test_stream_copy_refusals():
    buf = np.zeros(64, np.uint8)
    with pytest.raises(LayoutError, match="unknown kernel"):
        _core.stream_copy_run("stream-copy_x8_64_avx1024", buf, buf.copy())
    with pytest.raises(LayoutError, match="differ in size"):
        _core.stream_copy_run("stream-copy_x8_any_scalar", buf, buf[:-1].copy())
    with pytest.raises(LayoutError, match="overlap"):
        _core.stream_copy_run("stream-copy_x8_any_scalar", buf[:32], buf[16:48])
    with pytest.raises(LayoutError, match="read-only"):
        ro = buf.copy()
        ro.flags.writeable = False
        _core.stream_copy_run("stream-copy_x8_any_scalar", buf, ro)


def test_spread_list_follows_the_grammar():
    for k in SPREADS:
        op, elem, tile, isa = k["name"].split("_")
        assert op == k["op"] and elem == "x8" and k["elem"] == 1 and isa == k["isa"] and tile == str(k["tile"]), k


# (eb, rows, row_bytes): os_is_yx_isv16_osv16 of batch-1 activations (16 rows of 16 values of
# int8 / fp16 / fp32), and 8 rows of 4 or 8 bytes.
SPREAD_SHAPES = [(1, 16, 16), (2, 16, 32), (4, 16, 64), (2, 8, 16), (4, 8, 32), (1, 32, 16), (2, 16, 16)]


@pytest.mark.parametrize("k", SPREAD_RUNS, ids=[k["name"] for k in SPREAD_RUNS])
def test_every_spread_kernel_against_numpy(k):
    """Every column of each geometry the kernel takes, 1 and 5 blocks, plain and streamed stores
    at both 32-byte alignments: row r of block x is value r at column col, zeros elsewhere."""
    taken = 0
    for (eb, rows, row_bytes), blocks, stream, shift in itertools.product(SPREAD_SHAPES, (1, 5), (False, True), (0, 16)):
        for col in range(row_bytes // eb):
            values = _iota(blocks * rows * eb + 7)[7:]
            size = blocks * rows * row_bytes
            raw = np.full(size + 2 * GUARD + 64, FILL, np.uint8)
            at = GUARD + (-(raw.ctypes.data + GUARD)) % 32 + shift
            try:
                _core.spread_run(k["name"], values, raw[at:at + size], eb, rows, row_bytes, col, blocks, stream)
            except LayoutError as e:
                assert "does not take" in str(e), e
                continue
            taken += 1
            block = np.zeros((blocks, rows, row_bytes), np.uint8)
            block[:, :, col * eb:(col + 1) * eb] = values.reshape(blocks, rows, eb)
            want = np.full(raw.size, FILL, np.uint8)
            want[at:at + size] = block.ravel()
            np.testing.assert_array_equal(raw, want, err_msg=f"eb={eb} rows={rows} row_bytes={row_bytes} col={col}")
    assert taken


def test_spread_refusals():
    values = np.zeros(256, np.uint8)
    dst = np.zeros(256, np.uint8)
    with pytest.raises(LayoutError, match="unknown kernel"):
        _core.spread_run("spread_x8_64_avx1024", values, dst, 1, 16, 16, 0, 1)
    for k in SPREAD_RUNS:
        with pytest.raises(LayoutError, match="smaller than the blocks"):
            _core.spread_run(k["name"], values, dst[:255], 1, 16, 16, 0, 1)
        with pytest.raises(LayoutError, match="does not take"):
            _core.spread_run(k["name"], values, dst, 1, 16, 16, 16, 1)  # column past the row

