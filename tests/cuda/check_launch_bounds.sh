#!/usr/bin/env bash
# Every kernel declares the block size it is launched with (__launch_bounds__),
# so that ptxas fits its registers to that size. Without it, ptxas gave two
# 1024-thread top-k kernels 95 registers on sm_90: more than a block may hold,
# and every launch would have failed on an H100/H200 (found by review before
# any GPU run). Usage: check_launch_bounds.sh DIR (the kernels/cuda folder).
set -euo pipefail
dir=${1:?usage: check_launch_bounds.sh DIR}
missing=$(grep -n '__global__' "$dir"/*.cu | grep -v '__launch_bounds__' || true)
kernels=$(grep -c '__global__' "$dir"/*.cu | awk -F: '{s += $2} END {print s}')
if [ -n "$missing" ]; then
  echo "kernels without __launch_bounds__:"
  echo "$missing"
  exit 1
fi
[ "$kernels" -gt 0 ] || { echo "no kernels found in $dir"; exit 1; }
echo "all $kernels kernels declare __launch_bounds__"
