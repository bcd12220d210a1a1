#!/usr/bin/env bash
# auto's first rounds with and without prediction, over 1 Gbit/s (root:
# bench/netem.sh), 4 ranks, 64 KiB to 16 MiB in 9 size classes on one
# communicator (MIN=SIZE and MAX=SIZE change the range): prints each run's
# wall seconds, auto.probe_calls and the choice table of rank 0's report.
# Usage: docs/perf/auto_predicted_runs.sh LIBRARY [LIBRARY...]  (from the repository root;
# e.g. this build's library and one built from the commit before the change)
set -euo pipefail
out="${OUT:-/tmp}"
for lib in "$@"; do
  tag="$out/auto_predicted.$$.$RANDOM"
  start=$(date +%s.%N)
  bench/netem.sh 1gbit -- mpirun --allow-run-as-root --oversubscribe -np 4 --mca btl tcp,self \
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    -x "LD_PRELOAD=$lib" -x SLIMREDUCE_COMPRESSOR=auto -x "SLIMREDUCE_REPORT=$tag" \
    build/bench/slimreduce-bench -b "${MIN:-64K}" -e "${MAX:-16M}" -f 2 -n 20 -w 12 -c 0 --compressors set \
    --no-baseline >"$tag.log" 2>&1
  end=$(date +%s.%N)
  echo "# $lib: wall $(python3 -c "print(round($end - $start, 2))") s"
  python3 - "$tag.0.json" <<'PY'
import json, sys
auto = json.load(open(sys.argv[1]))["auto"]
print(f"probe_calls {auto['probe_calls']:.0f}")
for row in auto["classes"]:
    medians = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in row["median_seconds"].items())
    print(f"{row['min_bytes']:>9}  chose {row['chosen']:<5} probed: {medians}")
PY
done
