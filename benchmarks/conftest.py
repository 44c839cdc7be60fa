"""Collects the median and the best time of every benchmark and prints, per case, GB/s of npupack,
the NumPy reference and np.copyto of the same bytes, and the ratios, in one run: a table of
medians, then the ratios of best times. On a shared host the neighbours only ever add time, and
they slow compute-bound kernels more than np.copyto, so the best times are the ones that compare
the code; the medians show what a run on that host gave."""
import collections
import os

# One thread everywhere: the figures are single-thread, and an idle OpenBLAS pool spinning on the
# second core skews them.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

import npupack  # noqa: E402


@pytest.fixture(autouse=True)
def _single_thread():
    """The issues' targets are single-thread figures: every benchmark runs with one npupack
    thread unless it sets its own count (bench_threads, bench_zoo) inside."""
    with npupack.num_threads(1):
        yield

_results = collections.defaultdict(dict)  # case -> impl -> (seconds, bytes)
_best = collections.defaultdict(dict)  # case -> impl -> best seconds
_items = {}  # case -> number of layers (or other items) one call handles


@pytest.fixture
def measure(benchmark):
    def run(case, impl, nbytes, fn, *args, items=None):
        if items:
            _items[case] = items
        benchmark.group = case
        benchmark.extra_info["bytes"] = nbytes
        benchmark(fn, *args)
        median = benchmark.stats.stats.median
        benchmark.extra_info["GB/s"] = nbytes / median / 1e9
        _results[case][impl] = (median, nbytes)
        _best[case][impl] = benchmark.stats.stats.min

    return run


def pytest_terminal_summary(terminalreporter):
    if not _results:
        return
    tr = terminalreporter
    tr.section("npupack throughput (median; GB/s of packed output bytes)")
    impls = ("npupack", "numpy", "onednn", "memcpy")
    tr.write_line(f"{'case':52s} " + " ".join(f"{k:>8s}" for k in impls) +
                  f" {'x numpy':>8s} {'x onednn':>8s} {'x memcpy':>8s}")
    for case, r in _results.items():
        gbs = {k: b / t / 1e9 for k, (t, b) in r.items()}
        ours = r.get("npupack")
        line = f"{case:52s} " + " ".join(f"{gbs[k]:8.2f}" if k in gbs else f"{'-':>8s}" for k in impls)
        for other, fmt in (("numpy", "8.1f"), ("onednn", "8.2f"), ("memcpy", "8.2f")):
            line += f" {r[other][0] / ours[0]:{fmt}}" if ours and other in r else f" {'-':>8s}"
        tr.write_line(line)
        if "call" in r:
            tr.write_line(f"{'':44s} per-call time {r['call'][0] * 1e6:.2f} us")
        if case in _items and ours:
            rate = {k: _items[case] / t for k, (t, _) in r.items() if k in ("npupack", "numpy")}
            tr.write_line(f"{'':44s} layers/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in rate.items()))
    tr.section("npupack ratios of best times (the same runs)")
    tr.write_line(f"{'case':52s} {'npupack':>8s} {'x numpy':>8s} {'x onednn':>8s} {'x memcpy':>8s}")
    for case, best in _best.items():
        ours = best.get("npupack")
        if ours is None:
            continue
        line = f"{case:52s} {_results[case]['npupack'][1] / ours / 1e9:8.2f}"
        for other, fmt in (("numpy", "8.1f"), ("onednn", "8.2f"), ("memcpy", "8.2f")):
            line += f" {best[other] / ours:{fmt}}" if other in best else f" {'-':>8s}"
        tr.write_line(line)


@pytest.fixture(scope="session")
def ppocr_layers():
    from npupack.model import load_onnx
    from npupack.zoo import fetch_model

    return [layer for layer in load_onnx(fetch_model("ppocr-det")) if layer.op_type == "Conv"]
