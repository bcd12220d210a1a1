#!/bin/bash
# The CPU kernel comparison of docs/performance.md section 17: the fewer-bit
# codecs (bench_quant_fewer) and int8 (bench_quant8) at 16 MiB, before and
# after one change, alternating twice so that load drifts hit both alike.
# BEFORE and AFTER: two build trees (cmake --build DIR --target bench_quant_fewer bench_quant8).
set -euo pipefail
before=${BEFORE:?build tree of the old commit}
after=${AFTER:?build tree of the new commit}
f='memcpy|/4194304'
args=(--benchmark_filter="$f" --benchmark_min_time=0.2 --benchmark_repetitions=3
      --benchmark_report_aggregates_only=true)
for round in 1 2; do
  "$before/bench/bench_quant_fewer" "${args[@]}" > before_fewer_$round.txt 2>&1
  "$after/bench/bench_quant_fewer" "${args[@]}" > after_fewer_$round.txt 2>&1
  "$before/bench/bench_quant8" "${args[@]}" > before_q8_$round.txt 2>&1
  "$after/bench/bench_quant8" "${args[@]}" > after_q8_$round.txt 2>&1
done
