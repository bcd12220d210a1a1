/* One float SUM allreduce of more than 2^31 bytes (2^29 + 3 floats, 2 GiB and
 * 12 bytes, a count that no rank count above 1 divides evenly), in place, as a
 * large fused gradient buffer is: byte counts past INT_MAX inside SlimReduce
 * must not wrap. Inputs are small integers, exact in fp16 and bf16, so the
 * result must be the exact sum, and the call must have been compressed (read
 * through the C API; the job fails where the library is not preloaded). Needs
 * about 3 GiB per rank. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "interpose/slimreduce.h"

static const size_t kFloats = ((size_t)1 << 29) + 3;

static float value_of(size_t i, int rank) { return (float)((int)((i * 7 + (size_t)rank) % 9) - 4); }

static int compressed_calls(uint64_t* out) {
  int (*get)(slimreduce_counters*) =
      (int (*)(slimreduce_counters*))dlsym(RTLD_DEFAULT, "slimreduce_get_counters");
  slimreduce_counters counters;
  if (!get || get(&counters) != 0) return 0;
  *out = counters.compressed;
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  float* grads = malloc(sizeof(float) * kFloats);
  if (!grads) {
    fprintf(stderr, "rank %d: no memory for %zu floats\n", rank, kFloats);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  for (size_t i = 0; i < kFloats; ++i) grads[i] = value_of(i, rank);
  uint64_t before = 0, after = 0;
  int ok = compressed_calls(&before);
  const int rc =
      MPI_Allreduce(MPI_IN_PLACE, grads, (int)kFloats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  ok = ok && compressed_calls(&after) && after == before + 1;
  size_t wrong = 0, first_wrong = kFloats;
  for (size_t i = 0; i < kFloats; ++i) {
    float expected = 0;
    for (int r = 0; r < size; ++r) expected += value_of(i, r);
    if (grads[i] != expected) {
      if (!wrong) first_wrong = i;
      ++wrong;
    }
  }
  if (rc != MPI_SUCCESS) fprintf(stderr, "rank %d: MPI_Allreduce returned %d\n", rank, rc);
  if (!ok) fprintf(stderr, "rank %d: the call was not counted as compressed\n", rank);
  if (wrong)
    fprintf(stderr, "rank %d: %zu wrong values, the first at %zu\n", rank, wrong, first_wrong);
  const int failed = rc != MPI_SUCCESS || !ok || wrong;
  int any = 0;
  PMPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    printf("%s: %zu floats (%zu bytes) in one call\n", any ? "FAILED" : "PASSED", kFloats,
           kFloats * 4);
  free(grads);
  MPI_Finalize();
  return any;
}
