/* MPI-4's large-count allreduces under the preload (an MPI that has them:
 * MPICH 4): MPI_Allreduce_c and MPI_Iallreduce_c of float SUMs whose count
 * fits an int are taken as MPI_Allreduce's (compressed: counted), an int32
 * call passes through exact (counted), and a call of INT_MAX + 2 bytes (2 GiB,
 * in place, MPI_BOR) reaches the real MPI untouched: whole, every byte
 * reduced, and uncounted. Inputs are small integers, exact in fp16 and bf16,
 * so every result must be exact. Needs about 2.2 GiB per rank. */
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/slimreduce.h"

#define N 65536

static int failures = 0;
static int rank = 0, size = 1;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "rank %d: FAIL: %s\n", rank, what);
    ++failures;
  }
}

static slimreduce_counters counters(void) {
  slimreduce_counters c;
  memset(&c, 0, sizeof c);
  int (*get)(slimreduce_counters*) =
      (int (*)(slimreduce_counters*))dlsym(RTLD_DEFAULT, "slimreduce_get_counters");
  expect(get && get(&c) == 0, "slimreduce_get_counters (is the library preloaded?)");
  return c;
}

static float value_of(int i, int r) { return (float)((i * 7 + r) % 9 - 4); }

static void check_floats(const float* out, const char* what) {
  int wrong = 0;
  for (int i = 0; i < N; ++i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) sum += value_of(i, r);
    wrong += out[i] != sum;
  }
  expect(wrong == 0, what);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static float in[N], out[N];
  for (int i = 0; i < N; ++i) in[i] = value_of(i, rank);

  slimreduce_counters before = counters();
  expect(MPI_Allreduce_c(in, out, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
         "MPI_Allreduce_c of floats");
  check_floats(out, "MPI_Allreduce_c's sum");
  slimreduce_counters after = counters();
  expect(after.intercepted == before.intercepted + 1 && after.compressed == before.compressed + 1,
         "MPI_Allreduce_c of 65536 floats counted and compressed");

  MPI_Request request;
  before = after;
  expect(
      MPI_Iallreduce_c(in, out, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request) == MPI_SUCCESS &&
          MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS,
      "MPI_Iallreduce_c of floats");
  check_floats(out, "MPI_Iallreduce_c's sum");
  after = counters();
  expect(after.intercepted == before.intercepted + 1 && after.compressed == before.compressed + 1,
         "MPI_Iallreduce_c of 65536 floats counted and compressed");

  int32_t flags[10], total[10];
  for (int i = 0; i < 10; ++i) flags[i] = rank + i;
  before = after;
  expect(MPI_Allreduce_c(flags, total, 10, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
         "MPI_Allreduce_c of int32");
  expect(total[9] == size * (size - 1) / 2 + 9 * size, "the int32 sum exact");
  after = counters();
  expect(after.intercepted == before.intercepted + 1 && after.compressed == before.compressed,
         "the int32 call counted, not compressed");

  /* Past INT_MAX: each rank sets one bit of its own in every byte (of the
   * first 8 ranks); the OR of all must reach every byte, the last included. */
  const MPI_Count bytes = (MPI_Count)INT_MAX + 2;
  unsigned char* big = malloc((size_t)bytes);
  expect(big != NULL, "2 GiB for the large call");
  if (big) {
    memset(big, 1u << (rank % 8), (size_t)bytes);
    before = after;
    expect(
        MPI_Allreduce_c(MPI_IN_PLACE, big, bytes, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD) == MPI_SUCCESS,
        "MPI_Allreduce_c of INT_MAX + 2 bytes");
    const unsigned char all = (unsigned char)((1u << (size < 8 ? size : 8)) - 1);
    expect(big[0] == all && big[(size_t)INT_MAX / 2] == all && big[(size_t)bytes - 1] == all,
           "every byte of the large call reduced, the last included");
    after = counters();
    expect(after.intercepted == before.intercepted, "the large call passed on uncounted");
    free(big);
  }

  int all_failures = 0;
  MPI_Allreduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("%s: %d failures\n", all_failures ? "FAILED" : "PASSED", all_failures);
  MPI_Finalize();
  return all_failures ? 1 : 0;
}
