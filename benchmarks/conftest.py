"""Collects the median and the best time of every benchmark and prints, per case, GB/s of npupack,
the NumPy reference and np.copyto of the same bytes, and the ratios, in one run: a table of
medians, then the ratios of best times. On a shared host the neighbours only ever add time, and
they slow compute-bound kernels more than np.copyto, so the best times are the ones that compare
the code; the medians show what a run on that host gave.

Each case's implementations are pytest-benchmark tests of their own, run one after another, so a
neighbour that loads the host during one of them moves that case's ratios (by up to 2x on the CI
machine). A third table compares them in alternation: once the last implementation of a case has
run, npupack's call and each other implementation's call are timed again in turns (each timed
call right after an untimed one, so that it is as warm as in the pytest-benchmark loop, not run
on caches the other implementation filled), and the table gives the median over rounds of each
round's ratio, which a slow phase of the host moves for both implementations together."""
import collections
import os
import statistics
import time

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
_calls = {}  # the case being measured -> impl -> its call, until the next case starts
_pending = []  # that case's name (empty before the first)
_paired = collections.defaultdict(dict)  # case -> impl -> (median ratio npupack/impl speed, rounds)

# Alternation of npupack with one other implementation: at least MIN_ROUNDS rounds, then more
# until BUDGET_S seconds have passed or MAX_ROUNDS rounds have run. Each pair has its own budget,
# so that a slow implementation (oneDNN's fp16 reorder: ~100x) leaves the others their rounds.
MIN_ROUNDS, MAX_ROUNDS, BUDGET_S = 5, 200, 0.5


def _timed(fn, args):
    fn(*args)  # untimed: the timed call finds the caches as its own last call left them
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def _interleave(case, calls):
    """Times npupack against each other implementation of one case in alternation (each round
    starting with the other one than the last); stores per implementation the median over rounds
    of (its time / npupack's time in the same round) and the number of rounds."""
    if "npupack" not in calls:
        return
    ours = calls["npupack"]
    for impl, theirs in calls.items():
        if impl == "npupack":
            continue
        ratios = []
        end = time.perf_counter() + BUDGET_S
        while len(ratios) < MIN_ROUNDS or (len(ratios) < MAX_ROUNDS and time.perf_counter() < end):
            if len(ratios) % 2:
                t_theirs, t_ours = _timed(*theirs), _timed(*ours)
            else:
                t_ours, t_theirs = _timed(*ours), _timed(*theirs)
            ratios.append(t_theirs / t_ours)
        _paired[case][impl] = (statistics.median(ratios), len(ratios))


def _flush():
    if _pending:
        with npupack.num_threads(1):  # at session end the autouse fixture has already exited
            _interleave(_pending[0], _calls)
    _calls.clear()
    _pending.clear()


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
        if _pending[:1] != [case]:
            _flush()
            _pending.append(case)
        _calls[impl] = (fn, args)

    return run


def pytest_sessionfinish(session):
    _flush()


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
    if not _paired:
        return
    tr.section("npupack ratios in alternation (median over rounds of each round's ratio)")
    tr.write_line(f"{'case':52s} {'x numpy':>8s} {'x onednn':>8s} {'x memcpy':>8s}  rounds")
    for case, ratios in _paired.items():
        line = f"{case:52s}"
        for other, fmt in (("numpy", "8.1f"), ("onednn", "8.2f"), ("memcpy", "8.2f")):
            line += f" {ratios[other][0]:{fmt}}" if other in ratios else f" {'-':>8s}"
        tr.write_line(line + "  " + "/".join(str(n) for _, n in ratios.values()))


@pytest.fixture(scope="session")
def ppocr_layers():
    from npupack.model import load_onnx
    from npupack.zoo import fetch_model

    return [layer for layer in load_onnx(fetch_model("ppocr-det")) if layer.op_type == "Conv"]
