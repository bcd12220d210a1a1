#!/usr/bin/env python3
"""Charts (and a Markdown table) from slimreduce-bench results.

  plot_bench.py RESULT.json [MORE.json|.csv ...] --out PREFIX [--title TEXT] [--markdown FILE]

Writes PREFIX_speedup.png (speedup over plain MPI_Allreduce vs message size,
one line per compressor) and PREFIX_wire.png (wire bytes per rank per call
vs size, from SlimReduce's counters). Several files may be given, e.g. one run
per top-k ratio: every row carries the baseline measured in its own run.
--markdown writes the rows as a Markdown table (for docs/performance.md).
Needs matplotlib; installs Debian's python3-matplotlib when missing (as root).
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys


def import_pyplot():
    """matplotlib, installing Debian's package and re-running under the
    system python3 if this interpreter lacks it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError:
        pass
    system_python = "/usr/bin/python3"
    if os.environ.get("PLOT_BENCH_REEXEC") != "1" and os.path.exists(system_python):
        probe = subprocess.run([system_python, "-c", "import matplotlib"], capture_output=True)
        if probe.returncode != 0 and os.geteuid() == 0 and shutil.which("apt-get"):
            print("plot_bench: installing python3-matplotlib with apt-get", file=sys.stderr)
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(["apt-get", "install", "-y", "-q", "python3-matplotlib"], env=env,
                           stdout=subprocess.DEVNULL, check=False)
        env = dict(os.environ, PLOT_BENCH_REEXEC="1")
        os.execve(system_python, [system_python] + sys.argv, env)
    sys.exit("plot_bench: needs matplotlib (apt-get install python3-matplotlib)")


NUMBERS = {"ranks", "bytes", "count", "topk_ratio", "time_us", "time_median_us", "algbw_gbs",
           "busbw_gbs", "baseline_us", "speedup", "wire_bytes_per_rank",
           "wire_baseline_per_rank", "savings", "error", "error_first"}


def load(path):
    """(meta, rows) of one JSON or CSV result file, with JSON types."""
    if path.endswith(".json"):
        with open(path) as f:
            meta = json.load(f)
        return meta, meta.pop("rows")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        for key in NUMBERS & row.keys():
            row[key] = float(row[key]) if row[key] not in ("", "null") else None
        row["compressed"] = row["compressed"] in ("1", "true")
    first = rows[0] if rows else {}
    return {"label": first.get("label", ""), "ranks": first.get("ranks"), "environment": ""}, rows


def min_bytes_of(meta):
    found = re.search(r"SLIMREDUCE_MIN_BYTES=(\S+)", meta.get("environment", ""))
    if not found:
        return 65536
    number, unit = re.fullmatch(r"([0-9.]+)([KMGT]?)(?:I?B)?", found.group(1).upper()).groups()
    return int(float(number) * 1024 ** ("KMGT".index(unit) + 1 if unit else 0))


def size_label(n):
    for unit in ("", "K", "M", "G"):
        if n < 1024 or n % 1024:
            return f"{n:g}{unit}"
        n //= 1024
    return f"{n:g}T"


def series(runs):
    """{compressor label: [(bytes, row)]}; a compressor met in two runs keeps the first."""
    lines = {}
    for _, rows in runs:
        seen_here = set()
        for row in rows:
            name = row["compressor"]
            if name in lines and name not in seen_here:
                continue  # "none" of a later run: its baseline is already drawn
            seen_here.add(name)
            lines.setdefault(name, []).append((int(row["bytes"]), row))
    return lines


def decorate(ax, sizes, min_bytes, ylabel):
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_label(s) for s in sizes], rotation=45)
    ax.set_xlabel("message size (bytes, float32)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    if sizes[0] < min_bytes <= sizes[-1]:
        ax.axvline(min_bytes, color="grey", linestyle=":", linewidth=1)
        ax.text(min_bytes, 0.98, " SLIMREDUCE_MIN_BYTES:\n smaller calls pass through",
                transform=ax.get_xaxis_transform(), fontsize=8, color="grey", va="top")


def plot(plt, runs, prefix, title):
    lines = series(runs)
    sizes = sorted({b for points in lines.values() for b, _ in points})
    min_bytes = min_bytes_of(runs[0][0])
    charts = {
        "speedup": ("speedup over plain MPI_Allreduce (x)", "speedup", True),
        "wire": ("wire bytes per rank per call (SlimReduce counters)", "wire_bytes_per_rank", False),
    }
    written = []
    for suffix, (ylabel, key, skip_none) in charts.items():
        fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
        for i, (name, points) in enumerate(lines.items()):
            if skip_none and name == "none":
                continue
            # Same colour per compressor in every chart; markers and dashes
            # keep lines that coincide (fp16 and bf16 wire bytes) visible.
            ax.plot([b for b, _ in points], [r[key] for _, r in points], color=f"C{i}",
                    marker="osD^vx"[i % 6], markersize=9 - i % 6, linestyle=["-", "--"][i % 2],
                    label=name)
        if key == "speedup":
            # Log scale: 0.5x and 2x sit equally far from 1x, and 30x still fits.
            ax.set_yscale("log", base=2)
            ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}x"))
            ax.axhline(1, color="black", linewidth=0.8)
        else:
            ax.set_yscale("log")
        decorate(ax, sizes, min_bytes, ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(title="compressor", loc="best")
        fig.tight_layout()
        path = f"{prefix}_{suffix}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def markdown(runs):
    """Every row of every run, by size; with several runs a column names the
    run (a, b, ...), since each run has its own "none" baseline."""
    several = len(runs) > 1
    head = "| size | " + ("run | " if several else "") + (
        "compressor | compressed | time (ms) | busbw (GB/s) | speedup | "
        "wire/rank (bytes) | savings | error (last) | error (first) | check |")
    out = [head, "|" + "---:|" * (2 if several else 1) + "---|:-:|" + "---:|" * 7 + "---|"]
    rows = [(int(row["bytes"]), i, j, row) for i, (_, rs) in enumerate(runs)
            for j, row in enumerate(rs)]
    err = lambda v: "-" if v is None else f"{v:.2e}"
    for bytes_, i, _, row in sorted(rows, key=lambda item: item[:3]):
        run = f"{'abcdefghij'[i % 10]} | " if several else ""
        out.append(f"| {size_label(bytes_)} | {run}{row['compressor']} | "
                   f"{'yes' if row['compressed'] else 'no'} | {row['time_us'] / 1e3:.3f} | "
                   f"{row['busbw_gbs']:.3f} | {row['speedup']:.2f} | "
                   f"{row['wire_bytes_per_rank']:.0f} | {row['savings']:.3f} | "
                   f"{err(row['error'])} | {err(row['error_first'])} | {row['check']} |")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="+", help="slimreduce-bench --json or --csv files")
    parser.add_argument("--out", help="prefix of the PNG files")
    parser.add_argument("--title", default=None)
    parser.add_argument("--markdown", help="also write the rows as a Markdown table here")
    args = parser.parse_args()
    runs = [load(path) for path in args.results]
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(runs))
    if args.out:
        meta = runs[0][0]
        title = args.title or (f"slimreduce-bench, {meta.get('ranks')} ranks"
                               f"{', ' + meta['label'] if meta.get('label') else ''}")
        for path in plot(import_pyplot(), runs, args.out, title):
            print(f"plot_bench: wrote {path}")


if __name__ == "__main__":
    main()
