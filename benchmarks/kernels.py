"""Every microkernel this CPU runs (docs/design.md §4.9) against np.copyto of the same bytes, over
a few sizes: each transpose kernel is called by name through _core.kernel_run on a batch of
matrices of one of its shapes, each bitmask kernel through _core.bitmask_compress_run /
bitmask_decompress_run on half-zero weights, each fp16 scan, streaming copy and spread
through _core.fp16_scan_run / stream_copy_run / spread_run on a flat buffer, each pixel shuffle
and YUV split through _core.pixel_shuffle_run / yuv_split_run on one long line of pixels (4-byte
pixels reordered; 8-bit YUV, its UV pairs V first), so that the table shows each kernel's own speed,
not the dispatch's choice. Prints one row per kernel and size with both times and the ratio (kernel
time / copy time; 1.0 is copy speed); checks no thresholds.

Run from the repository root: python benchmarks/kernels.py [--sizes KB ...] [--rounds N] [--kernel SUBSTRING]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from npupack import LayoutError, _core  # noqa: E402

# One shape per kernel: the first of these (rows, cols) it takes, row-major preference for the
# shapes the kernels were written for (3x3 taps, channel blocks, feature-map tiles).
SHAPES = [(64, 9), (32, 9), (16, 9), (32, 12), (16, 12), (8, 12), (2, 12), (4, 12), (2, 6), (4, 6), (64, 3),
          (32, 3), (16, 3), (2, 64), (4, 64), (3, 64), (5, 64), (32, 64), (32, 8), (16, 64), (8, 8), (16, 8), (4, 4),
          (64, 64)]


def _shape(k, count):
    """The first shape of SHAPES kernel k takes (as one matrix and as a batch of `count`)."""
    eb = k["elem"]
    for rows, cols in SHAPES:
        src = np.zeros(count * rows * cols * eb, np.uint8)
        dst = np.zeros_like(src)
        try:
            _core.kernel_run(k["name"], src, cols * eb, dst, rows * eb, rows, cols, count, rows * cols * eb,
                             rows * cols * eb)
        except LayoutError:
            continue
        return rows, cols
    return None


def _median_time(fn, rounds):
    fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 256, 4096], help="output sizes in KiB")
    ap.add_argument("--rounds", type=int, default=15, help="timed calls per point (median)")
    ap.add_argument("--kernel", default="", help="only kernels whose name contains this")
    args = ap.parse_args(argv)
    print(f"{'kernel':40} {'shape':>8} {'KiB':>6} {'kernel us':>10} {'copy us':>10} {'ratio':>6}")
    for k in _core.kernel_list():
        if not k["runs"] or args.kernel not in k["name"]:
            continue
        if k["op"].startswith("bitmask-"):
            _bitmask_rows(k, args)
            continue
        if k["op"] in ("fp16-scan", "stream-copy", "spread", "pixel-shuffle", "yuv-split"):
            _flat_rows(k, args)
            continue
        eb = k["elem"]
        for kib in args.sizes:
            probe = _shape(k, 2)
            if probe is not None:
                rows, cols = probe
                mat = rows * cols * eb
                count = max(2, (kib << 10) // mat)
            else:  # a kernel of single matrices: one 16-row matrix of the size
                rows, cols, count = 16, max(17, (kib << 10) // (16 * eb)), 1
                mat = rows * cols * eb
            src = (np.arange(count * mat) % 251).astype(np.uint8)
            dst = np.empty_like(src)
            copy_dst = np.empty_like(src)
            step = mat

            def run():
                _core.kernel_run(k["name"], src, cols * eb, dst, rows * eb, rows, cols, count, step, step)

            def copy():
                np.copyto(copy_dst, src)

            t_kernel, t_copy = _median_time(run, args.rounds), _median_time(copy, args.rounds)
            print(f"{k['name']:40} {rows:>3}x{cols:<4} {count * mat >> 10:>6} {t_kernel * 1e6:>10.1f} "
                  f"{t_copy * 1e6:>10.1f} {t_kernel / t_copy:>6.2f}")


def _bitmask_rows(k, args):
    """A bitmask kernel on int8 and fp16 weights with every other element zero (half the bytes
    kept): the dense side's size against a copy of it."""
    for es in (1, 2):
        for kib in args.sizes:
            n = (kib << 10) // es
            dense = (np.arange(n * es) % 251 + 1).astype(np.uint8)
            dense.view(np.uint8 if es == 1 else np.uint16)[::2] = 0
            wmb = np.zeros((n + 7) // 8, np.uint8)
            data = np.zeros(n * es, np.uint8)
            _core.bitmask_compress_run("bitmask-compress_x8x16_any_scalar", dense, es, wmb, data)
            kept = data[:(n // 2) * es].copy()
            out = np.empty_like(dense)
            copy_dst = np.empty_like(dense)

            def run():
                if k["op"] == "bitmask-compress":
                    _core.bitmask_compress_run(k["name"], dense, es, wmb, data)
                else:
                    _core.bitmask_decompress_run(k["name"], kept, wmb, es, out)

            def copy():
                np.copyto(copy_dst, dense)

            t_kernel, t_copy = _median_time(run, args.rounds), _median_time(copy, args.rounds)
            print(f"{k['name']:40} {'x' + str(8 * es):>8} {n * es >> 10:>6} {t_kernel * 1e6:>10.1f} "
                  f"{t_copy * 1e6:>10.1f} {t_kernel / t_copy:>6.2f}")


def _flat_rows(k, args):
    """An fp16 scan over finite halves (it reads every one), a streaming copy, spread blocks, a
    pixel shuffle or a YUV split, of the size."""
    for kib in args.sizes:
        # Bytes below 0x78: every half finite, so that the scan cannot stop early.
        src = (np.arange(kib << 10) % (120 if k["op"] == "fp16-scan" else 251)).astype(np.uint8)
        dst = np.empty_like(src)
        copy_dst = np.empty_like(src)
        if k["op"] == "fp16-scan":
            def run():
                _core.fp16_scan_run(k["name"], src, "nonfinite")
        elif k["op"] == "spread":  # 512-byte blocks of 16 fp16 values (os_is_yx_isv16_osv16)
            blocks = max(1, (kib << 10) // 512)
            values = src[:blocks * 32].copy()

            def run():
                _core.spread_run(k["name"], values, dst[:blocks * 512], 2, 16, 32, 0, blocks)
        elif k["op"] == "pixel-shuffle":  # 4-byte pixels, BGRA to RGBA
            def run():
                _core.pixel_shuffle_run(k["name"], src, dst, [2, 1, 0, 3], 1)
        elif k["op"] == "yuv-split":  # the size's whole (Y, U, V) pixels into a Y and a UV run
            pixels = (kib << 10) // (3 * k["elem"])
            yuv = src[:3 * k["elem"] * pixels]
            y, uv = dst[:k["elem"] * pixels], copy_dst[:2 * k["elem"] * pixels].copy()

            def run():
                _core.yuv_split_run(k["name"], yuv, y, uv, True)
        else:
            def run():
                _core.stream_copy_run(k["name"], src, dst)

        def copy():
            np.copyto(copy_dst, src)

        t_kernel, t_copy = _median_time(run, args.rounds), _median_time(copy, args.rounds)
        print(f"{k['name']:40} {'flat':>8} {kib:>6} {t_kernel * 1e6:>10.1f} {t_copy * 1e6:>10.1f} "
              f"{t_kernel / t_copy:>6.2f}")


if __name__ == "__main__":
    main()
