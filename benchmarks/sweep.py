"""Size sweep of every npupack packer family against np.copyto of the same number of output bytes.

For each family and case, output sizes from 4 KB to 256 MB (about two per octave; --quick: 64 KB,
4 MB and 32 MB) get a seeded random shape of that size, and each point is timed with one npupack
thread and with all of them: the npupack call and np.copyto of its output bytes into a
preallocated buffer are timed in alternation, and the medians over rounds are compared. One
untimed call under tracemalloc gives the call's peak extra memory. Then np.copyto's own scaling
with threads at each size (a second CSV beside the first, *_memcpy_threads.csv). Writes the CSVs
(--csv) and, with --quick, prints a table; it checks no thresholds.

Run from the repository root: python benchmarks/sweep.py [--quick] [--csv PATH] [--family NAME]
"""
import argparse
import csv
import math
import os
import statistics
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import numpy as np

# Run as a script, the repository root is not on sys.path, and the benchmark helpers import as
# ``benchmarks.*`` (the way pytest sees them).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import npupack  # noqa: E402
from benchmarks.bench_winograd_sparse import _weights as sparse_weights  # noqa: E402
from benchmarks.conftest import _timed  # noqa: E402
from npupack import horizon as hz  # noqa: E402
from npupack import kneron as kn  # noqa: E402
from npupack import openvino as ov  # noqa: E402
from npupack.nvdla import (compress_weights, decompress_weights, feature_strides, pack_feature,  # noqa: E402
                           pack_pixels, pack_weights, pixel_line_strides, weights_nbytes)

KB, MB = 1 << 10, 1 << 20
FULL_SIZES = [round(4 * KB * 2 ** (i / 2)) for i in range(33)]  # 4 KB .. 256 MB
QUICK_SIZES = [64 * KB, 4 * MB, 32 * MB]
# Past both last-level caches a warm-up call leaves nothing behind for the timed one, and it
# would double the time of the largest points.
WARM_LIMIT = 64 * MB
FIELDS = ["family", "case", "shape", "dtype", "threads", "out_bytes", "npupack_s", "memcpy_s", "gbps",
          "memcpy_gbps", "ratio", "peak_bytes"]


class Pools:
    """Random input values, made once and handed out as views: drawing a fresh 256 MB tensor for
    every point would cost more than timing it. Values are finite (fp16 weights refuse NaN)."""

    def __init__(self, nbytes, seed):
        self.nbytes = nbytes
        self.seed = seed
        self._pools = {}

    def get(self, dtype, shape):
        dtype = np.dtype(dtype)
        n = math.prod(shape)
        if n * dtype.itemsize > self.nbytes:
            raise ValueError(f"input of {n * dtype.itemsize} bytes exceeds the {self.nbytes}-byte pool")
        if dtype.name not in self._pools:
            rng = np.random.default_rng(self.seed)
            count = self.nbytes // dtype.itemsize
            if dtype.kind == "f":
                pool = rng.standard_normal(count, dtype=np.float32).astype(dtype)
            else:
                pool = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, count, dtype=dtype, endpoint=True)
            self._pools[dtype.name] = pool
        return self._pools[dtype.name][:n].reshape(shape)


def _loguniform(rng, lo, hi):
    lo, hi = max(lo, 1.0), max(hi, 1.0)
    return max(1, int(round(math.exp(rng.uniform(math.log(lo), math.log(max(hi, lo)))))))


def _split(rng, elements, n, spread=8.0):
    """``n`` random factors whose product is about ``elements``, each within ``spread`` times of
    the balanced value, so that shapes vary without degenerating into one long axis."""
    dims = []
    for k in range(n, 1, -1):
        mean = max(elements, 1) ** (1 / k)
        d = min(_loguniform(rng, mean / spread, mean * spread), max(int(elements), 1))
        dims.append(d)
        elements = max(elements / d, 1)
    dims.append(max(1, int(round(elements))))
    return dims


def _solve(nbytes, shape, axis, target):
    """``shape`` with dimension ``axis`` chosen so that ``nbytes(shape)`` is close to ``target``.
    The unit is measured at 64, so blocked dimensions (16, 32, 64) count their padding."""
    probe = list(shape)
    probe[axis] = 64
    unit = nbytes(tuple(probe)) / 64
    probe[axis] = max(1, int(round(target / unit)))
    return tuple(probe)


class Point:
    """One prepared call: ``run()`` is the npupack call; ``result_bytes`` is the size of the array
    the call allocates for its output (0 when it writes into ``out``)."""

    def __init__(self, shape, dtype, out_bytes, run, in_bytes, result_bytes=0):
        self.shape, self.dtype, self.out_bytes, self.run = shape, np.dtype(dtype).name, out_bytes, run
        self.in_bytes, self.result_bytes = in_bytes, result_bytes


# ---------------------------------------------------------------------- families

def dc(k, dtype):
    es = np.dtype(dtype).itemsize
    precision = {"int8": "int8", "int16": "int16", "float16": "fp16"}[np.dtype(dtype).name]

    def make(rng, target, pools, out):
        kk, cc = _split(rng, target / (es * k * k), 2)
        shape = _solve(lambda s: weights_nbytes(s, precision=precision), (kk, cc, k, k), 1, target)
        w = pools.get(dtype, shape)
        nbytes = weights_nbytes(shape, precision=precision)
        buf = out[:nbytes]
        return Point(shape, dtype, nbytes, lambda: pack_weights(w, out=buf), w.nbytes)
    return make


def depthwise(dtype):
    es = np.dtype(dtype).itemsize
    precision = {"int8": "int8", "float16": "fp16"}[np.dtype(dtype).name]

    def make(rng, target, pools, out):
        r = int(rng.choice([3, 5]))
        mult = int(rng.choice([1, 2]))  # channel multiplier: K = mult * groups
        g = max(1, int(round(math.sqrt(target / (mult * r * r * es)))))
        shape = (mult * g, 1, r, r)
        w = pools.get(dtype, shape)
        nbytes = weights_nbytes(shape, precision=precision, groups=g)
        buf = out[:nbytes]
        return Point(shape, dtype, nbytes, lambda: pack_weights(w, groups=g, out=buf), w.nbytes)
    return make


def image_weights(fmt, c):
    def make(rng, target, pools, out):
        r = int(rng.choice([3, 5, 7]))
        nb = lambda s: weights_nbytes(s, precision="int8", kind="image", pixel_format=fmt)  # noqa: E731
        shape = _solve(nb, (1, c, r, r), 0, target)
        w = pools.get(np.int8, shape)
        nbytes = nb(shape)
        buf = out[:nbytes]
        return Point(shape, np.int8, nbytes, lambda: pack_weights(w, kind="image", pixel_format=fmt, out=buf),
                     w.nbytes)
    return make


def winograd(dtype):
    es = np.dtype(dtype).itemsize
    precision = {"int8": "int8", "float16": "fp16"}[np.dtype(dtype).name]

    def make(rng, target, pools, out):
        nb = lambda s: weights_nbytes(s, precision=precision, kind="winograd")  # noqa: E731
        kk, cc = _split(rng, target / (es * 16), 2)
        shape = _solve(nb, (kk, cc, 3, 3), 0, target)
        w = pools.get(dtype, shape)
        nbytes = nb(shape)
        buf = out[:nbytes]
        return Point(shape, dtype, nbytes, lambda: pack_weights(w, kind="winograd", out=buf), w.nbytes)
    return make


def _sparse_stream(rng, target, precision):
    """A packed DC stream of 3x3 weights with half of them zero (the benchmark's weights)."""
    es = {"int8": 1, "fp16": 2}[precision]
    kk, cc = _split(rng, target / (es * 9), 2)
    ws = pack_weights(sparse_weights((kk, cc, 3, 3), precision, 0.5, seed=int(rng.integers(2**31))))
    return (kk, cc, 3, 3), ws.weight[:ws.meaningful_bytes], ws.kernel_group_elements


def compress(precision):
    def make(rng, target, pools, out):
        shape, stream, group = _sparse_stream(rng, target, precision)
        _, wmb, wgs = compress_weights(stream, precision=precision, kernel_group_elements=group)
        # DATA goes to ``out``; WMB and WGS, new arrays on every call, are output as well.
        return Point(shape, np.int8 if precision == "int8" else np.float16, stream.size,
                     lambda: compress_weights(stream, precision=precision, kernel_group_elements=group, out=out),
                     stream.size, result_bytes=wmb.nbytes + wgs.nbytes)
    return make


def decompress(precision):
    def make(rng, target, pools, out):
        shape, stream, group = _sparse_stream(rng, target, precision)
        data, wmb, _ = compress_weights(stream, precision=precision, kernel_group_elements=group)
        n = stream.size // {"int8": 1, "fp16": 2}[precision]
        buf = out[:stream.size]
        return Point(shape, np.int8 if precision == "int8" else np.float16, stream.size,
                     lambda: decompress_weights(data, wmb, precision=precision, n_elements=n, out=buf),
                     data.nbytes + wmb.nbytes)
    return make


def feature(dtype):
    es = np.dtype(dtype).itemsize
    precision = {"int8": "int8", "float16": "fp16"}[np.dtype(dtype).name]

    def make(rng, target, pools, out):
        c, h, w = _split(rng, target / es, 3)
        nb = lambda s: feature_strides(s, precision).nbytes  # noqa: E731
        shape = _solve(nb, (1, c, h, w), 2, target)
        x = pools.get(dtype, shape)
        nbytes = nb(shape)
        buf = out[:nbytes]
        return Point(shape, dtype, nbytes, lambda: pack_feature(x, out=buf), x.nbytes)
    return make


def pixels(fmt, comps):
    def make(rng, target, pools, out):
        h, w = _split(rng, target / comps, 2)
        nb = lambda s: s[0] * sum(pixel_line_strides(fmt, s[1]))  # noqa: E731
        shape = _solve(nb, (h, w, comps), 0, target)
        img = pools.get(np.uint8, shape)
        strides = pixel_line_strides(fmt, shape[1])
        bufs, at = [], 0
        for ls in strides:
            bufs.append(out[at:at + shape[0] * ls])
            at += shape[0] * ls
        bufs = tuple(bufs)
        return Point(shape, np.uint8, at, lambda: pack_pixels(img, fmt, out=bufs), img.nbytes)
    return make


def _blocked(nb, pack, dtype, kernel, batches):
    """Activations (b, f, y, x) with b drawn from `batches` and y solved, or weights
    (o, i, kernel, kernel) with i solved; `nb(shape)` sizes and `pack(x, out)` packs them."""
    es = np.dtype(dtype).itemsize

    def make(rng, target, pools, out):
        if kernel is None:
            b = int(rng.choice(batches)) if len(batches) > 1 else batches[0]  # same draws as a fixed b
            f, y, x = _split(rng, target / (es * b), 3)
            shape = _solve(nb, (b, f, y, x), 2, target)
        else:
            o, i = _split(rng, target / (es * kernel * kernel), 2)
            shape = _solve(nb, (o, i, kernel, kernel), 1, target)
        x = pools.get(dtype, shape)
        nbytes = nb(shape)
        buf = out[:nbytes]
        return Point(shape, dtype, nbytes, lambda: pack(x, buf), x.nbytes)
    return make


def openvino(name, dtype, kernel=None):
    return _blocked(lambda s: ov.nbytes(name, s, dtype), lambda x, buf: ov.pack(x, name, out=buf), dtype, kernel,
                    [1, 1, 2, 4])


def onednn(tag, dtype, kernel=None):
    layout = npupack.Layout.parse(tag)
    return _blocked(lambda s: layout.nbytes(s, dtype), lambda x, buf: npupack.pack(x, tag, out=buf), dtype, kernel,
                    [1])


def kneron(chip):
    def make(rng, target, pools, out):
        def kw(s):
            return {"chip": chip, "stride_npu": kn.predict_stride_npu(s, "1W16C8B") if chip == "kl730" else None}
        nb = lambda s: kn.nbytes("1W16C8B", s, **kw(s))  # noqa: E731
        c, h, w = _split(rng, target, 3)
        shape = _solve(nb, (1, c, h, w), 2, target)
        x = pools.get(np.int8, shape)
        nbytes, args = nb(shape), kw(shape)
        buf = out[:nbytes]
        return Point(shape, np.int8, nbytes, lambda: kn.pack(x, "1W16C8B", out=buf, **args), x.nbytes)
    return make


def horizon(role):
    def make(rng, target, pools, out):
        def aligned(s):
            return hz.aligned_shape(s, np.int8, role=role)
        nb = lambda s: hz.nbytes(s, np.int8, aligned_shape=aligned(s))  # noqa: E731
        if role == "input":  # image-like inputs of 1 to 4 channels: H and W are aligned, not C
            c = int(rng.choice([1, 3, 4]))
            h, w = _split(rng, target / c, 2)
        else:
            h, w, c = _split(rng, target, 3)
        shape = _solve(nb, (1, h, w, c), 1, target)
        x = pools.get(np.int8, shape)
        nbytes, al = nb(shape), aligned(shape)
        buf = out[:nbytes]
        return Point(shape, np.int8, nbytes, lambda: hz.pad(x, aligned_shape=al, out=buf), x.nbytes)
    return make


# family -> {case: maker}; a family is one panel of the plot and one line of the table.
FAMILIES = {
    "nvdla dc int8": {f"{k}x{k}": dc(k, np.int8) for k in (1, 3, 5)},
    "nvdla dc int16": {f"{k}x{k}": dc(k, np.int16) for k in (1, 3, 5)},
    "nvdla dc fp16": {f"{k}x{k}": dc(k, np.float16) for k in (1, 3, 5)},
    "nvdla depthwise": {"int8": depthwise(np.int8), "fp16": depthwise(np.float16)},
    "nvdla image weights": {"T_A8B8G8R8 C=3": image_weights("T_A8B8G8R8", 3),
                            "T_Y8___U8V8_N444 C=3": image_weights("T_Y8___U8V8_N444", 3)},
    "nvdla winograd": {"int8": winograd(np.int8), "fp16": winograd(np.float16)},
    "nvdla compress": {"int8": compress("int8"), "fp16": compress("fp16")},
    "nvdla decompress": {"int8": decompress("int8"), "fp16": decompress("fp16")},
    "nvdla feature": {"int8": feature(np.int8), "fp16": feature(np.float16)},
    "nvdla pixels": {"T_A8B8G8R8": pixels("T_A8B8G8R8", 4), "T_Y8___U8V8_N444": pixels("T_Y8___U8V8_N444", 3),
                     "T_R8G8B8X8 RGB": pixels("T_R8G8B8X8", 3)},
    "openvino data": {"b_fs_yx_fsv16 fp16": openvino("b_fs_yx_fsv16", np.float16),
                      "b_fs_yx_fsv32 int8": openvino("b_fs_yx_fsv32", np.int8)},
    "openvino weights": {"os_is_yx_isv16_osv16 1x1 fp16": openvino("os_is_yx_isv16_osv16", np.float16, 1),
                         "os_is_yx_isv16_osv16 3x3 fp16": openvino("os_is_yx_isv16_osv16", np.float16, 3)},
    "onednn": {"nChw16c f32": onednn("nChw16c", np.float32),
               "OIhw16i16o 3x3 f32": onednn("OIhw16i16o", np.float32, 3)},
    "kneron 1W16C8B": {"kl720": kneron("kl720"), "kl730": kneron("kl730")},
    "horizon pad": {"nhwc int8 output": horizon("output"), "nhwc int8 input": horizon("input")},
}


# ---------------------------------------------------------------------- measuring

def _peak_extra(point):
    """Peak bytes NumPy (and Python) allocate during one call, beyond the input and the output:
    the array a call allocates for its result is the output, not extra. A first call outside the
    trace builds what a shape's first call caches (plans, descriptors)."""
    point.run()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = point.run()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    del result
    return max(0, peak - point.result_bytes)


def _time_call(fn, warm):
    if warm:
        return _timed(fn, ())
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def alternate(run, copy, warm, budget, min_rounds, max_rounds):
    """npupack and np.copyto in turns (each round starts with the other one than the last), until
    ``min_rounds`` have run and the budget is spent (or ``max_rounds``): a slow phase of the
    machine then slows both. Returns the medians of each one's times and of the per-round ratios
    (memcpy time / npupack time)."""
    ours, theirs, ratios = [], [], []
    end = time.perf_counter() + budget
    while len(ratios) < min_rounds or (len(ratios) < max_rounds and time.perf_counter() < end):
        if len(ratios) % 2:
            t_copy, t_ours = _time_call(copy, warm), _time_call(run, warm)
        else:
            t_ours, t_copy = _time_call(run, warm), _time_call(copy, warm)
        ours.append(t_ours)
        theirs.append(t_copy)
        ratios.append(t_copy / t_ours)
    return statistics.median(ours), statistics.median(theirs), statistics.median(ratios)


def sweep(families, sizes, threads, args, writer, table):
    largest = int(max(sizes) * 1.25) + MB  # the solved shapes land near, not on, the target
    pools = Pools(largest, args.seed)
    # The npupack output (padded layouts may exceed the target), line-aligned as npupack's own
    # results are, or --offset bytes past a line as an np.empty buffer (docs/performance.md §1.1, 8).
    out = npupack.aligned_empty(largest * 2 + 64)[args.offset:args.offset + largest * 2]
    dst, src = np.empty(largest * 2, np.uint8), np.ones(largest * 2, np.uint8)
    out.fill(0)
    dst.fill(0)
    for family in families:
        for case, make in FAMILIES[family].items():
            if not table:
                print(f"{time.strftime('%H:%M:%S')} {family} {case}", file=sys.stderr, flush=True)
            # The case's own generator: selecting families does not change the shapes of the rest.
            rng = np.random.default_rng([args.seed, zlib.crc32(f"{family}/{case}".encode())])
            for target in sizes:
                point = make(rng, target, pools, out)
                n = point.out_bytes
                if n > out.size:
                    raise ValueError(f"{family} {case} {point.shape}: {n} output bytes exceed the buffer")
                d, s = dst[:n], src[:n]
                copy = lambda: np.copyto(d, s)  # noqa: E731
                with npupack.num_threads(1):
                    peak = _peak_extra(point)
                warm = n < WARM_LIMIT
                for t in threads:
                    with npupack.num_threads(t):
                        t_ours, t_copy, ratio = alternate(point.run, copy, warm, args.budget, args.min_rounds,
                                                          args.max_rounds)
                    row = {"family": family, "case": case, "shape": "x".join(map(str, point.shape)),
                           "dtype": point.dtype, "threads": t, "out_bytes": n,
                           "npupack_s": f"{t_ours:.3g}", "memcpy_s": f"{t_copy:.3g}",
                           "gbps": f"{n / t_ours / 1e9:.3g}", "memcpy_gbps": f"{n / t_copy / 1e9:.3g}",
                           "ratio": f"{ratio:.3g}", "peak_bytes": peak}
                    writer.writerow(row)
                    if table:
                        extra = peak / (point.in_bytes + n)
                        print(f"{family:20s} {case:30s} {_size(n):>9s} {t:2d} {n / t_ours / 1e9:8.2f} "
                              f"{n / t_copy / 1e9:8.2f} {ratio:6.2f} {extra:7.1%}  {row['shape']}", flush=True)


def memcpy_scaling(sizes, threads, args, path):
    """np.copyto's own scaling with threads: at each sweep size from 8 MiB, the copy split into ``threads``
    contiguous parts on as many Python threads (NumPy drops the GIL for the copy) against one
    copy of the whole, in alternation. The packers' second-thread gain is read beside it: where
    the copy itself does not scale (memory-bound outputs), no packer can. Writes ``path`` (CSV)."""
    from concurrent.futures import ThreadPoolExecutor

    largest = max(sizes)
    src, dst = np.ones(largest, np.uint8), np.zeros(largest, np.uint8)
    with open(path, "w", newline="") as f, ThreadPoolExecutor(threads) as pool:
        writer = csv.DictWriter(f, fieldnames=["out_bytes", "threads", "one_gbps", "threads_gbps", "scaling"])
        writer.writeheader()
        # Below 8 MiB the pool's hand-off costs more than the copy it splits; the issue's
        # thread target starts at 8 MB anyway.
        for n in (n for n in sizes if n >= 8 * MB):
            d, s = dst[:n], src[:n]
            cut = [n * i // threads for i in range(threads + 1)]
            parts = [(d[a:b], s[a:b]) for a, b in zip(cut, cut[1:])]
            one = lambda: np.copyto(d, s)  # noqa: E731
            many = lambda: list(pool.map(lambda ds: np.copyto(*ds), parts))  # noqa: E731
            t_many, t_one, scaling = alternate(many, one, n < WARM_LIMIT, args.budget, args.min_rounds,
                                               args.max_rounds)
            writer.writerow({"out_bytes": n, "threads": threads, "one_gbps": f"{n / t_one / 1e9:.3g}",
                             "threads_gbps": f"{n / t_many / 1e9:.3g}", "scaling": f"{scaling:.3g}"})
            if args.quick:
                print(f"{'memcpy':20s} {f'{threads} threads / 1':30s} {_size(n):>9s} {threads:2d} "
                      f"{n / t_many / 1e9:8.2f} {n / t_one / 1e9:8.2f} {scaling:6.2f}", flush=True)


def memcpy_csv(path):
    """Where memcpy_scaling writes, next to the sweep's CSV."""
    path = Path(path)
    return path.with_name(f"{path.stem}_memcpy_threads{path.suffix}")


def _size(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", MB), ("KiB", KB)):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n} B"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="three sizes (64 KB, 4 MB, 32 MB) per case, print a table")
    p.add_argument("--csv", default=str(Path(__file__).resolve().parent / "results" / "sweep.csv"),
                   help="where to write the CSV (default: benchmarks/results/sweep.csv)")
    p.add_argument("--family", action="append", choices=list(FAMILIES), metavar="NAME",
                   help="only this family (repeatable); default: all of them")
    p.add_argument("--seed", type=int, default=2024, help="seed of the random shapes and values")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds of alternation per point and thread count (default 0.15, --quick 0.1)")
    p.add_argument("--min-rounds", type=int, default=5, help="rounds per point at least, whatever the budget")
    p.add_argument("--max-rounds", type=int, default=100, help="rounds per point at most")
    p.add_argument("--offset", type=int, default=0, choices=range(64), metavar="0-63",
                   help="bytes past a 64-byte line where the npupack output starts (NumPy's large "
                        "np.empty buffers: 16); default 0")
    p.add_argument("--threads", type=int, default=None,
                   help="the 'all threads' count (default: the CPUs this process may run on)")
    args = p.parse_args(argv)
    if args.budget is None:
        args.budget = 0.1 if args.quick else 0.15
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    all_threads = args.threads or cpus
    threads = sorted({1, all_threads})
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    families = args.family or list(FAMILIES)
    path = Path(args.csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.quick:
        print(f"{'family':20s} {'case':30s} {'output':>9s} {'th':>2s} {'GB/s':>8s} {'memcpy':>8s} "
              f"{'ratio':>6s} {'extra':>7s}  shape")
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        sweep(families, sizes, threads, args, writer, table=args.quick)
    if all_threads > 1:
        memcpy_scaling(sizes, all_threads, args, memcpy_csv(path))
    # Other programs on the machine skew the figures (the all-threads ones most): the load
    # average says how busy it was.
    load = os.getloadavg() if hasattr(os, "getloadavg") else ()
    print(f"wrote {path} in {time.perf_counter() - start:.0f} s (threads {threads}; "
          f"load average {', '.join(f'{v:.2f}' for v in load)})")


if __name__ == "__main__":
    main()
