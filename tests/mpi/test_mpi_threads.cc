// Compressed allreduces from several threads at once (MPI_THREAD_MULTIPLE),
// each thread on its own communicator, as a job with a communication thread
// per model part does. Concurrency must not change a single bit: every
// thread's results, step after step, must equal those of the same calls made
// one thread at a time afterwards, on fresh communicators (fresh residuals),
// and every call must be counted as compressed. One more thread makes, uses
// and frees a communicator per step meanwhile. Run under LD_PRELOAD with any
// compressor; SLIMREDUCE_MIN_BYTES must let kCount floats through.
#include <algorithm>
#include <cstdio>
#include <thread>

#include "tests/mpi/mpi_helpers.h"

namespace slimreduce::testing {
namespace {

constexpr int kThreads = 3;
constexpr int kSteps = 6;
constexpr int kCount = 50000;  // 200 KB: over the default 64 KiB threshold

// One thread's job: kSteps reductions on comm, in place on even steps, each
// step's result hashed.
std::vector<std::uint64_t> run_steps(MPI_Comm comm, int thread) {
  std::vector<std::uint64_t> hashes;
  std::vector<float> gradient(kCount), reduced(kCount);
  for (int step = 0; step < kSteps; ++step) {
    const std::uint64_t seed = static_cast<std::uint64_t>(thread) * 1000 + step;
    // Into the same buffers every step: residuals are kept per receive buffer.
    const std::vector<float> inputs = inputs_of(world_rank(), seed, kCount);
    std::copy(inputs.begin(), inputs.end(), gradient.begin());
    int rc = MPI_SUCCESS;
    if (step % 2 == 0) {
      rc = MPI_Allreduce(MPI_IN_PLACE, gradient.data(), kCount, MPI_FLOAT, MPI_SUM, comm);
      std::copy(gradient.begin(), gradient.end(), reduced.begin());
    } else {
      rc = MPI_Allreduce(gradient.data(), reduced.data(), kCount, MPI_FLOAT, MPI_SUM, comm);
    }
    hashes.push_back(rc == MPI_SUCCESS ? fnv1a(reduced.data(), kCount * sizeof(float)) : 0);
    // A small call, passed through and counted in this thread's own tally,
    // which must outlive the thread.
    int flag = 1, flags = 0;
    MPI_Allreduce(&flag, &flags, 1, MPI_INT, MPI_SUM, comm);
    if (flags != world_size()) hashes.back() = 0;
  }
  return hashes;
}

// A thread that makes, uses and frees a communicator per step, while the
// others reduce: freeing one clears every thread's memory of communicators.
std::vector<std::uint64_t> churn_communicators(int thread) {
  std::vector<std::uint64_t> hashes;
  for (int step = 0; step < kSteps; ++step) {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    std::vector<float> gradient = inputs_of(world_rank(), thread * 1000 + step, kCount);
    const int rc = MPI_Allreduce(MPI_IN_PLACE, gradient.data(), kCount, MPI_FLOAT, MPI_SUM, comm);
    hashes.push_back(rc == MPI_SUCCESS ? fnv1a(gradient.data(), kCount * sizeof(float)) : 0);
    MPI_Comm_free(&comm);
  }
  return hashes;
}

std::vector<MPI_Comm> duplicates_of_world(int how_many) {
  std::vector<MPI_Comm> comms(how_many, MPI_COMM_NULL);
  for (MPI_Comm& comm : comms) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return comms;
}

int check(bool ok, const char* what) {
  if (!ok) std::fprintf(stderr, "[rank %d] FAILED: %s\n", world_rank(), what);
  return ok ? 0 : 1;
}

int run() {
  int failures = 0;
  slimreduce_counters before{}, after{};
  failures += check(read_counters(&before), "libslimreduce.so is preloaded");

  std::vector<MPI_Comm> concurrent = duplicates_of_world(kThreads);
  std::vector<std::vector<std::uint64_t>> seen(kThreads);
  std::vector<std::uint64_t> churned;
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] { seen[t] = run_steps(concurrent[t], t); });
    }
    threads.emplace_back([&] { churned = churn_communicators(kThreads); });
  }
  failures += check(churned == churn_communicators(kThreads),
                    "a thread freeing communicators meanwhile gets the replay's results");
  std::vector<MPI_Comm> sequential = duplicates_of_world(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const std::vector<std::uint64_t> replayed = run_steps(sequential[t], t);
    failures += check(replayed == seen[t], "concurrent results equal the one-at-a-time replay");
    failures += check(identical_on_all_ranks(seen[t].data(), seen[t].size() * 8, MPI_COMM_WORLD),
                      "the same results on every rank");
    for (std::uint64_t hash : seen[t]) failures += check(hash != 0, "every call succeeded");
  }
  failures += check(read_counters(&after), "counters readable");
  // Warm-up counts per shape: kSteps calls on each thread's communicator, one
  // on each communicator the fourth thread makes; each run twice (concurrent, replay).
  const std::uint64_t warmup = std::stoull(env_or("SLIMREDUCE_WARMUP_STEPS", "0"));
  const std::uint64_t past_warmup = warmup < kSteps ? kSteps - warmup : 0;
  const std::uint64_t expected = 2ull * kThreads * past_warmup + (warmup == 0 ? 2ull * kSteps : 0);
  failures +=
      check(after.compressed - before.compressed == expected, "every call counted as compressed");
  const std::uint64_t eligible = 2ull * kThreads * kSteps + 2ull * kSteps;
  const std::uint64_t small = 2ull * kThreads * kSteps;
  failures += check(after.passed_through - before.passed_through == small + eligible - expected,
                    "every small or warm-up call counted as passed through, threads gone or not");
  for (MPI_Comm& comm : concurrent) MPI_Comm_free(&comm);
  for (MPI_Comm& comm : sequential) MPI_Comm_free(&comm);
  return failures;
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int failures = 0;
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "MPI gave thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
    failures = 1;
  } else {
    failures = slimreduce::testing::run();
  }
  int any = 0;
  PMPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (slimreduce::testing::world_rank() == 0) std::printf("%s\n", any ? "FAILED" : "PASSED");
  MPI_Finalize();
  return any ? 1 : 0;
}
