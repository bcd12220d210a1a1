/* A measuring shim for the Horovod integration test, not part of SlimReduce.
 *
 * Put it BEFORE libslimreduce.so in LD_PRELOAD. It sees every MPI_Allreduce first, notes the
 * ones SlimReduce would compress (MPI_FLOAT, MPI_SUM, >= SLIMREDUCE_MIN_BYTES, default 64 KiB) by
 * receive buffer and count, and forwards the call unchanged to the next definition
 * (dlsym(RTLD_NEXT), i.e. SlimReduce's). SlimReduce keys error-feedback residuals by
 * (communicator, receive buffer, count, datatype) and resets a buffer's residual when the count
 * changes; this shim counts exactly those events ("key resets") so the test can show whether
 * Horovod's fusion buffer kept a stable count. At MPI_Finalize each rank writes
 * $HVD_CALLLOG.<rank>.json: {"eligible_calls", "buffers", "distinct_counts", "key_resets"}.
 * Only MPI_COMM_WORLD duplicates matter here (Horovod uses one communicator), so the
 * communicator is not part of the key.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_BUFS 256
#define MAX_COUNTS 1024

static struct { const void* buf; int count; } bufs[MAX_BUFS];
static int nbufs;
static int counts[MAX_COUNTS];
static int ncounts;
static unsigned long long eligible_calls, key_resets;
static long long min_bytes = -1;

typedef int (*allreduce_fn)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*finalize_fn)(void);

static void note(const void* buf, int count) {
  int i;
  eligible_calls++;
  for (i = 0; i < ncounts && counts[i] != count; i++) {}
  if (i == ncounts && ncounts < MAX_COUNTS) counts[ncounts++] = count;
  for (i = 0; i < nbufs; i++) {
    if (bufs[i].buf == buf) {
      if (bufs[i].count != count) { key_resets++; bufs[i].count = count; }
      return;
    }
  }
  if (nbufs < MAX_BUFS) { bufs[nbufs].buf = buf; bufs[nbufs].count = count; nbufs++; }
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  static allreduce_fn next;
  if (!next) next = (allreduce_fn)dlsym(RTLD_NEXT, "MPI_Allreduce");
  if (min_bytes < 0) {
    const char* s = getenv("SLIMREDUCE_MIN_BYTES");
    min_bytes = s ? atoll(s) : 65536; /* plain byte counts only: the test never sets units */
  }
  if (datatype == MPI_FLOAT && op == MPI_SUM && 4LL * count >= min_bytes) note(recvbuf, count);
  return next(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Finalize(void) {
  static finalize_fn next;
  const char* prefix = getenv("HVD_CALLLOG");
  int rank = 0;
  if (!next) next = (finalize_fn)dlsym(RTLD_NEXT, "MPI_Finalize");
  if (prefix) {
    char path[4096];
    FILE* f;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(path, sizeof path, "%s.%d.json", prefix, rank);
    f = fopen(path, "w");
    if (f) {
      fprintf(f,
              "{\"rank\": %d, \"eligible_calls\": %llu, \"buffers\": %d, \"distinct_counts\": %d, "
              "\"key_resets\": %llu}\n",
              rank, eligible_calls, nbufs, ncounts, key_resets);
      fclose(f);
    }
  }
  return next();
}
