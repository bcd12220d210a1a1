// SLIMREDUCE_EF_EVICT_CALLS on the NCCL path (docs/architecture.md, "Error
// feedback"), several ranks under mpirun on the host simulation: a receive
// buffer reduced a few times and then left while another is reduced many
// times loses its residual (and PowerSGD its Q) once its communicator made
// more than the limit's calls without it: its next call starts from zero.
// Each result is checked bit for bit against the reference model, which
// forgets the key where the rule (swept every quarter of the limit, a key
// gone once unused for more than the limit) says; with the limit off the
// model keeps it, so a residual dropped too early, too late or never changes
// a result's bits. The report's calls.ef_evicted counts it, alike on every rank.
// Exit 0: all passed; 1: a check failed.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/hostsim/nccl_ranks_job.h"

using namespace ranks_job;

namespace {

double counter(const char* key) {
  double value = -1;
  CHECK(slimreduce_get_counter(key, &value) == 0, key);
  return value;
}

// Whether a key last used at call `last` of its communicator is gone by call
// `now` (the calls numbered from 1): a sweep at every multiple of a quarter
// of the limit frees the keys unused for more than the limit.
bool evicted_by(std::uint64_t last, std::uint64_t now, std::uint64_t limit) {
  if (limit == 0) return false;
  const std::uint64_t sweep = std::max<std::uint64_t>(1, limit / 4);
  for (std::uint64_t call = last + 1; call <= now; ++call) {
    if (call % sweep == 0 && call > last + limit) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  start_job(&argc, &argv);
  CHECK(mode.ef || mode.powersgd, "a compressor that keeps state per key");
  const std::uint64_t limit =
      std::strtoull(sim::env_or("SLIMREDUCE_EF_EVICT_CALLS", "10000").c_str(), nullptr, 10);
  Comm world = make_world_comm();
  cudaStream_t stream = make_job_stream();
  const std::size_t n = 70001;
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, 4u << 20));
  CUDA_OK(cudaMalloc(&recv, 4u << 20));
  float* left = recv;          // reduced at first, then left
  float* busy = recv + 2 * n;  // reduced on and on
  const double evicted_before = counter("calls.ef_evicted");
  std::uint64_t calls = 0;  // the communicator's compressed calls
  auto reduce = [&](float* into, const std::string& what) {
    Call c = prepare(world, send, into, n, ncclFloat32, ncclSum, stream);
    issue(c);
    verify(what.c_str(), c);
    return ++calls;
  };
  std::uint64_t left_last = 0;
  for (int i = 0; i < 3; ++i)
    left_last = reduce(left, "the buffer later left, call " + std::to_string(i));
  for (int i = 0; i < 20; ++i) reduce(busy, "the busy buffer, call " + std::to_string(i));
  // The left buffer's next call: its key gone, or still there, as the rule says.
  const bool gone = evicted_by(left_last, calls + 1, limit);
  if (gone) model.forget_key(world.id, left);
  reduce(left,
         gone ? "the left buffer again, its key evicted" : "the left buffer again, its key kept");
  const double evicted = counter("calls.ef_evicted") - evicted_before;
  expect(evicted == (gone ? 1 : 0),
         "calls.ef_evicted " + std::to_string(evicted) + " (" + (gone ? "1" : "0") + " expected)");
  // The case under test: a limit below the calls the job made evicts.
  expect(limit >= calls || gone, "a limit of " + std::to_string(limit) + " evicts the left key");
  return end_job(world, send, recv, stream);
}
