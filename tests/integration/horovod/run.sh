#!/usr/bin/env bash
# The Horovod integration test: an unmodified Horovod PyTorch job under LD_PRELOAD.
#
#   tests/integration/horovod/run.sh <path to libslimreduce.so>
#
# Set-up (setup.sh: Debian packages and a cached Horovod 0.28.1 wheel), then the same training
# job (train_hvd.py) under mpirun -np 4 in six configurations and Horovod's own allreduce on
# every dtype (hvd_dtypes.py) in five, then check.py: assertions and a table.
#   exit 0: passed; 1: failed; 77: SKIPPED (Horovod or PyTorch not to be had; said loudly).
# Knobs (environment): HVD_TEST_STEPS (600), HVD_TEST_OUT (a new temporary directory),
# HVD_TEST_TIMEOUT per job in seconds (600), HVD_TEST_CONFIGS (a file of configurations, one
# "name compressor groups [HOROVOD_X=value ...]" a line, instead of the six below; the first must
# be "off"), HVD_TEST_DTYPES (1: run the dtype job for each configuration with groups > 0; 0: none),
# HVD_TEST_SKIP=1 (report SKIPPED, exit 77, run nothing).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SKIP_CODE=77
PY=/usr/bin/python3

if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "usage: $0 <path to libslimreduce.so>" >&2
  exit 1
fi
LIB="$(readlink -f "$1")"

start_all=$(date +%s)
"$HERE/setup.sh"
rc=$?
if [ "$rc" = "$SKIP_CODE" ]; then
  echo "SKIPPED: Horovod integration test (the reason is above; nothing was run)" >&2
  exit "$SKIP_CODE"
elif [ "$rc" != 0 ]; then
  echo "FAILED: Horovod integration set-up (exit code $rc)" >&2
  exit 1
fi
setup_s=$(( $(date +%s) - start_all ))

OUT="${HVD_TEST_OUT:-$(mktemp -d /tmp/slimreduce-hvd.XXXXXX)}"
mkdir -p "$OUT"
STEPS="${HVD_TEST_STEPS:-600}"
JOB_TIMEOUT="${HVD_TEST_TIMEOUT:-600}"

# The measuring shim (calllog.c) for the top-k runs: counts error-feedback key resets.
if ! mpicc -O2 -shared -fPIC -o "$OUT/libcalllog.so" "$HERE/calllog.c" -ldl 2>"$OUT/calllog.build.log"; then
  cat "$OUT/calllog.build.log" >&2
  echo "FAILED: building calllog.c" >&2
  exit 1
fi

# Nothing from the caller's environment may change a run: every setting below is explicit.
while IFS='=' read -r var _; do
  case "$var" in SLIMREDUCE_*|HOROVOD_*|HVD_CALLLOG) unset "$var" ;; esac
done < <(env)
unset LD_PRELOAD PYTHONPATH PYTHONHOME

MPIRUN=(mpirun --oversubscribe --bind-to none -np 4
        --mca btl_vader_single_copy_mechanism none --mca pml ob1 --mca mpi_yield_when_idle 1
        -x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
# Horovod's defaults, stated; a configuration line may override them.
HOROVOD_DEFAULTS=(HOROVOD_FUSION_THRESHOLD=134217728 HOROVOD_CYCLE_TIME=1)

# name compressor groups: groups=1 is the recommended fixed fusion (docs/horovod.md); the last
# run is Horovod's default, time-driven fusion, where error-feedback keys reset.
if [ -n "${HVD_TEST_CONFIGS:-}" ]; then
  grep -v '^[[:space:]]*\(#\|$\)' "$HVD_TEST_CONFIGS" >"$OUT/configs"
else
  cat >"$OUT/configs" <<'EOF'
off off 1
none none 1
fp16 fp16 1
bf16 bf16 1
topk topk 1
topk-default topk 0
EOF
fi

echo "horovod integration: $(date -u +%FT%TZ); library $LIB; $STEPS steps; results in $OUT"
echo "  $($PY -c 'import horovod, torch; print("horovod", horovod.__version__, "torch", torch.__version__)' 2>/dev/null), $(ompi_info --version 2>/dev/null | head -1)"

run_job() {  # dir stem rc-file command...
  local dir="$1" stem="$2"
  shift 2
  local t0=$(date +%s)
  timeout --kill-after=30 "$JOB_TIMEOUT" "$@" </dev/null >"$dir/$stem.log" 2>&1
  local rc=$?
  echo "$rc" >"$dir/$stem.rc"
  printf '  %-13s %-7s rc=%-3s %4ss\n' "$(basename "$dir")" "$stem" "$rc" "$(( $(date +%s) - t0 ))"
  if [ "$rc" != 0 ]; then
    [ "$rc" = 124 ] && echo "    timed out after ${JOB_TIMEOUT}s"
    tail -25 "$dir/$stem.log" | sed 's/^/    | /'
  fi
}

while read -r name compressor groups extra; do
  dir="$OUT/$name"
  mkdir -p "$dir"
  envs=()
  for kv in "${HOROVOD_DEFAULTS[@]}"; do
    case " $extra " in *" ${kv%%=*}="*) ;; *) envs+=(-x "$kv") ;; esac
  done
  for kv in $extra; do envs+=(-x "$kv"); done
  train_only=()   # the training job's own report and call log
  dtypes_only=()  # the dtype job's own report
  if [ "$compressor" != off ]; then
    envs+=(-x "SLIMREDUCE_COMPRESSOR=$compressor")
    [ "$compressor" = topk ] && envs+=(-x SLIMREDUCE_TOPK_RATIO=0.01 -x SLIMREDUCE_ERROR_FEEDBACK=1)
    if [ "$compressor" = topk ]; then   # calllog.c before SlimReduce: counts key resets
      train_only+=(-x "LD_PRELOAD=$OUT/libcalllog.so:$LIB" -x "HVD_CALLLOG=$dir/calllog")
    else
      train_only+=(-x "LD_PRELOAD=$LIB")
    fi
    train_only+=(-x "SLIMREDUCE_REPORT=$dir/report")
    dtypes_only=(-x "LD_PRELOAD=$LIB" -x "SLIMREDUCE_REPORT=$dir/dreport")
  fi
  run_job "$dir" train "${MPIRUN[@]}" "${envs[@]}" "${train_only[@]}" \
    "$PY" "$HERE/train_hvd.py" --steps "$STEPS" --groups "$groups" --out "$dir/train.json"
  mv "$dir/train.rc" "$dir/rc"
  if [ "$groups" != 0 ] && [ "${HVD_TEST_DTYPES:-1}" = 1 ]; then
    run_job "$dir" dtypes "${MPIRUN[@]}" "${envs[@]}" "${dtypes_only[@]}" \
      "$PY" "$HERE/hvd_dtypes.py" --out "$dir/dtypes.pt"
  fi
done <"$OUT/configs"

HVD_TEST_DTYPES="${HVD_TEST_DTYPES:-1}" "$PY" "$HERE/check.py" "$OUT"
rc=$?
echo "horovod integration: set-up ${setup_s}s, whole run $(( $(date +%s) - start_all ))s"
if [ "$rc" = 0 ] && [ -z "${HVD_TEST_OUT:-}" ]; then
  rm -rf "$OUT"   # about 130 MB, mostly the dtype results; kept when something failed
else
  echo "horovod integration: results kept in $OUT"
fi
exit "$rc"
