#!/bin/bash
# Horovod's synthetic benchmark (resnet18, 4 ranks, 1 Gbit/s): plain, int8, int4, int2, two rounds.
cd /tmp/hvd
lib=/work/main/build/interpose/libslimreduce.so
for round in 1 2; do
  for c in off int8 int4 int2; do
    pre=()
    [ $c != off ] && pre=(-x LD_PRELOAD=$lib -x SLIMREDUCE_COMPRESSOR=$c)
    echo "=== round $round config $c $(date -u +%T)"
    /work/main/bench/netem.sh 1gbit -- mpirun --allow-run-as-root --oversubscribe -np 4 --mca btl tcp,self \
      --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI -x OMP_NUM_THREADS=1 \
      "${pre[@]}" /usr/bin/python3 pytorch_synthetic_benchmark.py --no-cuda --model resnet18 --batch-size 2 \
      --num-warmup-batches 3 --num-batches-per-iter 5 --num-iters 3 2>&1 | grep -E "Img/sec|Iter|netem: the wire|Error|error" | head -12
  done
done
#!/bin/bash
# batch 1 (int8, int4, two rounds), then the compute ceiling: int4 at batch 2 with no rate limit.
cd /tmp/hvd
lib=/work/main/build/interpose/libslimreduce.so
common=(--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI -x OMP_NUM_THREADS=1)
for round in 1 2; do
  for c in int8 int4; do
    echo "=== batch 1 round $round config $c $(date -u +%T)"
    /work/main/bench/netem.sh 1gbit -- mpirun --allow-run-as-root --oversubscribe -np 4 "${common[@]}" \
      -x LD_PRELOAD=$lib -x SLIMREDUCE_COMPRESSOR=$c /usr/bin/python3 pytorch_synthetic_benchmark.py --no-cuda --model resnet18 --batch-size 1 \
      --num-warmup-batches 3 --num-batches-per-iter 5 --num-iters 3 2>&1 | grep -E "Img/sec|Iter|netem: the wire" | head -12
  done
done
echo "=== batch 2, no rate limit, int4 $(date -u +%T)"
mpirun --allow-run-as-root --oversubscribe -np 4 "${common[@]}" -x LD_PRELOAD=$lib -x SLIMREDUCE_COMPRESSOR=int4 \
  /usr/bin/python3 pytorch_synthetic_benchmark.py --no-cuda --model resnet18 --batch-size 2 \
  --num-warmup-batches 3 --num-batches-per-iter 5 --num-iters 3 2>&1 | grep -E "Img/sec|Iter" | head -12
#!/bin/bash
# batch 2, no rate limit: int8 and plain (the machine's ceiling beside int4's).
cd /tmp/hvd
lib=/work/main/build/interpose/libslimreduce.so
common=(--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x HOROVOD_CPU_OPERATIONS=MPI -x HOROVOD_CONTROLLER=MPI -x OMP_NUM_THREADS=1)
for c in int8 off int4; do
  pre=()
  [ $c != off ] && pre=(-x LD_PRELOAD=$lib -x SLIMREDUCE_COMPRESSOR=$c)
  echo "=== batch 2, no rate limit, $c $(date -u +%T)"
  mpirun --allow-run-as-root --oversubscribe -np 4 "${common[@]}" "${pre[@]}" \
    /usr/bin/python3 pytorch_synthetic_benchmark.py --no-cuda --model resnet18 --batch-size 2 \
    --num-warmup-batches 3 --num-batches-per-iter 5 --num-iters 3 2>&1 | grep -E "Img/sec|Iter" | head -12
done
