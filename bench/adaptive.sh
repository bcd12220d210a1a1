#!/usr/bin/env bash
# adaptive.sh [SEEDS] [STEPS] [WINDOWS] [TRAIN_ARGS...]
#
# SLIMREDUCE_ADAPTIVE=accordion against its two levels alone
# (docs/performance.md, "Adaptive levels"): examples/train_mlp on 4 ranks
# over shared memory, for each seed (default "0 1 2") without compression,
# with top-k 0.01 and 0.001 alone and adaptive 0.01,0.001, PowerSGD rank 4
# and 1 alone and adaptive 4,1, at each window of WINDOWS (default "10").
# Prints per configuration the held-out loss (mean over seeds, and the worst
# seed's change) against the uncompressed run and against the gentle level
# alone, the bytes sent per rank against the hard level alone, and the
# share of calls sent hard. TRAIN_ARGS go to train_mlp (e.g. --lr-drop 150).
# Run from the repository root after ./scripts/setup.sh (build/).
set -euo pipefail
seeds=${1:-0 1 2}
steps=${2:-300}
windows=${3:-10}
shift $(($# < 3 ? $# : 3))
train_args=("$@")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=$root/build/interpose/libslimreduce.so
train=$root/build/examples/train_mlp
[[ -x $train && -f $lib ]] || { echo "adaptive.sh: build first (./scripts/setup.sh)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# run LABEL SEED [mpirun -x options...]
run() {
  local label=$1 seed=$2
  shift 2
  mpirun --allow-run-as-root --oversubscribe -np 4 --mca btl_vader_single_copy_mechanism none \
    -x LD_PRELOAD="$lib" -x SLIMREDUCE_REPORT="$out/$label.$seed" "$@" \
    "$train" --steps "$steps" --seed "$seed" "${train_args[@]}" >"$out/$label.$seed.log" 2>&1 ||
    { tail -20 "$out/$label.$seed.log" >&2; exit 1; }
  echo "$label" >>"$out/labels"
}
for seed in $seeds; do
  run none "$seed" -x SLIMREDUCE_COMPRESSOR=none
  run topk-0.01 "$seed" -x SLIMREDUCE_COMPRESSOR=topk -x SLIMREDUCE_TOPK_RATIO=0.01
  run topk-0.001 "$seed" -x SLIMREDUCE_COMPRESSOR=topk -x SLIMREDUCE_TOPK_RATIO=0.001
  run powersgd-4 "$seed" -x SLIMREDUCE_COMPRESSOR=powersgd -x SLIMREDUCE_POWERSGD_RANK=4
  run powersgd-1 "$seed" -x SLIMREDUCE_COMPRESSOR=powersgd -x SLIMREDUCE_POWERSGD_RANK=1
  for window in $windows; do
    run "topk-0.01,0.001-w$window" "$seed" -x SLIMREDUCE_COMPRESSOR=topk \
      -x SLIMREDUCE_TOPK_RATIO=0.01,0.001 -x SLIMREDUCE_ADAPTIVE=accordion \
      -x SLIMREDUCE_ADAPTIVE_WINDOW="$window"
    run "powersgd-4,1-w$window" "$seed" -x SLIMREDUCE_COMPRESSOR=powersgd \
      -x SLIMREDUCE_POWERSGD_RANK=4,1 -x SLIMREDUCE_ADAPTIVE=accordion \
      -x SLIMREDUCE_ADAPTIVE_WINDOW="$window"
  done
done

python3 - "$out" "$seeds" "$steps" "${train_args[*]}" <<'PY'
import glob, json, os, re, statistics, sys
out, seeds, steps, train_args = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]
labels = list(dict.fromkeys(open(os.path.join(out, "labels")).read().split()))

def result(label, seed):
    log = open(f"{out}/{label}.{seed}.log").read()
    loss = float(re.search(r"^final_loss=(\S+)", log, re.M).group(1))
    reports = [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{label}.{seed}.*.json"))]
    sent = statistics.mean(r["bytes"]["wire_sent"] for r in reports)
    adaptive = reports[0].get("adaptive")
    hard = adaptive["hard_share"] if adaptive else None
    return loss, sent, hard

rows = {label: [result(label, seed) for seed in seeds] for label in labels}
def gentle_and_hard(label):
    if label.startswith("topk"):
        return "topk-0.01", "topk-0.001"
    if label.startswith("powersgd"):
        return "powersgd-4", "powersgd-1"
    return None, None

print(f"# adaptive.sh: train_mlp, 4 ranks, {steps} steps, seeds {' '.join(seeds)}"
      + (f", train_mlp {train_args}" if train_args else ""))
print("%-24s %10s %9s %9s %10s %11s %8s" % ("configuration", "loss", "vs none", "worst",
                                            "vs gentle", "bytes/hard", "hard"))
for label, results in rows.items():
    loss = statistics.mean(r[0] for r in results)
    vs_none = [100 * (r[0] - n[0]) / n[0] for r, n in zip(results, rows["none"])]
    gentle, hard = gentle_and_hard(label)
    vs_gentle = (f"{100 * statistics.mean((r[0] - g[0]) / g[0] for r, g in zip(results, rows[gentle])):+.1f}%"
                 if gentle else "-")
    bytes_x = (f"{statistics.mean(r[1] / h[1] for r, h in zip(results, rows[hard])):.2f}x"
               if hard else "-")
    share = (f"{100 * statistics.mean(r[2] for r in results):.0f}%"
             if results[0][2] is not None else "-")
    print("%-24s %10.4f %+8.1f%% %+8.1f%% %10s %11s %8s" % (label, loss, statistics.mean(vs_none),
                                                          max(vs_none), vs_gentle, bytes_x, share))
PY
