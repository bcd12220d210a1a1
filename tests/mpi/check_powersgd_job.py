#!/usr/bin/env python3
"""Trains examples/train_mlp on N ranks under the preloaded library: without
compression, then with PowerSGD through MPI_Allreduce (one call per tensor)
and through queued MPI_Iallreduce, and checks:
- the final loss is at most `bound` percent worse than the uncompressed one;
- the queued calls (both weights fused into one batch per step,
  algorithms/fused_powersgd.h) give the blocking run's loss, bit for bit where
  the rank count is a power of two (train_mlp divides the sums by the rank
  count with `x * (1/n)` after MPI_Allreduce but `x / n` after MPI_Iallreduce:
  the same bits only when n is a power of two; and the fused sums add each
  element in the same order as the separate ones there); else within the bound too;
- each rank's report: two compressed calls per step (the two weight matrices;
  the biases are below SLIMREDUCE_MIN_BYTES), and wire_sent is the
  uncompressed run's less the weights' ring bytes plus, per call, the two
  sums of P and Q (the view and padding rebuilt here from the documented rule);
  the queued run's, one fused batch per step, the sums of every P and every Q.

  check_powersgd_job.py --lib L --train T --np N --steps S --rank R --bound B \
      [--env NAME=VALUE ...] [--hierarchical] -- MPIRUN...

--env adds settings to the PowerSGD runs; --hierarchical (with --env
SLIMREDUCE_HIERARCHICAL=1 ...) leaves out the wire-byte check, whose rule
here is the flat one's.
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import launch_env

WEIGHTS = (256 * 2048, 2048 * 64)  # train_mlp's w1 and w2, in floats


def ring(nbytes, ranks):
    return 2.0 * (ranks - 1) / ranks * nbytes


def view(count, rank):
    """kernels/low_rank.h's view of count floats: rows, cols and the rank r."""
    rows = math.isqrt(count)
    while count % rows:
        rows -= 1
    cols = count // rows
    if cols > 16 * rows:
        cols = math.isqrt(count - 1) + 1
        rows = -(-count // cols)
    r = min(rank, 64, rows, cols)
    assert r * (rows + cols) * 2.0 <= count, "train_mlp's weights are compressed"
    return rows, cols, r


def factor_bytes(count, rank, ranks):
    """This rank's bytes for one call: P and Q padded to whole blocks."""
    rows, cols, r = view(count, rank)
    padded = lambda floats: -(-floats // ranks) * ranks * 4
    return ring(padded(rows * r), ranks) + ring(padded(cols * r), ranks)


def fused_bytes(counts, rank, ranks):
    """This rank's bytes for one fused batch (algorithms/fused_powersgd.h): every P end to
    end, then every Q, each summed as whole blocks plus, where the ranks do not divide
    it, one more block of one float each."""
    def summed(floats):
        whole = floats // ranks * ranks
        return (ring(whole * 4, ranks) if whole else 0.0) + (ring(ranks * 4, ranks) if floats % ranks else 0.0)
    shapes = [view(count, rank) for count in counts]
    return summed(sum(rows * r for rows, _, r in shapes)) + summed(sum(cols * r for _, cols, r in shapes))


def train(mpirun, args, settings, sync, tmp, label):
    prefix = os.path.join(tmp, label)
    exports = launch_env.exports(args.mpi, {"LD_PRELOAD": args.lib, "SLIMREDUCE_REPORT": prefix,
                                            **settings})
    result = subprocess.run(mpirun + exports + [args.train, "--steps", str(args.steps), "--sync",
                                                sync], capture_output=True, text=True, timeout=600)
    match = re.search(r"^final_loss=(\S+)", result.stdout, re.M)
    if result.returncode != 0 or not match:
        print(result.stdout[-3000:], result.stderr[-3000:])
        sys.exit(f"FAIL: {label} exited {result.returncode}")
    reports = []
    for path in sorted(glob.glob(prefix + ".*.json")):
        with open(path) as handle:
            reports.append(json.load(handle))
    if len(reports) != args.np:
        sys.exit(f"FAIL: {label}: {len(reports)} reports for {args.np} ranks")
    return match.group(1), {report["rank"]: report for report in reports}


def main():
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser()
    for name in ("--lib", "--train"):
        parser.add_argument(name, required=True)
    for name in ("--np", "--steps", "--rank"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--bound", type=float, required=True, help="percent worse allowed")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE")
    parser.add_argument("--hierarchical", action="store_true")
    parser.add_argument("--mpi", choices=launch_env.FAMILIES, default="openmpi")
    args = parser.parse_args(sys.argv[1:split])
    mpirun = sys.argv[split + 1:] + ["-np", str(args.np)]
    powersgd = {"SLIMREDUCE_COMPRESSOR": "powersgd", "SLIMREDUCE_POWERSGD_RANK": str(args.rank)}
    powersgd.update(setting.split("=", 1) for setting in args.env)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        base_loss, base = train(mpirun, args, {"SLIMREDUCE_COMPRESSOR": "none"}, "per-tensor",
                                tmp, "none")
        loss, reports = train(mpirun, args, powersgd, "per-tensor", tmp, "blocking")
        queued_loss, queued = train(mpirun, args, powersgd, "iallreduce", tmp, "queued")
    change = 100.0 * (float(loss) - float(base_loss)) / float(base_loss)
    print(f"none {base_loss}, powersgd:{args.rank} {loss} ({change:+.3f}%, allowed "
          f"+{args.bound}%), queued {queued_loss}")
    if change > args.bound:
        failed.append("final loss beyond the bound")
    power_of_two = args.np & (args.np - 1) == 0
    if power_of_two and queued_loss != loss:
        failed.append("queued MPI_Iallreduce calls gave another loss than MPI_Allreduce")
    if 100.0 * (float(queued_loss) - float(base_loss)) / float(base_loss) > args.bound:
        failed.append("queued final loss beyond the bound")
    per_step = sum(factor_bytes(count, args.rank, args.np) for count in WEIGHTS)
    dense = sum(ring(count * 4, args.np) for count in WEIGHTS)
    for rank, report in sorted(reports.items()):
        want_sent = base[rank]["bytes"]["wire_sent"] + args.steps * (per_step - dense)
        got = report["bytes"]["wire_sent"]
        expected = "not checked" if args.hierarchical else f"expected {want_sent:.0f}"
        print(f"rank {rank}: wire_sent {got:.0f}, {expected}, savings "
              f"{report['savings']:.4f}, compressed {report['calls']['compressed']}")
        if not args.hierarchical and abs(got - want_sent) > 1.0:
            failed.append(f"rank {rank}: wire_sent")
        if report["calls"]["compressed"] != 2 * args.steps:
            failed.append(f"rank {rank}: compressed calls")
        if report["compressor"] != "powersgd":
            failed.append(f"rank {rank}: compressor {report['compressor']}")
        # The queued run: both weights fused into one batch per step.
        fused = queued[rank]["calls"]["fused_batches"]
        want_queued = base[rank]["bytes"]["wire_sent"] + args.steps * (
            fused_bytes(WEIGHTS, args.rank, args.np) - dense)
        got_queued = queued[rank]["bytes"]["wire_sent"]
        print(f"rank {rank}: queued: {fused} fused batches, wire_sent {got_queued:.0f}, "
              f"{expected if args.hierarchical else f'expected {want_queued:.0f}'}")
        if not args.hierarchical and (fused != args.steps or abs(got_queued - want_queued) > 1.0):
            failed.append(f"rank {rank}: queued batches {fused}, wire_sent {got_queued:.0f}")
    if failed:
        sys.exit("FAIL: " + "; ".join(failed))
    print("OK")


if __name__ == "__main__":
    main()
