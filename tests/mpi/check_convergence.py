#!/usr/bin/env python3
"""Trains examples/train_mlp on N ranks without compression (the library
preloaded with SLIMREDUCE_COMPRESSOR=none) and with each compressor asked for,
the same number of steps, and checks each final loss against the uncompressed
one: at most `bound` percent worse.

  check_convergence.py --lib L --train T --np N --steps S -- MPIRUN... \
      --case fp16:1 --case bf16:1 --case topk:0.01:3 \
      --case topk:0.01:3@SLIMREDUCE_TOPK_ALGORITHM=sharded

A case may carry settings after @ (NAME=VALUE, comma-separated). With
SLIMREDUCE_TOPK_ALGORITHM=sharded the run must report sharded top-k calls.
"""
import argparse
import re
import subprocess
import sys

import launch_env

MPI = "openmpi"  # the launcher's family (--mpi)


def final_loss(mpirun, lib, train, steps, settings):
    exports = launch_env.exports(MPI, {"LD_PRELOAD": lib, "SLIMREDUCE_REPORT": "stderr",
                                       **settings})
    result = subprocess.run(mpirun + exports + [train, "--steps", str(steps)],
                            capture_output=True, text=True, timeout=600)
    match = re.search(r"^final_loss=(\S+)", result.stdout, re.M)
    if result.returncode != 0 or not match:
        print(result.stdout[-3000:], result.stderr[-3000:])
        sys.exit(f"FAIL: run with {settings} exited {result.returncode}")
    if settings.get("SLIMREDUCE_TOPK_ALGORITHM") == "sharded":
        sharded = re.search(r"sharded (\d+) calls", result.stderr)
        if not sharded or int(sharded.group(1)) == 0:
            print(result.stderr[-3000:])
            sys.exit(f"FAIL: run with {settings} reported no sharded top-k call")
    return float(match.group(1))


def main():
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser()
    for name in ("--lib", "--train"):
        parser.add_argument(name, required=True)
    parser.add_argument("--np", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--case", action="append", required=True,
                        help="compressor[:ratio]:bound_percent")
    parser.add_argument("--mpi", choices=launch_env.FAMILIES, default="openmpi")
    args = parser.parse_args(sys.argv[1:split])
    global MPI
    MPI = args.mpi
    mpirun = sys.argv[split + 1:] + ["-np", str(args.np)]

    baseline = final_loss(mpirun, args.lib, args.train, args.steps,
                          {"SLIMREDUCE_COMPRESSOR": "none"})
    print(f"none: final loss {baseline:.6f}")
    failed = False
    for case in args.case:
        spec, _, extra = case.partition("@")
        parts = spec.split(":")
        compressor, bound = parts[0], float(parts[-1])
        settings = {"SLIMREDUCE_COMPRESSOR": compressor}
        for setting in filter(None, extra.split(",")):
            name, _, value = setting.partition("=")
            settings[name] = value
        if len(parts) == 3:
            settings["SLIMREDUCE_TOPK_RATIO"] = parts[1]
        loss = final_loss(mpirun, args.lib, args.train, args.steps, settings)
        change = 100.0 * (loss - baseline) / baseline
        ok = change <= bound
        failed |= not ok
        print(f"{'OK' if ok else 'FAIL'}: {case}: final loss {loss:.6f} ({change:+.3f}% vs none, "
              f"allowed +{bound}%)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
