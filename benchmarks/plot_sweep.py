"""Plot of the size sweep (benchmarks/sweep.py): GB/s of packed output against output size, one panel
per packer family, np.copyto of the same bytes as the reference line, one line per case and thread
count. With --table, also prints the Markdown table of docs/performance.md: per family, the median
ratio to memcpy past the caches (>= 32 MiB) and in L3 (2 to 32 MiB) per thread count, and the worst
ratio from 2 MiB up and at any size, with where it was measured; then, from the sweep's
*_memcpy_threads.csv, each family's gain from all threads beside np.copyto's own.

Run from the repository root: python benchmarks/plot_sweep.py [CSV] [--out PNG] [--table]
"""
import argparse
import csv
import io
import math
import statistics
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MB = 1 << 20
L2, L3 = 1 * MB, 32 * MB  # L2 per core and the L3 of the machine class the figures are from


def read(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            for k in ("threads", "out_bytes", "peak_bytes"):
                r[k] = int(r[k])
            for k in ("npupack_s", "memcpy_s", "gbps", "memcpy_gbps", "ratio"):
                r[k] = float(r[k])
            rows.append(r)
    return rows


def _families(rows):
    return list(dict.fromkeys(r["family"] for r in rows))


def _size(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", MB), ("KiB", 1 << 10)):
        if n >= div:
            v = n / div
            return f"{v:.0f} {unit}" if v >= 10 else f"{v:.2g} {unit}"
    return f"{n} B"


def plot(rows, out):
    import matplotlib  # only this script needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    families = _families(rows)
    threads = sorted({r["threads"] for r in rows})
    ncols = 3
    nrows = math.ceil(len(families) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.3 * nrows), squeeze=False)
    styles = {t: s for t, s in zip(threads, ("-", "--", ":", "-."))}
    ticks = [4 << 10, 64 << 10, 1 * MB, 16 * MB, 256 * MB]
    for ax, family in zip(axes.flat, families):
        fam = [r for r in rows if r["family"] == family]
        cases = list(dict.fromkeys(r["case"] for r in fam))
        for i, case in enumerate(cases):
            color = f"C{i}"
            for t in threads:
                pts = sorted((r["out_bytes"], r["gbps"]) for r in fam if r["case"] == case and r["threads"] == t)
                if pts:
                    ax.plot(*zip(*pts), styles[t], color=color, lw=1.3, marker=".", ms=3,
                            label=f"{case}, {t} thread{'s' if t > 1 else ''}")
        # memcpy is measured at every point; the median per half octave draws one reference line
        # for the family's cases, whose sizes differ slightly.
        bins = defaultdict(list)
        for r in fam:
            bins[round(2 * math.log2(r["out_bytes"]))].append((r["out_bytes"], r["memcpy_gbps"]))
        ref = [(statistics.median(x for x, _ in v), statistics.median(y for _, y in v)) for _, v in sorted(bins.items())]
        ax.plot(*zip(*ref), "-", color="black", lw=1.8, alpha=0.6, label="np.copyto (memcpy)")
        for edge in (L2, L3):
            ax.axvline(edge, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([_size(t) for t in ticks])
        ax.set_ylim(bottom=0)
        ax.set_title(family, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, loc="best")
        ax.set_ylabel("GB/s of output", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(families):]:
        ax.axis("off")
    fig.suptitle("npupack throughput vs output size (dotted: 1 MiB L2 per core, 32 MiB L3)", fontsize=12)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    out.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=80)
    plt.close(fig)
    # Line art needs few colours: a palette PNG keeps the committed picture small.
    from PIL import Image  # installed with matplotlib

    Image.open(buf).convert("RGB").quantize(colors=64).save(out, optimize=True)


def _ratio(v):
    return f"{v:.2f}" if v >= 0.1 else f"{v:.2g}"


def _nominal(n):
    """The sweep size nearest to ``n`` (sizes are half an octave apart): a random shape lands a few
    percent off its target, and a 32 MiB point that came out at 31.8 MiB is still past the cache."""
    return 2 ** (round(2 * math.log2(n)) / 2)


def table(rows):
    """Markdown: per family and thread count the median ratio over the points (all cases) in each
    size range, and the lowest ratio from 2 MiB up and at any size, with its case, size and threads."""
    threads = sorted({r["threads"] for r in rows})
    ranges = (("≥ 32 MiB", L3, math.inf), ("2–32 MiB", 2 * MB, L3))
    head = ["Family"] + [f"{name}, {t} thread{'s' if t > 1 else ''}" for name, _, _ in ranges for t in threads]
    worst_heads = ["Worst from 2 MiB up (case, output, threads)", "Worst at any size"]
    lines = ["| " + " | ".join(head + worst_heads) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(head) - 1) + ["---"] * len(worst_heads)) + "|"]
    for family in _families(rows):
        fam = [r for r in rows if r["family"] == family]
        cells = [family]
        for _, lo, hi in ranges:
            for t in threads:
                v = [r["ratio"] for r in fam if r["threads"] == t and lo <= _nominal(r["out_bytes"]) < hi]
                cells.append(f"{statistics.median(v):.2f}" if v else "–")
        for points in ([r for r in fam if _nominal(r["out_bytes"]) >= 2 * MB], fam):
            w = min(points, key=lambda r: r["ratio"]) if points else None
            cells.append(f"{_ratio(w['ratio'])} ({w['case']}, {_size(w['out_bytes'])}, {w['threads']})" if w else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def scaling_table(rows, copy_rows):
    """Markdown: per family, the median over its points of all-threads GB/s / one-thread GB/s, in
    L3 from 8 MiB and past it, beside np.copyto's own scaling at the same sizes (copy_rows: the
    sweep's *_memcpy_threads.csv)."""
    t_all = max(r["threads"] for r in rows)
    ranges = (("8–32 MiB", 8 * MB, L3), ("≥ 32 MiB", L3, math.inf))

    def median(v):
        return f"{statistics.median(v):.2f}" if v else "–"

    lines = ["| Family | " + " | ".join(f"{t_all} threads / 1, {name}" for name, _, _ in ranges) + " |",
             "|---|" + "---:|" * len(ranges)]
    copy = [median([float(r["scaling"]) for r in copy_rows if lo <= _nominal(int(r["out_bytes"])) < hi])
            for _, lo, hi in ranges]
    lines.append("| np.copyto (memcpy) | " + " | ".join(copy) + " |")
    for family in _families(rows):
        one = {(r["case"], r["shape"]): r["gbps"] for r in rows if r["family"] == family and r["threads"] == 1}
        cells = []
        for _, lo, hi in ranges:
            v = [r["gbps"] / one[(r["case"], r["shape"])] for r in rows
                 if r["family"] == family and r["threads"] == t_all and (r["case"], r["shape"]) in one
                 and lo <= _nominal(r["out_bytes"]) < hi]
            cells.append(median(v))
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv", nargs="?", default=str(ROOT / "benchmarks" / "results" / "sweep.csv"),
                   help="the sweep's CSV (default: benchmarks/results/sweep.csv)")
    p.add_argument("--out", default=str(ROOT / "docs" / "img" / "performance.png"),
                   help="the PNG to write (default: docs/img/performance.png)")
    p.add_argument("--table", action="store_true", help="also print the Markdown table of the ratios")
    p.add_argument("--no-plot", action="store_true", help="write no PNG (with --table: the table alone)")
    args = p.parse_args(argv)
    rows = read(args.csv)
    if not args.no_plot:
        plot(rows, Path(args.out))
        print(f"wrote {args.out}")
    if args.table:
        print(table(rows))
        copy_csv = Path(args.csv).with_name(f"{Path(args.csv).stem}_memcpy_threads.csv")
        if copy_csv.exists() and max(r["threads"] for r in rows) > 1:
            with open(copy_csv, newline="") as f:
                print()
                print(scaling_table(rows, list(csv.DictReader(f))))


if __name__ == "__main__":
    main()
