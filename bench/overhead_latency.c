/* overhead_latency: an OSU-style MPI_Allreduce latency loop over small
 * messages, 8 B to 64 KiB (by default), meant to be run once plainly and once
 * with libslimreduce.so preloaded on calls the library must only pass through
 * (below SLIMREDUCE_MIN_BYTES, or an ineligible datatype): the ratio of the two
 * is what interposition costs a job. bench/run_all.sh does both runs.
 *
 *   overhead_latency [-b MIN] [-e MAX] [-n BLOCKS] [-k CALLS] [-t float|int]
 *
 * Each size runs BLOCKS blocks of CALLS back-to-back calls (as OSU's loop
 * does); a block's time / CALLS is one sample. Timing blocks rather than
 * single calls keeps the clock's own cost out; the median over blocks keeps
 * a busy, shared machine's hiccups out. Reported: the median per rank, max
 * over ranks, in microseconds, for MPI_Allreduce and for PMPI_Allreduce. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* values, int n) {
  qsort(values, (size_t)n, sizeof *values, compare_doubles);
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

/* The library, if preloaded, says so through its C API. */
static void describe_library(char* text, size_t size) {
  const char* (*version)(void) = (const char* (*)(void))dlsym(RTLD_DEFAULT, "slimreduce_version");
  const char* (*compressor)(void) =
      (const char* (*)(void))dlsym(RTLD_DEFAULT, "slimreduce_compressor");
  if (!version || !compressor) {
    snprintf(text, size, "libslimreduce.so not loaded");
    return;
  }
  const char* min_bytes = getenv("SLIMREDUCE_MIN_BYTES");
  snprintf(text, size, "libslimreduce.so %s preloaded, compressor %s, SLIMREDUCE_MIN_BYTES=%s",
           version(), compressor(), min_bytes ? min_bytes : "(default)");
}

typedef int (*allreduce_fn)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);

static double time_block(allreduce_fn allreduce, void* buf, int count, MPI_Datatype type,
                         int calls) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < calls; ++i)
    allreduce(MPI_IN_PLACE, buf, count, type, MPI_SUM, MPI_COMM_WORLD);
  return (MPI_Wtime() - start) / calls;
}

/* Per-call time (median over blocks) through MPI_Allreduce, which SlimReduce
 * intercepts when preloaded, and through PMPI_Allreduce, which goes straight
 * to Open MPI. Blocks of the two alternate, so a busy machine's drift hits
 * both alike: their ratio is the overhead measured within one process.
 * Without the library both are the same path, and the ratio shows the noise. */
static void measure(void* buf, int count, MPI_Datatype type, int blocks, int calls,
                    double* intercepted, double* direct, double* paired_ratio) {
  double* a = malloc(sizeof(double) * (size_t)blocks);
  double* b = malloc(sizeof(double) * (size_t)blocks);
  double* ratio = malloc(sizeof(double) * (size_t)blocks);
  time_block(MPI_Allreduce, buf, count, type, calls); /* warm-up: connections, caches */
  for (int i = 0; i < blocks; ++i) {
    /* Which goes first alternates too, so neither always follows the other. */
    const int pmpi_first = i % 2;
    if (pmpi_first) b[i] = time_block(PMPI_Allreduce, buf, count, type, calls);
    a[i] = time_block(MPI_Allreduce, buf, count, type, calls);
    if (!pmpi_first) b[i] = time_block(PMPI_Allreduce, buf, count, type, calls);
    ratio[i] = a[i] / b[i];
  }
  /* The ratio of neighbouring blocks cancels the machine's drift (other load,
   * frequency) better than the ratio of the two medians does. */
  *paired_ratio = median(ratio, blocks);
  *intercepted = median(a, blocks);
  *direct = median(b, blocks);
  free(a);
  free(b);
  free(ratio);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  long min_bytes = 8, max_bytes = 65536;
  int blocks = 100, calls = 50, rank = 0, ranks = 1;
  MPI_Datatype type = MPI_FLOAT;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-b")) min_bytes = atol(argv[i + 1]);
    if (!strcmp(argv[i], "-e")) max_bytes = atol(argv[i + 1]);
    if (!strcmp(argv[i], "-n")) blocks = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-k")) calls = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-t")) type = strcmp(argv[i + 1], "int") ? MPI_FLOAT : MPI_INT;
  }
  if (min_bytes < 4 || max_bytes < min_bytes || blocks < 1 || calls < 1) {
    fprintf(stderr,
            "usage: overhead_latency [-b MIN] [-e MAX] [-n BLOCKS] [-k CALLS] [-t float|int]\n");
    MPI_Finalize();
    return 2;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  char library[256];
  describe_library(library, sizeof library);
  if (rank == 0) {
    printf("# overhead_latency: MPI_Allreduce(MPI_IN_PLACE, %s, MPI_SUM), %d ranks, %s\n",
           type == MPI_FLOAT ? "MPI_FLOAT" : "MPI_INT", ranks, library);
    printf(
        "# median over %d blocks of %d calls, max over ranks; pmpi_us: the same through\n"
        "# PMPI_Allreduce (never intercepted), in blocks alternating with MPI_Allreduce's;\n"
        "# paired_ratio: median over block pairs of MPI/PMPI time, max over ranks\n"
        "# bytes latency_us pmpi_us paired_ratio\n",
        blocks, calls);
  }
  void* buf = calloc((size_t)max_bytes / 4 + 1, 4); /* zeros: sums stay finite */
  for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    double mine[3], slowest[3] = {0, 0, 0};
    measure(buf, (int)(bytes / 4), type, blocks, calls, &mine[0], &mine[1], &mine[2]);
    MPI_Reduce(mine, slowest, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
      printf("%ld %.3f %.3f %.4f\n", bytes, slowest[0] * 1e6, slowest[1] * 1e6, slowest[2]);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
