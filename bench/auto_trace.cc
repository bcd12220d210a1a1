// auto_trace SECONDS BYTES: MPI_Allreduce of BYTES (floats, in place, a fresh
// gradient each call, no barrier: as a training loop calls it) again and
// again for about SECONDS, under LD_PRELOAD=libslimreduce.so with
// SLIMREDUCE_COMPRESSOR=auto. Rank 0 prints one CSV line per call: its
// number, when it began (seconds since the first), its time (ms, rank 0's
// own) and the candidate it went with, read from the bytes it sent
// (slimreduce_get_counters: fp32's bytes: none; half: fp16; about a quarter:
// int8), after a line with the wall clock of its first call ("# start_epoch
// S"). bench/auto_link.sh changes the link under it.
#include <dlfcn.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "interpose/slimreduce.h"

namespace {

bool read_counters(slimreduce_counters* out) {
  using Fn = int (*)(slimreduce_counters*);
  static auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "slimreduce_get_counters"));
  return fn && fn(out) == 0;
}

const char* sent_as(double ratio) {
  if (ratio > 0.9) return "none";
  return ratio > 0.4 ? "fp16" : "int8";
}

struct Call {
  double begin_s, ms;
  const char* candidate;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  slimreduce_counters probe{};
  if (argc != 3 || !read_counters(&probe)) {
    if (rank == 0)
      std::fprintf(stderr, "usage: auto_trace SECONDS BYTES (under LD_PRELOAD=libslimreduce.so)\n");
    MPI_Finalize();
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  const std::size_t count = std::strtoull(argv[2], nullptr, 10) / sizeof(float);
  std::vector<float> input(count), work(count);
  for (std::size_t i = 0; i < count; ++i) input[i] = float((i * 2654435761u + rank) % 1000) * 1e-3f;
  std::vector<Call> calls;
  const double start = MPI_Wtime();
  const double start_epoch =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  int go = 1;
  while (go) {
    std::memcpy(work.data(), input.data(), count * sizeof(float));
    slimreduce_counters before{}, after{};
    read_counters(&before);
    const double begin = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, work.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double end = MPI_Wtime();
    read_counters(&after);
    calls.push_back({begin - start, (end - begin) * 1e3,
                     sent_as((after.wire_sent - before.wire_sent) /
                             (after.wire_baseline - before.wire_baseline))});
    // Every rank makes the same calls: rank 0's clock ends the loop for all.
    if (calls.size() % 8 == 0) {
      go = rank == 0 ? MPI_Wtime() - start < seconds : 0;
      MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) {
    std::printf("# start_epoch %.6f\ncall,begin_s,ms,candidate\n", start_epoch);
    for (std::size_t i = 0; i < calls.size(); ++i)
      std::printf("%zu,%.6f,%.3f,%s\n", i, calls[i].begin_s, calls[i].ms, calls[i].candidate);
  }
  MPI_Finalize();
  return 0;
}
