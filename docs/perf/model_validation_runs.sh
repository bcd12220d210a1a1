#!/bin/bash
# The cost model against what this machine can measure: slimreduce-bench over the emulated
# link (every rank behind one link, bench/netem.sh) at 1 and 10 Gbit/s, 2 and 4 ranks, 1 to
# 64 MiB, then slimreduce-model's predictions for the same (--shared). Run from the checkout.
set -u
b=build
for rate in 1gbit 10gbit; do
  for np in 2 4; do
    echo "=== measured: $rate, $np ranks $(date -u +%T)"
    bench/netem.sh $rate -- mpirun --allow-run-as-root --oversubscribe -np $np \
      --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      -x LD_PRELOAD=$b/interpose/libslimreduce.so $b/bench/slimreduce-bench -b 1M -e 64M -f 4 \
      -n 5 -w 1 -c 1 --compressors fp16,int8,topk:0.01 2>&1 | grep -v "^#\s*$"
    echo "=== model: $rate, $np ranks"
    $b/core/slimreduce-model --shared --cores 2 --link $rate --ranks $np --per-node $np \
      --sizes 1M,4M,16M,64M --compressors none,fp16,int8,topk:0.01
  done
done
