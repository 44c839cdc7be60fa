"""Collects the median time of every benchmark and prints, per case, GB/s of npupack, the NumPy
reference and np.copyto of the same bytes, and the ratios, in one run."""
import collections

import pytest

_results = collections.defaultdict(dict)  # case -> impl -> (seconds, bytes)


@pytest.fixture
def measure(benchmark):
    def run(case, impl, nbytes, fn, *args):
        benchmark.group = case
        benchmark.extra_info["bytes"] = nbytes
        benchmark(fn, *args)
        median = benchmark.stats.stats.median
        benchmark.extra_info["GB/s"] = nbytes / median / 1e9
        _results[case][impl] = (median, nbytes)

    return run


def pytest_terminal_summary(terminalreporter):
    if not _results:
        return
    tr = terminalreporter
    tr.section("npupack throughput (median; GB/s of packed output bytes)")
    tr.write_line(f"{'case':44s} {'npupack':>9s} {'numpy':>9s} {'memcpy':>9s} {'x numpy':>8s} {'x memcpy':>8s}")
    for case, r in _results.items():
        gbs = {k: b / t / 1e9 for k, (t, b) in r.items()}
        ours = r.get("npupack")
        line = f"{case:44s} " + " ".join(f"{gbs[k]:9.2f}" if k in gbs else f"{'-':>9s}"
                                        for k in ("npupack", "numpy", "memcpy"))
        if ours and "numpy" in r:
            line += f" {r['numpy'][0] / ours[0]:8.1f}"
        else:
            line += f" {'-':>8s}"
        if ours and "memcpy" in r:
            line += f" {r['memcpy'][0] / ours[0]:8.2f}"
        tr.write_line(line)
        if "call" in r:
            tr.write_line(f"{'':44s} per-call time {r['call'][0] * 1e6:.2f} us")


@pytest.fixture(scope="session")
def ppocr_layers():
    from npupack.model import load_onnx
    from npupack.zoo import fetch_model

    return [layer for layer in load_onnx(fetch_model("ppocr-det")) if layer.op_type == "Conv"]
