#!/usr/bin/env bash
# The Horovod job over an emulated slow link (design notes section 3): not part of the CI test.
#
#   tests/integration/horovod/netem.sh <path to libslimreduce.so> [RATE, default 1gbit]
#
# Runs train_hvd.py (HVD_NETEM_STEPS, default 200 steps, groups=1) without SlimReduce and with
# fp16, bf16, topk inside a fresh network namespace of its own whose loopback is limited to RATE
# with a token bucket (all 4 ranks share that one queue, like hosts behind one link), MPI on TCP
# over lo. Prints time per step, final loss, and the bytes that really crossed the link (the
# namespace's lo tx_bytes) against SlimReduce's own count. Needs root; the namespace is deleted
# on every exit path. Run setup.sh first (run.sh does). HVD_NETEM_CONFIGS: a file of
# configurations instead, one "name compressor [VAR=value ...]" a line (compressor off: no
# SlimReduce; the variables, HOROVOD_* or SLIMREDUCE_*, override the defaults below).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY=/usr/bin/python3
[ $# -ge 1 ] && [ -f "$1" ] || { echo "usage: $0 <libslimreduce.so> [rate]" >&2; exit 2; }
LIB="$(readlink -f "$1")"
RATE="${2:-1gbit}"
STEPS="${HVD_NETEM_STEPS:-200}"
[ "$(id -u)" = 0 ] || { echo "netem.sh: needs root (ip netns, tc)" >&2; exit 2; }

NS="slimreduce-hvd-netem-$$-$RANDOM"
OUT="$(mktemp -d /tmp/slimreduce-hvd-netem.XXXXXX)"
cleanup() { ip netns del "$NS" 2>/dev/null || true; }
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS"
ip -n "$NS" link set lo up
tc -n "$NS" qdisc add dev lo root tbf rate "$RATE" burst 128kb latency 100ms

while IFS='=' read -r var _; do
  case "$var" in SLIMREDUCE_*|HOROVOD_*) unset "$var" ;; esac
done < <(env)
unset LD_PRELOAD

tx() { ip netns exec "$NS" cat /sys/class/net/lo/statistics/tx_bytes; }

echo "horovod over a ${RATE} link: $(date -u +%FT%TZ), $STEPS steps, namespace $NS, results in $OUT"
printf '| %-6s | %-10s | %-9s | %-18s | %-22s |\n' config "final loss" "ms/step" "MB on the link" "SlimReduce wire_sent MB"
printf '|---|---|---|---|---|\n'
if [ -n "${HVD_NETEM_CONFIGS:-}" ]; then
  grep -v '^[[:space:]]*\(#\|$\)' "$HVD_NETEM_CONFIGS" >"$OUT/configs"
else
  printf '%s\n' "off off" "fp16 fp16" "bf16 bf16" "topk topk" >"$OUT/configs"
fi
while read -r c compressor extra; do
  envs=(-x HOROVOD_FUSION_THRESHOLD=134217728 -x HOROVOD_CYCLE_TIME=1)
  if [ "$compressor" != off ]; then
    envs+=(-x "LD_PRELOAD=$LIB" -x "SLIMREDUCE_COMPRESSOR=$compressor"
           -x "SLIMREDUCE_REPORT=$OUT/$c.report")
  fi
  for kv in $extra; do envs+=(-x "$kv"); done
  before=$(tx)
  ip netns exec "$NS" timeout 900 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 4 \
      --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      --mca mpi_yield_when_idle 1 \
      -x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI "${envs[@]}" \
      "$PY" "$HERE/train_hvd.py" --steps "$STEPS" --groups 1 --out "$OUT/$c.json" \
      </dev/null >"$OUT/$c.log" 2>&1 || { echo "$c: job failed, see $OUT/$c.log" >&2; exit 1; }
  after=$(tx)
  "$PY" - "$c" "$OUT" "$before" "$after" "$compressor" <<'EOF'
import json, os, sys
c, out, before, after = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = json.load(open(f"{out}/{c}.json"))
sent = "-"
if sys.argv[5] != "off":
    reps = [json.load(open(f"{out}/{c}.report.{r}.json")) for r in range(s["world_size"])]
    sent = f"{sum(r['bytes']['wire_sent'] for r in reps) / 1e6:.1f} (all ranks)"
print(f"| {c:<6} | {s['final_eval_loss']:<10.4f} | {1e3 * s['time_per_step_s']:<9.1f} | "
      f"{(after - before) / 1e6:<18.1f} | {sent:<22} |")
EOF
done <"$OUT/configs"
