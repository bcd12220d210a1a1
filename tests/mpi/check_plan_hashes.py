#!/usr/bin/env python3
"""Runs an MPI job with SLIMREDUCE_LOG_LEVEL=debug (the command line after --
must export it to the ranks) and checks that every rank formed the same fused
batches: the flushes of queued MPI_Iallreduce calls that each rank logged
("fusion: communicator C flushes N calls in B buffers, plan H", H a hash of
the batches' counts) are the same sequence on every rank, and at least one
flush carried several calls in one buffer. Exit 0 when they agree and the job
passed.

  check_plan_hashes.py --np N -- MPIRUN... PROGRAM [ARGS]
"""
import argparse
import re
import subprocess
import sys

LINE = re.compile(r"slimreduce\[(\d+)\] DEBUG: fusion: communicator \d+ flushes (\d+) calls "
                  r"in (\d+) buffers, plan ([0-9a-f]{16})")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run = subprocess.run(command, capture_output=True, text=True, timeout=240)
    plans = {rank: [] for rank in range(args.np)}
    for line in (run.stdout + run.stderr).splitlines():
        found = LINE.search(line)
        if found:
            rank, calls, buffers, plan = found.groups()
            plans[int(rank)].append((int(calls), int(buffers), plan))
    failures = []
    if run.returncode != 0:
        failures.append(f"the job failed ({run.returncode}):\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    if not plans[0]:
        failures.append("rank 0 logged no flush (is SLIMREDUCE_LOG_LEVEL=debug exported?)")
    for rank in range(1, args.np):
        if plans[rank] != plans[0]:
            failures.append(f"rank {rank}'s flushes differ from rank 0's:\n"
                            f"  0: {plans[0]}\n  {rank}: {plans[rank]}")
    if not any(calls > buffers for calls, buffers, _ in plans[0]):
        failures.append(f"no flush fused several calls into one buffer: {plans[0]}")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: {args.np} ranks made the same {len(plans[0])} flushes")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
