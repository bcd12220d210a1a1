#!/bin/bash
# docs/performance.md section 15: the demo job, seeds 1-3: none; int4/int2 nearest and stochastic without EF; int4 stochastic with EF
cd "$(dirname "$0")/../.."  # the repository root
run() { # label, seed, env...
  label=$1; seed=$2; shift 2
  envs=(); for e in "$@"; do envs+=(-x "$e"); done
  out=$(mpirun --allow-run-as-root --oversubscribe -np 4 -x LD_PRELOAD=build/interpose/libslimreduce.so -x SLIMREDUCE_REPORT=stderr "${envs[@]}" build/examples/train_mlp --steps 300 --seed $seed 2>&1)
  loss=$(echo "$out" | grep -o 'final_loss=[0-9.]*' | head -1)
  saved=$(echo "$out" | grep -io 'saved[^|]*' | head -1)
  echo "$label seed=$seed $loss | $saved"
}
for s in 1 2 3; do
  run none $s SLIMREDUCE_COMPRESSOR=none
  run int4_nearest_noef $s SLIMREDUCE_COMPRESSOR=int4 SLIMREDUCE_ERROR_FEEDBACK=0
  run int4_stochastic_noef $s SLIMREDUCE_COMPRESSOR=int4 SLIMREDUCE_ERROR_FEEDBACK=0 SLIMREDUCE_QUANT_ROUNDING=stochastic
  run int4_stochastic_ef $s SLIMREDUCE_COMPRESSOR=int4 SLIMREDUCE_QUANT_ROUNDING=stochastic
  run int2_nearest_noef $s SLIMREDUCE_COMPRESSOR=int2 SLIMREDUCE_ERROR_FEEDBACK=0
  run int2_stochastic_noef $s SLIMREDUCE_COMPRESSOR=int2 SLIMREDUCE_ERROR_FEEDBACK=0 SLIMREDUCE_QUANT_ROUNDING=stochastic
  run int8_stochastic_noef $s SLIMREDUCE_COMPRESSOR=int8 SLIMREDUCE_ERROR_FEEDBACK=0 SLIMREDUCE_QUANT_ROUNDING=stochastic
  run int8_nearest_noef $s SLIMREDUCE_COMPRESSOR=int8 SLIMREDUCE_ERROR_FEEDBACK=0
done
