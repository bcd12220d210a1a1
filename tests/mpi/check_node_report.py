#!/usr/bin/env python3
"""Runs test_mpi_hierarchical's two fp16 calls (1000 and 4099 floats) with
SLIMREDUCE_REPORT set, then checks the report's node split, summed over the
ranks' JSON files, against a computation by hand (docs/architecture.md,
"Hierarchical"): the flat ring of each call crosses a node boundary at the
last rank of each node; a hierarchical call sends its fp32 shards inside the
node and its fp16 shard across.

  check_node_report.py --np N --local L -- MPIRUN... PROGRAM
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--local", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with tempfile.TemporaryDirectory() as work:
        prefix = os.path.join(work, "report")
        env = ["-x", "SLIMREDUCE_REPORT=" + prefix]
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
        got = dict.fromkeys(expected(args.np, args.local), 0.0)
        for name in files:
            with open(name) as report:
                nbytes = json.load(report)["bytes"]
            for key in got:
                got[key] += nbytes[key]
    failures = 0
    for key, want in expected(args.np, args.local).items():
        ok = abs(got[key] - want) <= 1e-6 * max(want, 1.0) + 0.5 * args.np  # the JSON rounds to bytes
        print(f"{key}: reported {got[key]:.0f}, by hand {want:.0f} {'ok' if ok else 'DIFFERS'}")
        failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
