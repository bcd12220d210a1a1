#!/bin/bash
# The cost model against two emulated nodes (bench/two_nodes.sh: 2 ranks a node, a 1 Gbit/s
# full-duplex link between the nodes, TCP inside each unshaped), flat and hierarchical, then
# slimreduce-model for the same layout. Run from the checkout.
set -u
b=build
for hier in 0 1; do
  echo "=== measured: two nodes of 2, 1 Gbit/s, SLIMREDUCE_HIERARCHICAL=$hier $(date -u +%T)"
  bench/two_nodes.sh 1gbit 2 -- mpirun --allow-run-as-root --oversubscribe -np 4 \
    $(bench/two_nodes.sh --flags) -x LD_PRELOAD=$b/interpose/libslimreduce.so \
    -x SLIMREDUCE_LOCAL_SIZE=2 -x SLIMREDUCE_HIERARCHICAL=$hier $b/bench/slimreduce-bench \
    -b 4M -e 64M -f 4 -n 5 -w 1 -c 1 --compressors fp16,int8,topk:0.01 2>&1 | grep -v "^#\s*$"
  echo "=== model: two nodes of 2, 1 Gbit/s, hierarchical $hier"
  h=""; [ $hier = 1 ] && h=--hierarchical
  $b/core/slimreduce-model --link 1gbit --intra 20gbit --cores 2 --ranks 4 --per-node 2 $h \
    --sizes 4M,16M,64M --compressors none,fp16,int8,topk:0.01
done
