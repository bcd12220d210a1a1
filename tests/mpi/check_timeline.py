#!/usr/bin/env python3
"""Runs an MPI job with SLIMREDUCE_TIMELINE set to a prefix in a new folder (the command line
after -- must export SLIMREDUCE_TIMELINE=@PREFIX@, which this script fills in) and checks
the timeline (docs/architecture.md, "Timeline"): one file per rank, <prefix>.<rank>.json, each
valid JSON, a list of complete events ("ph": "X") of this rank with a duration >= 0, only the
documented span names, and each of QUEUE, FUSE, COMPRESS, COMMUNICATE and DECOMPRESS present.

  check_timeline.py --np N -- MPIRUN... -x SLIMREDUCE_TIMELINE=@PREFIX@ ... PROGRAM [ARGS]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

NAMES = {"QUEUE", "FUSE", "COMPRESS", "COMMUNICATE", "DECOMPRESS"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        prefix = os.path.join(folder, "timeline")
        run = subprocess.run([part.replace("@PREFIX@", prefix) for part in command],
                             capture_output=True, text=True, timeout=240)
        if run.returncode != 0:
            failures.append(f"the job failed ({run.returncode}):\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
        for rank in range(args.np):
            path = f"{prefix}.{rank}.json"
            if not os.path.exists(path):
                failures.append(f"{path} was not written")
                continue
            try:
                events = json.load(open(path))
            except json.JSONDecodeError as error:
                failures.append(f"{path} is not valid JSON: {error}")
                continue
            seen = set()
            for event in events:
                seen.add(event.get("name"))
                if event.get("ph") != "X" or event.get("pid") != rank or event.get("dur", -1) < 0:
                    failures.append(f"{path}: not a complete event of rank {rank}: {event}")
                    break
            if seen - NAMES:
                failures.append(f"{path}: unknown spans {seen - NAMES}")
            if NAMES - seen:
                failures.append(f"{path}: no {NAMES - seen} span")
            if rank == 0 and not failures:
                print(f"rank 0: {len(events)} spans: " +
                      ", ".join(f"{n} {sum(e['name'] == n for e in events)}" for n in sorted(NAMES)))
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print(f"ok: {args.np} timelines")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
