// SLIMREDUCE_COMPRESSOR=auto's cost model on the NCCL path (docs/architecture.md,
// "The measured choice"): the NCCL side hands each call's communicator size to
// the chooser (AutoChooser::next's `ranks`); without it there is no model.
// Several ranks under mpirun on the host simulation, candidates none and
// top-k 0.01 over a link emulated at HOSTSIM_WIRE_NS_PER_BYTE, where plain
// fp32 costs many times what top-k does. One size class settles alone first;
// then a class four times larger starts. With one other class agreed there is
// no line through two medians: only the model, scaling plain's median at the
// first class, predicts plain at the new one, far more than `hopeless` (3x)
// times top-k, so the new class's first round leaves plain out and probes
// top-k alone (3 probe calls, not 6). Each result must be finite and the same
// on every rank; no host wait for the times after the first exchange.
// Exit 0: all passed.
#include <cmath>
#include <string>
#include <vector>

#include "tests/hostsim/nccl_ranks_job.h"

using namespace ranks_job;

namespace {

constexpr int kCallsPerClass = 16;  // a round of 3 calls a candidate, its exchange, the choice

double probe_calls() {
  double probes = 0;
  CHECK(slimreduce_get_counter("auto.probe_calls", &probes) == 0, "auto.probe_calls");
  return probes;
}

// kCallsPerClass calls of n floats; each result finite and the same on every rank.
void run_class(Comm& world, float* send, float* recv, std::size_t n, cudaStream_t stream) {
  for (int i = 0; i < kCallsPerClass; ++i) {
    const Call c = prepare(world, send, recv, n, ncclFloat32, ncclSum, stream);
    issue(c);
    double sums[2] = {0, 0};
    bool finite = true;
    for (float x : read_back(c)) {
      finite = finite && std::isfinite(x);
      sums[0] += x;
    }
    sums[1] = -sums[0];
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    expect(finite && sums[0] == -sums[1], std::to_string(n) + " floats, call " + std::to_string(i) +
                                              ": finite and the same on every rank");
  }
}

}  // namespace

int main(int argc, char** argv) {
  start_job(&argc, &argv);
  CHECK(mode.compressor == "auto", "runs with SLIMREDUCE_COMPRESSOR=auto");
  CHECK(sim::env_or("SLIMREDUCE_AUTO_CANDIDATES", "") == "none,topk",
        "runs with SLIMREDUCE_AUTO_CANDIDATES=none,topk");
  Comm world = make_world_comm();
  cudaStream_t stream = make_job_stream();
  const std::size_t small = 65536, large = 4 * small;  // 256 KiB, then 1 MiB
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, large * sizeof(float)));
  CUDA_OK(cudaMalloc(&recv, large * sizeof(float)));

  run_class(world, send, recv, small, stream);
  const double first = probe_calls();
  expect(first == 6, "the first class probed both candidates, 3 calls each: " +
                         std::to_string(first) + " probe calls");
  run_class(world, send, recv, large, stream);
  const double second = probe_calls() - first;
  expect(second == 3,
         "the second class's first round left plain out by the model's prediction, "
         "top-k probed alone: " +
             std::to_string(second) + " probe calls (6: plain probed)");
  double waits = -1;
  CHECK(slimreduce_get_counter("auto.waits", &waits) == 0, "auto.waits");
  expect(waits == 0, "host waits for auto's times: " + std::to_string(waits));
  return end_job(world, send, recv, stream);
}
