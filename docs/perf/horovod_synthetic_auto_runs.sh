#!/bin/bash
# Horovod's synthetic benchmark (resnet18, batch 2, 4 ranks, CPU): plain, fp16, int8 and auto
# (candidates none,fp16,int8), over the 1 Gbit/s emulation and over shared memory, two rounds,
# each run in turn. 12 warm-up batches, so that auto's probe rounds (9 calls per size class)
# fall in the warm-up for every config alike. Run from a directory holding Horovod's
# examples/pytorch/pytorch_synthetic_benchmark.py.
lib=/work/main/build/interpose/libslimreduce.so
hvd=(-x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI -x OMP_NUM_THREADS=1)
job=(/usr/bin/python3 pytorch_synthetic_benchmark.py --no-cuda --model resnet18 --batch-size 2
     --num-warmup-batches 12 --num-batches-per-iter 5 --num-iters 3)
for round in 1 2; do
  for link in 1gbit shm; do
    for c in off fp16 int8 auto; do
      pre=()
      [ $c != off ] && pre=(-x LD_PRELOAD=$lib -x SLIMREDUCE_COMPRESSOR=$c -x SLIMREDUCE_REPORT=stderr)
      echo "=== round $round link $link config $c $(date -u +%T)"
      if [ $link = shm ]; then
        mpirun --allow-run-as-root --oversubscribe -np 4 "${hvd[@]}" "${pre[@]}" "${job[@]}" 2>&1 |
          grep -E "Img/sec|Iter|auto  |comm .*calls of|Error|error" | head -24
      else
        /work/main/bench/netem.sh 1gbit -- mpirun --allow-run-as-root --oversubscribe -np 4 \
          --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo "${hvd[@]}" \
          "${pre[@]}" "${job[@]}" 2>&1 | grep -E "Img/sec|Iter|auto  |comm .*calls of|netem: the wire|Error|error" | head -24
      fi
    done
  done
done
# Then, by hand, the same 1 Gbit/s command for int8 and auto with -x HOROVOD_FUSION_THRESHOLD=0
# (each tensor its own call) and -x SLIMREDUCE_REPORT=/tmp/r, read by slimreduce-report /tmp/r.
