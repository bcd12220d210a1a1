/* A plain C MPI job whose gradients come through one reused fusion buffer
 * whose make-up changes from call to call (Horovod's time-driven fusion): 45
 * float SUM allreduces on one buffer, their counts cycling through 200000,
 * 210000 and 220000 values (one size class, 512 KiB to 1 MiB), interleaved
 * with 45 on another buffer of a constant 50000 values (128 KiB to 256 KiB).
 * Under SLIMREDUCE_COMPRESSOR=auto the first class's residuals reset on
 * nearly every call; check_job.py reads what the reports say of both
 * classes. It checks its own results are finite and near the exact sum. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { kCalls = 45, kLargest = 220000, kSteady = 50000 };

/* Reduces n values of a small-integer pattern in buf; returns the values far from the sum. */
static int reduce(float* buf, int n, int call, int rank, int size) {
  for (int i = 0; i < n; ++i) buf[i] = (float)((i + rank + call) % 8);
  MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    float expected = 0;
    for (int r = 0; r < size; ++r) expected += (float)((i + r + call) % 8);
    wrong += !isfinite(buf[i]) || fabsf(buf[i] - expected) > 0.1f * size * 8;
  }
  return wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float* fused = malloc(sizeof(float) * kLargest);
  float* steady = malloc(sizeof(float) * kSteady);
  int wrong = 0;
  for (int call = 0; call < kCalls; ++call) {
    wrong += reduce(fused, 200000 + 10000 * (call % 3), call, rank, size);
    wrong += reduce(steady, kSteady, call, rank, size);
  }
  if (wrong) fprintf(stderr, "rank %d: %d values far from the sum\n", rank, wrong);
  free(fused);
  free(steady);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
