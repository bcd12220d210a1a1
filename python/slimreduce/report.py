"""slimreduce-report: reads the per-rank JSON reports of a run and shows them.

    slimreduce-report PREFIX                 the table SLIMREDUCE_REPORT=stderr prints
    slimreduce-report PREFIX_A PREFIX_B      two runs side by side
    ... --plot out.png                       bytes sent against baseline per rank, and savings
    ... --ranks                              one line per rank after the table

PREFIX is what SLIMREDUCE_REPORT was set to: the run's ranks wrote
PREFIX.0.json, PREFIX.1.json, ... (core/runtime/counters.cc, report_json). A missing
or unreadable report is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

PROG = "slimreduce-report"
MIB = 1024.0 * 1024.0

# The keys of report_json, as (section, key); the first ones of each section
# are required, the others (added later) default to 0.
CALL_KEYS = ("intercepted", "compressed", "passed_through", "warmup", "ef_cap_fallback")
CALL_KEYS_LATER = ("ef_resets", "overflow_rescued", "iallreduce", "fused_batches", "fused_tensors",
                   "partitions", "topk_gathered", "topk_sharded", "ef_evicted")
BYTE_KEYS = ("input", "wire_baseline", "wire_sent")
NODE_KEYS = ("inter_node_baseline", "inter_node_sent", "intra_node_baseline", "intra_node_sent")


class ReportError(Exception):
    """A run's reports cannot be read: one line saying why."""


class Run:
    """One run: its prefix and its ranks' reports, in rank order."""

    def __init__(self, prefix, ranks):
        self.prefix = prefix
        self.ranks = ranks  # list of dicts, index = rank
        first = ranks[0]
        self.world_size = first["world_size"]
        self.compressor = first["compressor"]
        self.node_bytes = all(k in r["bytes"] for r in ranks for k in NODE_KEYS)

    def total(self, section, key):
        return sum(r[section].get(key, 0) for r in self.ranks)

    def savings(self, rank=None):
        reports = self.ranks if rank is None else [self.ranks[rank]]
        baseline = sum(r["bytes"]["wire_baseline"] for r in reports)
        sent = sum(r["bytes"]["wire_sent"] for r in reports)
        return 1.0 - sent / baseline if baseline > 0 else 0.0


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_report(path, report):
    if not isinstance(report, dict):
        raise ReportError(f"{path}: not a SlimReduce report (not a JSON object)")
    for key, kind in (("rank", int), ("world_size", int), ("compressor", str),
                      ("calls", dict), ("bytes", dict)):
        if not isinstance(report.get(key), kind) or isinstance(report.get(key), bool):
            raise ReportError(f"{path}: not a SlimReduce report (no valid \"{key}\")")
    for section, keys in (("calls", CALL_KEYS), ("bytes", BYTE_KEYS)):
        for key in keys:
            if not _number(report[section].get(key)):
                raise ReportError(f"{path}: not a SlimReduce report (no number at {section}.{key})")
    for key in CALL_KEYS_LATER:
        if key in report["calls"] and not _number(report["calls"][key]):
            raise ReportError(f"{path}: not a SlimReduce report (calls.{key} is not a number)")


def load_run(prefix):
    """Reads PREFIX.<rank>.json for every rank of one run."""
    match = re.fullmatch(r"(.*)\.\d+\.json", prefix)
    if match and Path(prefix).is_file():
        prefix = match.group(1)  # a rank's file was named: its run
    folder = os.path.dirname(prefix) or "."
    base = os.path.basename(prefix)
    if not os.path.isdir(folder):
        raise ReportError(f"{prefix}: no such folder {folder}")
    pattern = re.compile(re.escape(base) + r"\.(\d+)\.json")
    files = {}
    for name in os.listdir(folder):
        found = pattern.fullmatch(name)
        if found:
            files[int(found.group(1))] = os.path.join(folder, name)
    if not files:
        raise ReportError(f"{prefix}: no reports ({prefix}.<rank>.json); was the job run with "
                          f"SLIMREDUCE_REPORT={prefix}?")
    reports = {}
    for rank, path in sorted(files.items()):
        try:
            with open(path, encoding="utf-8") as stream:
                report = json.load(stream)
        except OSError as error:
            raise ReportError(f"{path}: cannot read it: {error.strerror}") from None
        except (ValueError, UnicodeDecodeError) as error:
            raise ReportError(f"{path}: not valid JSON ({error})") from None
        _check_report(path, report)
        if report["rank"] != rank:
            raise ReportError(f"{path}: the file says rank {report['rank']}")
        reports[rank] = report
    sizes = {r["world_size"] for r in reports.values()}
    compressors = {r["compressor"] for r in reports.values()}
    if len(sizes) != 1 or len(compressors) != 1:
        raise ReportError(f"{prefix}: the reports are of different runs (world sizes {sorted(sizes)}, "
                          f"compressors {sorted(compressors)})")
    size = sizes.pop()
    missing = [r for r in range(size) if r not in reports]
    extra = [r for r in reports if r >= size]
    if missing or extra:
        what = f"missing rank {', '.join(map(str, missing))}" if missing else \
            f"ranks beyond the world size: {', '.join(map(str, extra))}"
        raise ReportError(f"{prefix}: {len(reports)} reports for a run of {size} ranks ({what})")
    return Run(prefix, [reports[r] for r in range(size)])


def table(run):
    """The table SLIMREDUCE_REPORT=stderr prints (core/runtime/counters.cc, report_table)."""
    calls = {k: run.total("calls", k) for k in CALL_KEYS + CALL_KEYS_LATER}
    data = {k: run.total("bytes", k) for k in BYTE_KEYS}
    lines = [
        "SlimReduce report: compressor %s, %d ranks (sums over ranks)" % (run.compressor, run.world_size),
        "  calls      intercepted %12d  compressed %10d  passed through %8d (warm-up %d)  "
        "residual cap reached %d" % (calls["intercepted"], calls["compressed"], calls["passed_through"],
                                     calls["warmup"], calls["ef_cap_fallback"]),
        "  bytes      input %12.1f MiB  wire baseline %12.1f MiB  wire sent %12.1f MiB"
        % (data["input"] / MIB, data["wire_baseline"] / MIB, data["wire_sent"] / MIB),
        "  savings    %.1f%%" % (100.0 * run.savings()),
    ]
    if calls["overflow_rescued"] > 0:
        lines.append("  overflow   %d fp16 calls rescued with bf16 (a sum beyond 65504)"
                     % calls["overflow_rescued"])
    if calls["iallreduce"] > 0 or calls["fused_batches"] > 0:
        lines.append("  fusion     %d MPI_Iallreduce calls; %d fused batches carried %d reductions"
                     % (calls["iallreduce"], calls["fused_batches"], calls["fused_tensors"]))
    if calls["partitions"] > 0:
        lines.append("  partitions %d pieces of calls larger than SLIMREDUCE_PARTITION_BYTES"
                     % calls["partitions"])
    if calls["topk_gathered"] > 0 or calls["topk_sharded"] > 0:
        lines.append("  top-k      gathered %d calls, sent %12.1f MiB   sharded %d calls, sent %12.1f MiB"
                     % (calls["topk_gathered"], run.total("bytes", "topk_gathered_sent") / MIB,
                        calls["topk_sharded"], run.total("bytes", "topk_sharded_sent") / MIB))
    if "auto" in run.ranks[0]:
        lines += auto_lines(run)
    if "adaptive" in run.ranks[0]:
        lines += level_lines(run)
    if run.node_bytes:
        nodes = [run.total("bytes", k) / MIB for k in NODE_KEYS]
        lines.append("  nodes      across: baseline %12.1f MiB  sent %12.1f MiB   inside: "
                     "baseline %12.1f MiB  sent %12.1f MiB" % tuple(nodes))
    return "\n".join(lines) + "\n"


# A class's times in the choice table, in order: its report key, and what joins a
# candidate's name to its time (as core/runtime/report_sections.cc prints them).
TIMES_OF_A_CLASS = (("median_seconds", " "),
                    ("cut_after_one_call_seconds", " cut after one call at "),
                    ("left_out_predicted_seconds", " left out, predicted at "))


def auto_lines(run):
    """SLIMREDUCE_COMPRESSOR=auto: probe calls, switches and waits summed over ranks,
    then the choice table, which every rank agreed on (rank 0's)."""
    probes = sum(r.get("auto", {}).get("probe_calls", 0) for r in run.ranks)
    switches = sum(r.get("auto", {}).get("switches", 0) for r in run.ranks)
    waits = sum(r.get("auto", {}).get("waits", 0) for r in run.ranks)
    lines = ["  auto       %d probe calls, %d switches, %d waits; choices (agreed):"
             % (probes, switches, waits)]
    for row in run.ranks[0]["auto"].get("classes", []):
        medians = ", ".join("%s%s%.3f ms" % (name, between, seconds * 1e3)
                            for key, between in TIMES_OF_A_CLASS
                            for name, seconds in row.get(key, {}).items())
        reset = ("; residuals reset: chosen among those that keep none"
                 if row.get("reset_rounds", 0) else "")
        lines.append("             comm %d, calls of %d B and up: %-6s (%s; %d rounds, %d switches, "
                     "%d calls%s)" % (row["comm"], row["min_bytes"], row["chosen"] or "-", medians,
                                      row["probe_rounds"], row["switches"], row["calls"], reset))
    return lines


def level_lines(run):
    """SLIMREDUCE_ADAPTIVE: calls at each level and switches summed over ranks, the
    share sent hard, then each class's row, alike on every rank (rank 0's)."""
    adaptive = [r.get("adaptive", {}) for r in run.ranks]
    gentle = sum(a.get("calls_gentle", 0) for a in adaptive)
    hard = sum(a.get("calls_hard", 0) for a in adaptive)
    switches = sum(a.get("switches", 0) for a in adaptive)
    share = hard / (gentle + hard) if gentle + hard else 0.0
    lines = ["  adaptive   levels %s: %d calls gentle, %d hard (%.1f%% hard), %d switches; per class "
             "(alike on every rank):" % (adaptive[0]["levels"], gentle, hard, 100.0 * share, switches)]
    for row in adaptive[0].get("classes", []):
        lines.append("             comm %d, calls of %d B and up: %d gentle, %d hard; %d of %d windows "
                     "critical, %d switches" % (row["comm"], row["min_bytes"], row["calls_gentle"],
                                               row["calls_hard"], row["critical"], row["windows"],
                                               row["switches"]))
    return lines


def rank_lines(run):
    lines = ["  rank  wire baseline MiB  wire sent MiB  savings"]
    for rank, report in enumerate(run.ranks):
        lines.append("  %4d  %17.1f  %13.1f  %6.1f%%" % (
            rank, report["bytes"]["wire_baseline"] / MIB, report["bytes"]["wire_sent"] / MIB,
            100.0 * run.savings(rank)))
    return "\n".join(lines) + "\n"


def comparison(a, b):
    """Two runs side by side, with B's change against A."""

    def ratio(x, y):
        return "%.3fx" % (y / x) if x else ("=" if y == x else "n/a")

    rows = [("compressor", a.compressor, b.compressor, ""),
            ("ranks", str(a.world_size), str(b.world_size), "")]
    for label, key in (("calls intercepted", "intercepted"), ("calls compressed", "compressed"),
                       ("calls passed through", "passed_through")):
        x, y = a.total("calls", key), b.total("calls", key)
        rows.append((label, str(int(x)), str(int(y)), "%+d" % (y - x)))
    for label, key in (("input MiB", "input"), ("wire baseline MiB", "wire_baseline"),
                       ("wire sent MiB", "wire_sent")):
        x, y = a.total("bytes", key), b.total("bytes", key)
        rows.append((label, "%.1f" % (x / MIB), "%.1f" % (y / MIB), ratio(x, y)))
    sa, sb = 100.0 * a.savings(), 100.0 * b.savings()
    rows.append(("savings", "%.1f%%" % sa, "%.1f%%" % sb, "%+.1f points" % (sb - sa)))
    width = [max(len(r[i]) for r in rows + [("", "A", "B", "B against A")]) for i in range(4)]
    out = ["SlimReduce comparison: A = %s, B = %s" % (a.prefix, b.prefix)]
    header = ("", "A", "B", "B against A")
    for row in [header] + rows:
        out.append(("  %-*s  %*s  %*s  %s" % (width[0], row[0], width[1], row[1], width[2], row[2],
                                              row[3])).rstrip())
    return "\n".join(out) + "\n"


def plot(runs, path):
    """Per rank: wire bytes sent against the baseline, and savings; one column per run."""
    try:
        import matplotlib
    except ImportError:
        raise ReportError("--plot needs matplotlib (Debian: apt-get install python3-matplotlib; "
                          "pip: pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = len(runs)
    figure, axes = plt.subplots(2, columns, figsize=(6.0 * columns, 7.0), squeeze=False,
                                sharey="row")
    for column, run in enumerate(runs):
        ranks = list(range(run.world_size))
        baseline = [r["bytes"]["wire_baseline"] / MIB for r in run.ranks]
        sent = [r["bytes"]["wire_sent"] / MIB for r in run.ranks]
        top, bottom = axes[0][column], axes[1][column]
        width = 0.4
        top.bar([x - width / 2 for x in ranks], baseline, width, label="baseline (uncompressed)",
                color="#9e9e9e")
        top.bar([x + width / 2 for x in ranks], sent, width, label="sent", color="#1f77b4")
        top.set_title("%s: compressor %s, %d ranks, savings %.1f%%"
                      % (os.path.basename(run.prefix), run.compressor, run.world_size,
                         100.0 * run.savings()), fontsize=10)
        top.set_ylabel("wire bytes (MiB)")
        top.set_xticks(ranks)
        top.set_ylim(0, 1.3 * max(baseline + sent + [1e-9]))  # room for the legend
        top.legend(fontsize=8, loc="upper right", ncol=2)
        savings = [100.0 * run.savings(rank) for rank in ranks]
        bars = bottom.bar(ranks, savings, 0.6, color="#2ca02c")
        if hasattr(bottom, "bar_label"):
            bottom.bar_label(bars, labels=["%.1f%%" % v for v in savings], fontsize=8)
        bottom.set_xlabel("rank")
        bottom.set_ylabel("savings (%)")
        bottom.set_xticks(ranks)
        bottom.set_ylim(0, 100)
    figure.tight_layout()
    try:
        figure.savefig(path, format="png", dpi=100)
    except OSError as error:
        raise ReportError(f"--plot {path}: cannot write it: {error.strerror}") from None
    finally:
        plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Prints (and plots) the per-rank JSON reports of a run "
        "(SLIMREDUCE_REPORT=PREFIX); with two prefixes, compares the runs.")
    parser.add_argument("prefixes", nargs="+", metavar="PREFIX",
                        help="a run's SLIMREDUCE_REPORT prefix (its ranks wrote PREFIX.<rank>.json)")
    parser.add_argument("--plot", metavar="OUT.png", help="draw bytes sent against baseline per rank")
    parser.add_argument("--ranks", action="store_true", help="also print one line per rank")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if len(args.prefixes) > 2:
        print(f"{PROG}: error: one run, or two to compare ({len(args.prefixes)} given)", file=sys.stderr)
        return 2
    try:
        runs = [load_run(prefix) for prefix in args.prefixes]
        if len(runs) == 1:
            out = table(runs[0])
            if args.ranks:
                out += rank_lines(runs[0])
        else:
            out = comparison(*runs)
            if args.ranks:
                out += "".join(f"{run.prefix}:\n" + rank_lines(run) for run in runs)
        if args.plot:
            plot(runs, args.plot)
    except ReportError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(out)
    if args.plot:
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
