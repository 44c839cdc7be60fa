"""Per-call cost of every vendor's packer on a repeated tiny tensor, beside np.copyto of the same
output bytes (docs/performance.md §7).

A compiler packs thousands of small layers one call at a time, so what a call costs beyond
moving its bytes (argument checks, cache lookups, the result object) matters as much as
bandwidth. Each front is called on the same tensor again and again, without ``out=`` (a new
result every call) and with it; the figure is the best mean over several rounds of many calls,
in microseconds. Prints a table; checks no thresholds.

Run from the repository root: python benchmarks/per_call.py [--calls N] [--rounds N]
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import npupack  # noqa: E402
from npupack import formats, horizon, kneron, nvdla  # noqa: E402
from npupack import openvino as ov  # noqa: E402

RNG = np.random.default_rng(0)
W = RNG.integers(-100, 100, (16, 16, 3, 3), dtype=np.int8)  # K, C, R, S
X = RNG.integers(-100, 100, (1, 16, 8, 8), dtype=np.int8)  # N, C, H, W
X_NHWC = RNG.integers(-100, 100, (1, 8, 8, 16), dtype=np.int8)  # N, H, W, C
X16 = RNG.integers(-1000, 1000, (1, 16, 8, 8), dtype=np.int16)  # N, C, H, W
DW = RNG.standard_normal((32, 1, 3, 3)).astype(np.float16)  # K, C/groups, R, S: depthwise
IMG = RNG.integers(0, 255, (8, 8, 4), dtype=np.uint8)  # H, W, components
DC = formats.get("nvdla:dc")
PIXEL = formats.get("nvdla:pixel:T_A8B8G8R8")
KNERON = formats.get("kneron:1W16C8B")

# name -> (call(out) -> packed bytes, with out=None for a new result)
FRONTS = {
    "nvdla.pack_weights (16,16,3,3) int8": lambda out: nvdla.pack_weights(W, precision="int8", out=out).weight,
    "nvdla.pack_feature (1,16,8,8) int8": lambda out: nvdla.pack_feature(X, precision="int8", out=out),
    "openvino.pack b_fs_yx_fsv16 (1,16,8,8)": lambda out: ov.pack(X, "b_fs_yx_fsv16", out=out),
    "npupack.pack NCHW16c (1,16,8,8)": lambda out: npupack.pack(X, "NCHW16c", out=out),
    "kneron.pack 1W16C8B kl720 (1,16,8,8)": lambda out: kneron.pack(X, "1W16C8B", chip="kl720", out=out),
    "horizon.pad (1,8,8,16) -> (1,8,8,32)": lambda out: horizon.pad(X_NHWC, aligned_shape=(1, 8, 8, 32), out=out),
    "nvdla.pack_weights (32,1,3,3) fp16 groups=32": lambda out: nvdla.pack_weights(DW, groups=32, out=out).weight,
    "nvdla.pack_pixels T_A8B8G8R8 (8,8,4)": lambda out: nvdla.pack_pixels(IMG, "T_A8B8G8R8", out=out).planes[0],
    "kneron.pack 1W16C8BHL kl730 (1,16,8,8) int16":
        lambda out: kneron.pack(X16, "1W16C8BHL", chip="kl730", stride_npu=(1024, 1, 128, 16), out=out),
    "formats.get('nvdla:dc').pack (16,16,3,3)": lambda out: DC.pack(W, out=out),
    "formats.get('nvdla:pixel:T_A8B8G8R8').pack (8,8,4)": lambda out: PIXEL.pack(IMG, out=out),
    "formats.get('kneron:1W16C8B').pack kl720 (1,16,8,8)": lambda out: KNERON.pack(X, target="kl720", out=out),
}


def per_call(fn, calls: int, rounds: int) -> float:
    """Best mean seconds per call over ``rounds`` rounds of ``calls`` calls."""
    for _ in range(min(calls, 200)):
        fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000, help="calls per round (default 20000)")
    p.add_argument("--rounds", type=int, default=7, help="rounds; the best is reported (default 7)")
    a = p.parse_args(argv)
    print(f"{'front':52s} {'bytes':>6s} {'new us':>7s} {'out= us':>8s} {'copy us':>8s}")
    for name, call in FRONTS.items():
        n = np.asarray(call(None)).size
        out = np.empty(n, np.uint8)
        src = np.ones(n, np.uint8)
        new = per_call(lambda: call(None), a.calls, a.rounds)
        into = per_call(lambda: call(out), a.calls, a.rounds)
        copy = per_call(lambda: np.copyto(out, src), a.calls, a.rounds)
        print(f"{name:52s} {n:6d} {new * 1e6:7.2f} {into * 1e6:8.2f} {copy * 1e6:8.2f}")


if __name__ == "__main__":
    main()
