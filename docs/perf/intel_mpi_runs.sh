#!/usr/bin/env bash
# docs/performance.md section 21: the demo's job (examples/train_mlp, 4 ranks,
# 300 steps) under Intel MPI, whose runtime is on PyPI (impi-rt), with the
# MPICH family's build (build-mpich/interpose/libslimreduce-mpich.so): one
# ABI, so the build made against Debian's MPICH runs under Intel's library
# and launcher unchanged. Prints the MPI each job ran (Intel MPI's own startup
# line, I_MPI_DEBUG=2) and a row per job: final loss, its change against the
# job without the library, the bytes saved, the wall time.
# Usage, from the repository root after scripts/test.sh built build-mpich:
#   docs/perf/intel_mpi_runs.sh
set -euo pipefail
build="${BUILD:-build-mpich}"
steps="${STEPS:-300}"
# The venv and environment of the suite's Intel MPI tests (impi-rt 2021.13.1).
tests/mpi/intel_mpi.sh setup
mpiexec=("$PWD/tests/mpi/intel/mpiexec")
lib="$PWD/$build/interpose/libslimreduce-mpich.so"
train="$PWD/$build/examples/train_mlp"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"${mpiexec[@]}" --version | head -1

run() {  # label [NAME VALUE]...: one job; the library preloaded unless label is "plain"
  local label="$1" genv=(-genv I_MPI_DEBUG 2)
  shift
  while (($#)); do genv+=(-genv "$1" "$2"); shift 2; done
  if [[ "$label" != plain ]]; then
    genv+=(-genv LD_PRELOAD "$lib" -genv SLIMREDUCE_REPORT "$work/$label"
           -genv SLIMREDUCE_LOG_LEVEL info)
  fi
  "${mpiexec[@]}" -n 4 "${genv[@]}" "$train" --steps "$steps" >"$work/$label.log" 2>&1
  echo "$label"
}

labels=(plain)
run plain >/dev/null
for spec in "none" "fp16" "int8" "topk-0.01 SLIMREDUCE_TOPK_RATIO 0.01" "auto"; do
  set -- $spec
  label=$1
  shift
  run "$label" SLIMREDUCE_COMPRESSOR "${label%%-*}" "$@" >/dev/null
  labels+=("$label")
done
for label in "${labels[@]}"; do
  echo "$label: $(grep -m1 -o "Intel(R) MPI Library.*" "$work/$label.log" || echo "no Intel MPI line")"
done
python3 - "$work" "${labels[@]}" <<'PY'
import json, re, sys
work, labels = sys.argv[1], sys.argv[2:]
def final(label):
    m = re.search(r"^final_loss=(\S+) .* wall_s=(\S+)$", open(f"{work}/{label}.log").read(), re.M)
    return float(m.group(1)), float(m.group(2))
base, _ = final("plain")
print(f"{'job':<12} {'final loss':>10} {'vs plain':>9} {'saved':>7} {'wall s':>7}")
for label in labels:
    loss, wall = final(label)
    saved = "-"
    if label != "plain":
        reports = [json.load(open(f"{work}/{label}.{r}.json")) for r in range(4)]
        sent = sum(float(r["bytes"]["wire_sent"]) for r in reports)
        baseline = sum(float(r["bytes"]["wire_baseline"]) for r in reports)
        saved = f"{100 * (1 - sent / baseline):.1f}%"
    print(f"{label:<12} {loss:>10.6f} {100 * (loss - base) / base:>+8.3f}% {saved:>7} {wall:>7.2f}")
PY
