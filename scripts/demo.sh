#!/usr/bin/env bash
# SlimReduce demo: trains the same unmodified MPI job (examples/train_mlp) on 4
# ranks without the library, then with it preloaded for each compressor, and
# prints one table: final loss, loss change, bytes sent per rank, savings and
# wall time.
#
# Sets itself up on a fresh Debian machine through scripts/setup.sh (apt-get
# installs what is missing, then the project is built in build/), then runs.
# Runnable from any directory. Knobs (environment): DEMO_NP (ranks, default 4),
# DEMO_STEPS (training steps, default 300), DEMO_KEEP=1 keeps the run logs and
# JSON reports, DEMO_NETEM=RATE runs every job over an emulated slow link.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

NP="${DEMO_NP:-4}"
# 300 steps (loss ~4.2 -> ~0.3) keep build + 14 runs under 3 minutes on 2 cores.
STEPS="${DEMO_STEPS:-300}"
BUILD_DIR=build
LIB="$REPO_ROOT/$BUILD_DIR/interpose/libslimreduce.so"
TRAIN="$REPO_ROOT/$BUILD_DIR/examples/train_mlp"

log() { printf '==> %s\n' "$*" >&2; }
die() {
  printf 'demo: error: %s\n' "$*" >&2
  exit 1
}

# ---- 1. set-up: install what is missing, build ------------------------------

log "setting up (scripts/setup.sh: packages, configure, build)"
"$REPO_ROOT/scripts/setup.sh" >&2
[[ -x "$TRAIN" ]] || die "build did not produce $TRAIN"
[[ -f "$LIB" ]] || die "build did not produce $LIB"
PYTHON="$(command -v python3 || echo /usr/bin/python3)"

# ---- 2. runs -------------------------------------------------------------------

WORK="$(mktemp -d "${TMPDIR:-/tmp}/slimreduce-demo.XXXXXX")"
if [[ "${DEMO_KEEP:-0}" != 1 ]]; then trap 'rm -rf "$WORK"' EXIT; fi

# Open MPI refuses root without --allow-run-as-root; --oversubscribe lets 4
# ranks share fewer cores.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np "$NP")
# DEMO_NETEM=RATE (e.g. 1gbit, root only) runs every job over a rate-limited
# loopback in a network namespace of its own (bench/netem.sh), so the wall
# times show what the saved bytes are worth on a slow link.
if [[ -n "${DEMO_NETEM:-}" ]]; then
  MPIRUN=("$REPO_ROOT/bench/netem.sh" "$DEMO_NETEM" -- "${MPIRUN[@]}" --mca btl tcp,self
          --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
fi
TRAIN_ARGS=()
if [[ -n "$STEPS" ]]; then TRAIN_ARGS+=(--steps "$STEPS"); fi
ROWS="$WORK/rows.tsv"
: >"$ROWS"

# run_job LABEL LOG [mpirun -x options...]: runs train_mlp, fails the demo if it fails.
run_job() {
  local label="$1" out="$2"
  shift 2
  local rc=0
  "${MPIRUN[@]}" "$@" "$TRAIN" "${TRAIN_ARGS[@]}" >"$out" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]]; then
    tail -n 30 "$out" >&2
    die "run '$label' failed (exit $rc); log above"
  fi
  grep -q '^final_loss=' "$out" || die "run '$label' printed no final_loss line (log: $out)"
}

# run_lib LABEL COMPRESSOR [extra mpirun -x options...]: runs under the library;
# each rank writes its report to $WORK/LABEL.<rank>.json.
run_lib() {
  local label="$1" comp="$2"
  shift 2
  local prefix="$WORK/$label"
  log "run: $label (LD_PRELOAD=libslimreduce.so, SLIMREDUCE_COMPRESSOR=$comp)"
  # -x NAME=VALUE sets the variable in the ranks only, not in mpirun itself.
  run_job "$label" "$prefix.log" -x "LD_PRELOAD=$LIB" -x "SLIMREDUCE_COMPRESSOR=$comp" \
    -x "SLIMREDUCE_REPORT=$prefix" "$@"
  local r
  for ((r = 0; r < NP; r++)); do
    [[ -f "$prefix.$r.json" ]] || die "run '$label': no report $prefix.$r.json"
  done
  printf '%s\t%s\t%s\n' "$label" "$prefix.log" "$prefix" >>"$ROWS"
}

log "run: none without the library (plain mpirun, no LD_PRELOAD)"
run_job "plain" "$WORK/plain.log"
printf '%s\t%s\t%s\n' "none (no library)" "$WORK/plain.log" "-" >>"$ROWS"

run_lib "none" none
run_lib "fp16" fp16
run_lib "bf16" bf16

run_lib "topk-0.01" topk -x SLIMREDUCE_TOPK_RATIO=0.01
run_lib "topk-0.001" topk -x SLIMREDUCE_TOPK_RATIO=0.001
run_lib "topk-0.01-sharded" topk -x SLIMREDUCE_TOPK_RATIO=0.01 -x SLIMREDUCE_TOPK_ALGORITHM=sharded
# Adaptive levels: top-k 0.01 in critical windows, 0.001 otherwise, alike on every rank.
run_lib "topk-adaptive" topk -x SLIMREDUCE_TOPK_RATIO=0.01,0.001 -x SLIMREDUCE_ADAPTIVE=accordion
run_lib "powersgd-4" powersgd -x SLIMREDUCE_POWERSGD_RANK=4
run_lib "int8" int8
# Fewer bits: 4 and 2 bits per value, a bucket's min and max, error feedback on.
run_lib "int4" int4
run_lib "int2" int2
# Stochastic rounding (each code unbiased), and no error feedback: what a job
# whose fused buffers change from call to call (no residual kept) would run.
run_lib "int4-stochastic-no-ef" int4 -x SLIMREDUCE_QUANT_ROUNDING=stochastic \
  -x SLIMREDUCE_ERROR_FEEDBACK=0
# Block-scaled fp8 (e4m3): a power-of-two scale per 32 values, as MXFP8 (its loss is the
# same at the default 512: docs/performance.md section 16).
run_lib "fp8" fp8 -x SLIMREDUCE_QUANT_BUCKET=32
# The measured choice: none, fp16 or int8 per size class, agreed by the ranks.
run_lib "auto" auto
# Under the slow-link option, hierarchical fp16 with two emulated nodes
# (SLIMREDUCE_LOCAL_SIZE = NP / 2): full precision inside a node.
if [[ -n "${DEMO_NETEM:-}" && $((NP % 2)) -eq 0 && $NP -ge 4 ]]; then
  run_lib "fp16-hierarchical" fp16 -x SLIMREDUCE_HIERARCHICAL=1 -x "SLIMREDUCE_LOCAL_SIZE=$((NP / 2))"
fi

# ---- 3. table -------------------------------------------------------------------

"$PYTHON" - "$ROWS" "$NP" <<'EOF'
import glob, json, re, sys

rows_file, world = sys.argv[1], int(sys.argv[2])
rows = []
for line in open(rows_file):
    label, log, prefix = line.rstrip("\n").split("\t")
    m = re.search(r"^final_loss=(\S+) steps=(\d+) params=(\d+) wall_s=(\S+)$",
                  open(log).read(), re.M)
    if not m:
        sys.exit(f"demo: no final_loss line in {log}")
    row = {"label": label, "loss": float(m.group(1)), "steps": int(m.group(2)),
           "params": int(m.group(3)), "wall": float(m.group(4)), "mb": None, "savings": None}
    if prefix != "-":
        reports = [json.load(open(f"{prefix}.{r}.json")) for r in range(world)]
        sent = [float(rep["bytes"]["wire_sent"]) for rep in reports]
        base = sum(float(rep["bytes"]["wire_baseline"]) for rep in reports)
        row["mb"] = sum(sent) / len(sent) / 1e6
        row["savings"] = 1.0 - sum(sent) / base if base > 0 else None
    rows.append(row)

ref = rows[0]["loss"]
print()
print(f"SlimReduce demo: train_mlp, {world} ranks, {rows[0]['steps']} steps, "
      f"{rows[0]['params']} params")
hdr = ("compressor", "final loss", "vs none", "MB sent/rank", "savings", "wall (s)")
width = max([18] + [len(r["label"]) for r in rows])  # the longest label sets the first column
fmt = "{:<" + str(width) + "} {:>10} {:>9} {:>13} {:>8} {:>9}"
print(fmt.format(*hdr))
print(fmt.format(*("-" * len(h) for h in hdr)))
for r in rows:
    delta = f"{100.0 * (r['loss'] - ref) / ref:+.3f}%" if ref else "-"
    mb = f"{r['mb']:.1f}" if r["mb"] is not None else "-"
    sav = f"{round(100.0 * r['savings'], 1) + 0.0:.1f}%" if r["savings"] is not None else "-"
    print(fmt.format(r["label"], f"{r['loss']:.6f}", delta, mb, sav, f"{r['wall']:.2f}"))
print()
print("Every row but the first runs with LD_PRELOAD=libslimreduce.so; 'none' passes every call")
print("through uncompressed and counts the baseline bytes.")
print("final loss: held-out loss at the end; vs none: change against the run without the library.")
print("MB sent/rank: bytes.wire_sent from the reports (10^6 bytes), averaged over ranks; savings:")
print("1 - wire_sent / wire_baseline summed over ranks; wall: training time printed by rank 0.")
EOF
if [[ "${DEMO_KEEP:-0}" == 1 ]]; then echo "logs and reports: $WORK"; fi
