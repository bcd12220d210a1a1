/* A plain C MPI job with known traffic, for the report tests: 5 float SUM
 * allreduces of 2^18 values (1 MiB each, compressible) and 3 int64 BAND
 * allreduces of 4 values (control traffic, passed through). It checks its own
 * float results against the exact sum (inputs are small integers, exact in
 * fp16 and bf16, so every compressor must give them exactly). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { kFloats = 1 << 18, kFloatCalls = 5, kControlCalls = 3 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float* grads = malloc(sizeof(float) * kFloats);
  int wrong = 0;
  for (int call = 0; call < kFloatCalls; ++call) {
    for (int i = 0; i < kFloats; ++i) grads[i] = (float)((i + rank + call) % 8);
    MPI_Allreduce(MPI_IN_PLACE, grads, kFloats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < kFloats; ++i) {
      float expected = 0;
      for (int r = 0; r < size; ++r) expected += (float)((i + r + call) % 8);
      wrong += grads[i] != expected;
    }
  }
  for (int call = 0; call < kControlCalls; ++call) {
    int64_t flags[4] = {-1, rank, 0x0f0f, call}, result[4];
    MPI_Allreduce(flags, result, 4, MPI_INT64_T, MPI_BAND, MPI_COMM_WORLD);
  }
  if (wrong) fprintf(stderr, "rank %d: %d wrong values\n", rank, wrong);
  free(grads);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
