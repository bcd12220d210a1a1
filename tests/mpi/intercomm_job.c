/* Intercommunicators pass through untouched (docs/architecture.md: only an
 * intracommunicator is eligible). MPI_COMM_WORLD is split into two halves
 * joined by MPI_Intercomm_create; float SUM allreduces large enough to be
 * compressed on an intracommunicator run on the intercommunicator, where each
 * group receives the other group's sum. Each result must equal, bit for bit,
 * PMPI_Allreduce on the same intercommunicator with the same inputs (the real
 * MPI, not through SlimReduce), and the library's counters must show every
 * call passed through and none compressed. Out of place only: the "in place"
 * option does not apply to intercommunicators, where no process sends to
 * itself (MPI 3.1, 5.2.2 "Communicator Argument").
 * Run under LD_PRELOAD with a compressor that would compress these calls, on
 * an even number of ranks, at least 4 (two in each group, for the control).
 * Exit 0: all passed; 1: a check failed; 2: bad usage or no library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/slimreduce.h"

enum { kCalls = 3 };

static int rank, ranks;

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Values no 16-bit format holds exactly, of mixed sign and magnitude: a
 * compressed sum could not come out bit-identical by chance. */
static void fill(float* v, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = splitmix64(seed ^ splitmix64(i));
    const double unit = (double)(h >> 11) / 9007199254740992.0; /* [0, 1) */
    v[i] = (float)((unit - 0.5) * (double)(1u << (h & 15)) * 1.000123);
  }
}

static int get_counters(slimreduce_counters* out) {
  typedef int (*Get)(slimreduce_counters*);
  const Get get = (Get)dlsym(RTLD_DEFAULT, "slimreduce_get_counters");
  return get ? get(out) : -1;
}

/* The two halves of MPI_COMM_WORLD as one intercommunicator. */
static MPI_Comm make_intercomm(MPI_Comm* half) {
  const int group = rank < ranks / 2 ? 0 : 1;
  MPI_Comm_split(MPI_COMM_WORLD, group, rank, half);
  const int remote_leader = group == 0 ? ranks / 2 : 0; /* in MPI_COMM_WORLD */
  MPI_Comm inter = MPI_COMM_NULL;
  MPI_Intercomm_create(*half, 0, MPI_COMM_WORLD, remote_leader, 99, &inter);
  return inter;
}

/* One call through SlimReduce and its reference through the real MPI; returns
 * 1 when their bits differ (and with report, prints the first difference). */
static int one_call(MPI_Comm comm, int count, uint64_t seed, int report) {
  float* send = calloc((size_t)count, sizeof(float));
  float* got = malloc(count * sizeof(float));
  float* want = malloc(count * sizeof(float));
  fill(send, (size_t)count, seed + (uint64_t)rank * 7919);
  MPI_Allreduce(send, got, count, MPI_FLOAT, MPI_SUM, comm);
  PMPI_Allreduce(send, want, count, MPI_FLOAT, MPI_SUM, comm);
  int differ = 0;
  for (int i = 0; i < count && !differ; ++i) {
    if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (report)
        printf("rank %d: %d floats, element %d: got %a, PMPI_Allreduce gave %a\n", rank, count, i,
               got[i], want[i]);
      differ = 1;
    }
  }
  free(send);
  free(got);
  free(want);
  return differ;
}

/* The control: the same kind of call on an intracommunicator (this half) is
 * compressed, and its bits differ from the real MPI's, so the checks above
 * could see a compressed call. Returns the failures. */
static int control(MPI_Comm half) {
  slimreduce_counters before, after;
  get_counters(&before);
  const int compressed_bits_differ = one_call(half, 100000, 3000, 0);
  get_counters(&after);
  const int compressed = after.compressed - before.compressed == 1;
  if (!compressed || !compressed_bits_differ) {
    printf("rank %d: control on an intracommunicator: %s, %s from PMPI_Allreduce's\n", rank,
           compressed ? "compressed" : "not compressed",
           compressed_bits_differ ? "differs" : "same");
  }
  return !compressed + !compressed_bits_differ;
}

static int run(MPI_Comm inter) {
  const int counts[kCalls] = {100000, 100000, 4099};
  slimreduce_counters before, after;
  if (get_counters(&before) != 0) {
    printf("rank %d: slimreduce_get_counters is not there: run under LD_PRELOAD\n", rank);
    return -1;
  }
  int failed = 0;
  for (int k = 0; k < kCalls; ++k) failed += one_call(inter, counts[k], 1000 + (uint64_t)k, 1);
  get_counters(&after);
  const uint64_t compressed = after.compressed - before.compressed;
  const uint64_t passed = after.passed_through - before.passed_through;
  if (compressed != 0 || passed != kCalls) {
    printf("rank %d: %llu compressed, %llu passed through; want 0 and %d\n", rank,
           (unsigned long long)compressed, (unsigned long long)passed, kCalls);
    ++failed;
  }
  return failed;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 4 || ranks % 2 != 0) {
    if (rank == 0) printf("usage: an even number of ranks, at least 4\n");
    MPI_Finalize();
    return 2;
  }
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm inter = make_intercomm(&half);
  int failed = run(inter);
  const int unusable = failed < 0;
  failed = unusable ? 1 : failed + control(half);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  /* Through the real MPI: not a call of the kind checked above. */
  PMPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("intercomm_job: %d ranks, %s: %d calls, %d failed checks\n", ranks,
           getenv("SLIMREDUCE_COMPRESSOR") ? getenv("SLIMREDUCE_COMPRESSOR") : "(unset)", kCalls,
           failed);
  }
  MPI_Finalize();
  return unusable ? 2 : failed ? 1 : 0;
}
