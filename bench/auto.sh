#!/usr/bin/env bash
# auto.sh [RATE|shm] [RANKS] [ROUNDS] [MINBYTES] [MAXBYTES]
#
# SLIMREDUCE_COMPRESSOR=auto against the fixed candidates it chooses from
# (docs/performance.md): slimreduce-bench runs none, fp16, int8 and auto one
# after the other at each size (x4 from MINBYTES, default 64K, to MAXBYTES,
# default 16M), 30 timed calls each after 12 untimed ones (auto's probe round
# of 9 calls and 3 chosen ones), ROUNDS times (default 3), over an emulated
# link of RATE (bench/netem.sh; root) or shared memory (`shm`). Prints per
# size each compressor's median over the rounds of its per-run time (the
# slowest rank's median call), the fastest fixed candidate and its spread
# over the rounds, and auto against it and against plain.
# Run from the repository root after ./scripts/setup.sh (build/).
set -euo pipefail
rate=${1:-shm}
ranks=${2:-2}
rounds=${3:-3}
min=${4:-64K}
max=${5:-16M}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lib=$root/build/interpose/libslimreduce.so
bench=$root/build/bench/slimreduce-bench
[[ -x $bench && -f $lib ]] || { echo "auto.sh: build first (./scripts/setup.sh)" >&2; exit 2; }
source "$root/bench/run_ranks.sh"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in $(seq "$rounds"); do
  run_ranks "$rate" "$ranks" -x LD_PRELOAD="$lib" "$bench" -b "$min" -e "$max" -f 4 -n 30 -w 12 \
    -c 1 --compressors fp16,int8,auto --json "$out/round$round.json" --label "$rate" >&2
done

python3 - "$rate" "$ranks" "$out"/round*.json <<'EOF'
import json, statistics, sys
rate, ranks, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
times = {}  # (bytes, compressor) -> per-round times (us)
for path in paths:
    with open(path) as stream:
        for row in json.load(stream)["rows"]:
            if not row["check"].startswith("ok"):
                sys.exit(f"auto.sh: a check failed: {row}")
            times.setdefault((row["bytes"], row["compressor"]), []).append(row["time_us"])
fixed = ("none", "fp16", "int8")
print(f"# auto.sh: {ranks} ranks over {rate}, {len(paths)} rounds; median over rounds of each "
      "run's time per call (us)")
print("%10s %9s %9s %9s %9s  %-5s %7s %10s %9s" % ("bytes", "none", "fp16", "int8", "auto",
                                                   "best", "spread", "auto/best", "plain/auto"))
for size in sorted({b for b, _ in times}):
    med = {c: statistics.median(times[(size, c)]) for c in fixed + ("auto",)}
    best = min(fixed, key=lambda c: med[c])
    rounds_of_best = times[(size, best)]
    spread = (max(rounds_of_best) - min(rounds_of_best)) / med[best]
    print("%10d %9.1f %9.1f %9.1f %9.1f  %-5s %6.1f%% %10.3f %9.3f" % (
        size, med["none"], med["fp16"], med["int8"], med["auto"], best, 100 * spread,
        med["auto"] / med[best], med["none"] / med["auto"]))
EOF
