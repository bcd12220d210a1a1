/* Memory that must not grow (docs/reliability.md): a job that (1) frees and
 * makes a communicator 1,000 times, with a compressed MPI_Allreduce and a
 * queued MPI_Iallreduce on each (their private duplicates, workspaces,
 * residuals, queues and, hierarchically, node communicators must go with
 * it), and (2) makes 10,000 compressed calls of changing sizes on fresh
 * buffers (residual keys come and go; workspaces grow to the largest and
 * stay). It measures its resident set (VmRSS) after a warm-up round of each
 * and at the end, and fails when it grew by more than LIMIT_KIB (argv[1],
 * default 16384): a leak of one communicator's state or one residual per
 * cycle is far larger. Results are checked against exact sums (small
 * integers, exact in every compressor at ratio 1). argv[2] and argv[3] set
 * the cycles and calls (defaults 1000 and 10000): the LeakSanitizer run
 * (tests/check_sanitized.sh) needs each path taken, not the counts that make
 * a growth of the resident set stand out. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long rss_kib(void) {
  FILE* status = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (status && fgets(line, sizeof line, status)) {
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  }
  if (status) fclose(status);
  return kib;
}

static int reduce_and_check(MPI_Comm comm, int count, int salt, int queued) {
  int rank = 0, size = 1, wrong = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  float* values = malloc(sizeof(float) * (size_t)count);
  for (int i = 0; i < count; ++i) values[i] = (float)((i + rank + salt) % 4);
  if (queued) {
    MPI_Request request;
    MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_FLOAT, MPI_SUM, comm, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  } else {
    MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_FLOAT, MPI_SUM, comm);
  }
  /* Element i's sum over the ranks depends on (i + salt) % 4 alone: four
   * sums, not one per element and rank (which took a seventh of the job's time). */
  float expected[4] = {0, 0, 0, 0};
  for (int phase = 0; phase < 4; ++phase) {
    for (int r = 0; r < size; ++r) expected[phase] += (float)((phase + r) % 4);
  }
  for (int i = 0; i < count; ++i) wrong += values[i] != expected[(i + salt) % 4];
  free(values);
  return wrong;
}

static int communicator_cycles(int cycles) {
  int wrong = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    wrong += reduce_and_check(comm, 1 << 15, cycle, 0);
    wrong += reduce_and_check(comm, 1 << 15, cycle, 1);
    MPI_Comm_free(&comm);
  }
  return wrong;
}

static int changing_sizes(int calls) {
  int wrong = 0;
  for (int call = 0; call < calls; ++call) {
    const int count = (1 << 14) + (call * 7919) % (1 << 16);  /* 64 KiB to 320 KiB */
    wrong += reduce_and_check(MPI_COMM_WORLD, count, call, call % 3 == 0);
  }
  return wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const long limit = argc > 1 ? atol(argv[1]) : 16384;
  const int cycles = argc > 2 ? atoi(argv[2]) : 1000, calls = argc > 3 ? atoi(argv[3]) : 10000;
  if (cycles < 1 || calls < 1) {
    fprintf(stderr, "memory_job: cycles and calls must be positive (got %d, %d)\n", cycles, calls);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int wrong = communicator_cycles(50) + changing_sizes(500);  /* warm-up: pools, arenas */
  const long before = rss_kib();
  wrong += communicator_cycles(cycles);
  const long after_cycles = rss_kib();
  wrong += changing_sizes(calls);
  const long after = rss_kib();
  const long grew = after - before;
  long worst = grew;
  MPI_Allreduce(&grew, &worst, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("memory_job: RSS %ld KiB after warm-up, %ld after %d communicator cycles, %ld after "
           "%d calls of changing sizes; most growth over ranks %ld KiB (limit %ld)\n",
           before, after_cycles, cycles, after, calls, worst, limit);
  }
  if (wrong) fprintf(stderr, "rank %d: %d wrong values\n", rank, wrong);
  MPI_Finalize();
  /* The sanitizer check reads this: a rank that dies in teardown never prints it. */
  printf("memory_job: rank %d finalized\n", rank);
  fflush(stdout);
  return wrong || worst > limit || before < 0 ? 1 : 0;
}
