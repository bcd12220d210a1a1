#!/bin/bash
# Horovod's synthetic benchmark (resnet18, batch 2, 4 ranks, CPU) over the 1 Gbit/s emulation
# under Horovod's default fusion, 12 warm-up batches (WARMUP=N changes it), one library build
# against another: each config run in turn, ROUNDS="1 2 ..." rounds.
# CONFIGS: "LABEL=COMPRESSOR:LIBRARY ..."; by default int8, and auto with and without its rounds'
# first pass: LIB_PASS, this commit's library, and LIB_NOPASS, the same commit built with
# `cut_after_first_pass = false` in core/runtime/auto_choice.h (AutoChooser::Schedule).
# LINK=shm: over shared memory instead (no emulated link).
# Run from a directory holding Horovod's examples/pytorch/pytorch_synthetic_benchmark.py, after
# tests/integration/horovod/setup.sh.
configs=${CONFIGS:-"int8=int8:$LIB_PASS auto=auto:$LIB_PASS auto-nopass=auto:$LIB_NOPASS"}
hvd=(-x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI -x OMP_NUM_THREADS=1)
job=(/usr/bin/python3 pytorch_synthetic_benchmark.py --no-cuda --model resnet18 --batch-size 2
     --num-warmup-batches "${WARMUP:-12}" --num-batches-per-iter 5 --num-iters 3)
for round in ${ROUNDS:-1 2}; do
  for config in $configs; do
    label=${config%%=*}; rest=${config#*=}; compressor=${rest%%:*}; lib=${rest#*:}
    [ -f "$lib" ] || { echo "no library $lib for $label" >&2; exit 2; }
    pre=(-x "LD_PRELOAD=$lib" -x "SLIMREDUCE_COMPRESSOR=$compressor" -x SLIMREDUCE_REPORT=stderr)
    echo "=== round $round config $label $(date -u +%T)"
    if [ "${LINK:-1gbit}" = shm ]; then
      launch=(mpirun --allow-run-as-root --oversubscribe -np 4)
    else
      launch=("$(dirname "$0")/../../bench/netem.sh" "${LINK:-1gbit}" -- mpirun --allow-run-as-root
              --oversubscribe -np 4 --mca btl tcp,self --mca btl_tcp_if_include lo
              --mca oob_tcp_if_include lo)
    fi
    "${launch[@]}" "${hvd[@]}" "${pre[@]}" "${job[@]}" 2>&1 |
      grep -E "Img/sec|Iter|auto  |comm .*calls of|savings|netem: the wire|Error|error" |
      grep -v "WARN: error-feedback residuals were reset" | head -30
  done
done
