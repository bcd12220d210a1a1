/* A program that uses SlimReduce's native C API (<slimreduce.h>), built
 * against an installed prefix with find_package(SlimReduce) or pkg-config and
 * linked ahead of MPI, so no LD_PRELOAD is needed. It switches the
 * compressor to fp16, reduces 64 Ki floats (256 KiB: compressed) and 16 ints
 * (passed through), and checks the sums and the library's counters.
 * Run: mpirun -np 2 ./slimreduce_consumer. Exits 0 when all is as expected. */
#include <mpi.h>
#include <slimreduce.h>
#include <stdio.h>
#include <stdlib.h>

enum { kFloats = 65536, kInts = 16 };

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int failures = 0;

  if (slimreduce_set_compressor("fp16") != 0) {
    fprintf(stderr, "rank %d: slimreduce_set_compressor(\"fp16\") failed\n", rank);
    ++failures;
  }
  float* grads = malloc(kFloats * sizeof(float));
  for (int i = 0; i < kFloats; ++i) grads[i] = (float)((i + rank) % 8); /* exact in fp16 */
  MPI_Allreduce(MPI_IN_PLACE, grads, kFloats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < kFloats; ++i) {
    float expected = 0;
    for (int r = 0; r < ranks; ++r) expected += (float)((i + r) % 8);
    if (grads[i] != expected) {
      fprintf(stderr, "rank %d: sum %d is %g, expected %g\n", rank, i, grads[i], expected);
      ++failures;
      break;
    }
  }
  int flags[kInts], total[kInts];
  for (int i = 0; i < kInts; ++i) flags[i] = rank;
  MPI_Allreduce(flags, total, kInts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (total[0] != ranks * (ranks - 1) / 2) ++failures;

  slimreduce_counters counters;
  if (slimreduce_get_counters(&counters) != 0) {
    fprintf(stderr, "rank %d: slimreduce_get_counters failed\n", rank);
    ++failures;
  } else if (counters.compressed != 1 || counters.passed_through != 1) {
    fprintf(stderr, "rank %d: %llu calls compressed, %llu passed through; expected 1 and 1\n", rank,
            (unsigned long long)counters.compressed, (unsigned long long)counters.passed_through);
    ++failures;
  }
  const char* compressor = slimreduce_compressor();
  if (rank == 0) {
    printf(
        "SlimReduce %s, compressor %s: %llu compressed, %llu passed through, wire %.0f of %.0f "
        "bytes\n",
        slimreduce_version(), compressor ? compressor : "?",
        (unsigned long long)counters.compressed, (unsigned long long)counters.passed_through,
        counters.wire_sent, counters.wire_baseline);
  }
  free(grads);
  MPI_Finalize();
  return failures ? 1 : 0;
}
