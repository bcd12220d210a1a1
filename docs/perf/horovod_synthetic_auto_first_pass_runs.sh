#!/bin/bash
# Horovod's synthetic benchmark (resnet18, batch 2, 4 ranks, CPU) over the 1 Gbit/s emulation
# under Horovod's default fusion, 12 warm-up batches (WARMUP=N changes it): int8, auto with its
# rounds' first pass, and auto without it, each run in turn, ROUNDS="1 2 ..." rounds.
# LIB_PASS: this commit's library; LIB_NOPASS: the same commit built with
# `cut_after_first_pass = false` in core/runtime/auto_choice.h (AutoChooser::Schedule).
# Run from a directory holding Horovod's examples/pytorch/pytorch_synthetic_benchmark.py, after
# tests/integration/horovod/setup.sh.
: "${LIB_PASS:?the library with the first pass}" "${LIB_NOPASS:?the library without it}"
hvd=(-x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI -x OMP_NUM_THREADS=1)
job=(/usr/bin/python3 pytorch_synthetic_benchmark.py --no-cuda --model resnet18 --batch-size 2
     --num-warmup-batches "${WARMUP:-12}" --num-batches-per-iter 5 --num-iters 3)
for round in ${ROUNDS:-1 2}; do
  for config in "int8:$LIB_PASS" "auto:$LIB_PASS" "auto-nopass:$LIB_NOPASS"; do
    name=${config%%:*}; lib=${config#*:}
    pre=(-x LD_PRELOAD=$lib -x SLIMREDUCE_COMPRESSOR=${name%-nopass} -x SLIMREDUCE_REPORT=stderr)
    echo "=== round $round config $name $(date -u +%T)"
    "$(dirname "$0")/../../bench/netem.sh" 1gbit -- mpirun --allow-run-as-root --oversubscribe \
      -np 4 --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      "${hvd[@]}" "${pre[@]}" "${job[@]}" 2>&1 |
      grep -E "Img/sec|Iter|auto  |comm .*calls of|savings|netem: the wire|Error|error" | head -30
  done
done
