#!/bin/bash
# Horovod's synthetic benchmark (resnet18, batch 2, 4 ranks, CPU) over the 1 Gbit/s emulation
# under Horovod's default (time-driven) fusion, where a fused buffer's make-up changes from step
# to step and error feedback's residuals reset: int8 and auto (candidates none,fp16,int8) as
# they are, and each with the quantizer made residual-free (SLIMREDUCE_ERROR_FEEDBACK=0,
# SLIMREDUCE_QUANT_ROUNDING=stochastic: unbiased codes), two rounds, each run in turn. Settings
# as docs/perf/horovod_synthetic_auto_runs.sh (12 warm-up batches, so that auto's probe rounds
# fall in the warm-up; WARMUP=N changes it, CONFIGS="..." picks the configs). Run from a
# directory holding Horovod's examples/pytorch/pytorch_synthetic_benchmark.py, after
# tests/integration/horovod/setup.sh.
lib=/work/main/build/interpose/libslimreduce.so
hvd=(-x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI -x OMP_NUM_THREADS=1)
job=(/usr/bin/python3 pytorch_synthetic_benchmark.py --no-cuda --model resnet18 --batch-size 2
     --num-warmup-batches "${WARMUP:-12}" --num-batches-per-iter 5 --num-iters 3)
unbiased=(-x SLIMREDUCE_ERROR_FEEDBACK=0 -x SLIMREDUCE_QUANT_ROUNDING=stochastic)
for round in 1 2; do
  for config in ${CONFIGS:-int8 int8-unbiased auto auto-unbiased}; do
    pre=(-x LD_PRELOAD=$lib -x SLIMREDUCE_COMPRESSOR=${config%-unbiased} -x SLIMREDUCE_REPORT=stderr)
    [[ $config == *-unbiased ]] && pre+=("${unbiased[@]}")
    echo "=== round $round config $config $(date -u +%T)"
    /work/main/bench/netem.sh 1gbit -- mpirun --allow-run-as-root --oversubscribe -np 4 \
      --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "${hvd[@]}" \
      "${pre[@]}" "${job[@]}" 2>&1 |
      grep -E "Img/sec|Iter|auto  |comm .*calls of|savings|netem: the wire|Error|error" | head -30
  done
done
