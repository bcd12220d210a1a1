#!/bin/bash
# docs/performance.md section 17, "fp8 at the copy's speed": the compress rows
# that the bucket scan and fp8's byte-domain signs touch, at 16 MiB, before and
# after, alternating twice so that load drifts hit both alike.
# BEFORE and AFTER: two build trees (cmake --build DIR --target bench_quant_fewer bench_quant8).
set -euo pipefail
before=${BEFORE:?build tree of the old commit}
after=${AFTER:?build tree of the new commit}
fewer='memcpy/fp32_bytes/4194304|fp8_compress(_residual)?/(avx2|avx512)/4194304|int[42]_absmax_compress/(avx2|avx512)/4194304'
quant8='memcpy/fp32_bytes/4194304|quant8_compress(_residual)?/(avx2|avx512)/4194304'
args=(--benchmark_min_time=0.3 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
for round in 1 2; do
  for side in before after; do
    tree=$before; [ "$side" = after ] && tree=$after
    echo "== round $round $side fewer"
    "$tree/bench/bench_quant_fewer" --benchmark_filter="$fewer" "${args[@]}" 2>/dev/null | grep median
    echo "== round $round $side quant8"
    "$tree/bench/bench_quant8" --benchmark_filter="$quant8" "${args[@]}" 2>/dev/null | grep median
  done
done
