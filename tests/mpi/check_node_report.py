#!/usr/bin/env python3
"""Runs test_mpi_hierarchical's two fp16 calls (1000 and 4099 floats) with
SLIMREDUCE_REPORT set, then checks the report's node split, summed over the
ranks' JSON files, against a computation by hand (docs/architecture.md,
"Hierarchical"): the flat ring of each call crosses a node boundary at the
last rank of each node; a hierarchical call sends its fp32 shards inside the
node and its fp16 shard across.

  check_node_report.py --np N --local L -- MPIRUN... PROGRAM

With --sums-only it runs PROGRAM with the arguments given instead, and checks
only that the node split adds up: inside plus across equals the whole, for
the baseline and for what was sent (fused batches of queued calls included).

  check_node_report.py --np N --sums-only -- MPIRUN... PROGRAM ARGS...
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

COUNTS = (1000, 4099)


def expected(ranks, local):
    nodes = ranks // local
    hierarchical = nodes >= 2 and local >= 2
    want = dict(inter_node_baseline=0.0, intra_node_baseline=0.0,
                inter_node_sent=0.0, intra_node_sent=0.0)
    for count in COUNTS:
        ring = 2.0 * (ranks - 1) / ranks * 4 * count  # each rank's flat fp32 ring
        want["inter_node_baseline"] += nodes * ring if nodes > 1 else 0.0
        want["intra_node_baseline"] += (ranks - nodes if nodes > 1 else ranks) * ring
        if hierarchical:
            shard = math.ceil(count / local)
            want["inter_node_sent"] += ranks * 2.0 * (nodes - 1) / nodes * 2 * shard
            want["intra_node_sent"] += ranks * 2.0 * (local - 1) * 4 * shard
        else:  # one node: the flat fp16 ring, all of it inside
            want["intra_node_sent"] += ranks * 2.0 * (ranks - 1) / ranks * 2 * count
    return want


def check_sums(got, fused, ranks):
    failures = 0
    for part in ("baseline", "sent"):
        whole = got["wire_" + part]
        split = got["inter_node_" + part] + got["intra_node_" + part]
        ok = whole > 0 and abs(split - whole) <= 1e-6 * whole + ranks  # the JSON rounds to bytes
        print(f"{part}: across {got['inter_node_' + part]:.0f} + inside "
              f"{got['intra_node_' + part]:.0f} = {split:.0f}, whole {whole:.0f} "
              f"{'ok' if ok else 'DIFFERS'}")
        failures += not ok
    print(f"fused batches: {fused}")
    if fused == 0:
        print("check_node_report: no fused batch, so the case is not exercised")
        failures += 1
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--local", type=int)
    parser.add_argument("--sums-only", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with tempfile.TemporaryDirectory() as work:
        prefix = os.path.join(work, "report")
        env = ["-x", "SLIMREDUCE_REPORT=" + prefix]
        if args.sums_only:  # the launcher's options may come anywhere before the program
            run = subprocess.run(command[:1] + env + command[1:], capture_output=True, text=True)
        else:
            run = subprocess.run(command[:-1] + env + [command[-1], "--gtest_filter=Hierarchical.WireBytes*"],
                                 capture_output=True, text=True)
        if run.returncode != 0:
            print(run.stdout + run.stderr)
            print("check_node_report: the job failed")
            return 1
        files = sorted(glob.glob(prefix + ".*.json"))
        if len(files) != args.np:
            print(f"check_node_report: {len(files)} reports, expected {args.np}")
            return 1
        got, fused = {}, 0
        for name in files:
            with open(name) as report:
                whole = json.load(report)
            fused += whole["calls"]["fused_batches"]
            for key, value in whole["bytes"].items():
                got[key] = got.get(key, 0.0) + value
    if args.sums_only:
        return check_sums(got, fused, args.np)
    failures = 0
    for key, want in expected(args.np, args.local).items():
        ok = abs(got[key] - want) <= 1e-6 * max(want, 1.0) + 0.5 * args.np  # the JSON rounds to bytes
        print(f"{key}: reported {got[key]:.0f}, by hand {want:.0f} {'ok' if ok else 'DIFFERS'}")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
