#!/bin/bash
# docs/performance.md section 16: the demo job with fp8 at buckets of 32 (MXFP8's) and 512, seeds 1-3.
cd "$(dirname "$0")/../.."  # the repository root
run() { # label, seed, env...
  label=$1; seed=$2; shift 2
  envs=(); for e in "$@"; do envs+=(-x "$e"); done
  out=$(mpirun --allow-run-as-root --oversubscribe -np 4 -x LD_PRELOAD=build/interpose/libslimreduce.so "${envs[@]}" build/examples/train_mlp --steps 300 --seed $seed 2>&1)
  echo "$label seed=$seed $(echo "$out" | grep -o 'final_loss=[0-9.]*' | head -1)"
}
for s in 1 2 3; do
  run none $s SLIMREDUCE_COMPRESSOR=none
  run fp8_bucket32 $s SLIMREDUCE_COMPRESSOR=fp8 SLIMREDUCE_QUANT_BUCKET=32
  run fp8_bucket512 $s SLIMREDUCE_COMPRESSOR=fp8 SLIMREDUCE_QUANT_BUCKET=512
  run fp8_bucket32_noef $s SLIMREDUCE_COMPRESSOR=fp8 SLIMREDUCE_QUANT_BUCKET=32 SLIMREDUCE_ERROR_FEEDBACK=0
  run int8 $s SLIMREDUCE_COMPRESSOR=int8
done
