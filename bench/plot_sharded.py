#!/usr/bin/env python3
"""plot_sharded.py OUTPUT.txt PICTURE.png: bytes per rank against the rank
count, from bench/sharded.sh's output (one line per rank count and
compressor: ranks, label, time_ms, wire_per_rank)."""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    source, picture = sys.argv[1], sys.argv[2]
    series = {}
    for line in open(source):
        fields = line.split()
        if len(fields) != 4 or line.startswith("#") or not fields[0].isdigit():
            continue
        series.setdefault(fields[1], []).append((int(fields[0]), float(fields[3]) / 1e6))
    figure, axes = plt.subplots(figsize=(6, 4))
    for label, points in sorted(series.items()):
        points.sort()
        axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    axes.set_xlabel("ranks")
    axes.set_ylabel("MB sent per rank per call")
    axes.set_yscale("log")
    axes.set_xticks(sorted({p[0] for pts in series.values() for p in pts}))
    axes.set_title("16 MiB allreduce: bytes each rank sends (report's wire_sent)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(picture, dpi=100)


if __name__ == "__main__":
    main()
