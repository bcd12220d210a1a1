// Threads on the NCCL path, as PyTorch drives it (one process, several
// communicators, a watchdog that aborts or destroys): three threads each
// reduce on a communicator of their own, in groups and alone, while a fourth
// makes a communicator, reduces once, and destroys or aborts it, over and
// over, and the main thread reads the counters. Every result is checked bit
// for bit against the model (reference_model.h), one model per thread; every
// call must be counted. Run on the host simulation (one rank per
// communicator, so no transport is involved: what is tested is SlimReduce's
// state under threads). Exit 0: all passed; 1: a check failed.
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "interpose/slimreduce.h"
#include "kernels/element_rules.h"
#include "tests/hostsim/reference_model.h"

namespace {

namespace k = slimreduce::kernels;
namespace sim = slimreduce::hostsim;

#define CHECK(ok, what)                                         \
  do {                                                          \
    if (!(ok)) {                                                \
      std::printf("FAIL %s:%d %s\n", __FILE__, __LINE__, what); \
      std::exit(1);                                             \
    }                                                           \
  } while (0)
#define CUDA_OK(x) CHECK((x) == cudaSuccess, #x)
#define NCCL_OK(x) CHECK((x) == ncclSuccess, #x)

const sim::Mode mode;
std::atomic<int> failures{0};
std::atomic<unsigned long long> calls_made{0};
std::atomic<int> next_comm_id{0};
constexpr int kSteps = 200;

ncclComm_t make_comm() {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t comm = nullptr;
  NCCL_OK(ncclCommInitRank(&comm, 1, id, 0));
  return comm;
}

// One thread's calls: its stream, its buffers, its model.
class Worker {
 public:
  explicit Worker(unsigned seed) : seed_(seed), model_(mode) {
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    CUDA_OK(cudaMalloc(&send_, kFloats * 4));
    CUDA_OK(cudaMalloc(&recv_, kFloats * 4));
  }
  ~Worker() {
    cudaFree(send_);
    cudaFree(recv_);
    cudaStreamDestroy(stream_);
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // A group of `parts` calls on comm (sum, or avg), each checked.
  void group(ncclComm_t comm, int comm_id, int parts, ncclRedOp_t op) {
    std::vector<sim::ModelCall> calls;
    for (int p = 0; p < parts; ++p) {
      const std::size_t n = p == 0 ? 16411 : 16384;  // a ragged one, then aligned ones (64 KiB)
      float* send = send_ + p * kSlot;
      float* recv = recv_ + p * kSlot;
      sim::ModelCall c{comm_id, 1, recv, n, ncclFloat32, op, {}};
      c.inputs.push_back(sim::values_for(seed_ * 1000u + next_++, 0, n, ncclFloat32));
      CUDA_OK(cudaMemcpyAsync(send, c.inputs[0].data(), n * 4, cudaMemcpyHostToDevice, stream_));
      calls.push_back(std::move(c));
    }
    NCCL_OK(ncclGroupStart());
    for (int p = 0; p < parts; ++p) {
      NCCL_OK(ncclAllReduce(send_ + p * kSlot, recv_ + p * kSlot, calls[p].n, ncclFloat32, op, comm,
                            stream_));
    }
    NCCL_OK(ncclGroupEnd());
    calls_made += parts;
    for (const sim::ModelCall& c : calls) check(c);
  }

  void forget(int comm_id) { model_.forget(comm_id); }

 private:
  static constexpr std::size_t kSlot = 131072;
  static constexpr std::size_t kFloats = 3 * kSlot;

  void check(const sim::ModelCall& c) {
    std::vector<float> got(c.n);
    CUDA_OK(cudaMemcpyAsync(got.data(), c.recv, c.n * 4, cudaMemcpyDeviceToHost, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
    const std::vector<float> want = model_.expected(c);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < c.n; ++i) wrong += k::float_bits(got[i]) != k::float_bits(want[i]);
    if (wrong) {
      std::printf("FAIL thread %u: %zu of %zu values differ\n", seed_, wrong, c.n);
      ++failures;
    }
  }

  unsigned seed_;
  unsigned next_ = 0;
  sim::Model model_;
  cudaStream_t stream_ = nullptr;
  float* send_ = nullptr;
  float* recv_ = nullptr;
};

// A training thread: its own communicator for the whole run.
void train(unsigned seed) {
  Worker worker(seed);
  ncclComm_t comm = make_comm();
  const int comm_id = next_comm_id++;
  for (int step = 0; step < kSteps; ++step) {
    worker.group(comm, comm_id, 1 + step % 3, step % 2 ? ncclAvg : ncclSum);
  }
  NCCL_OK(ncclCommDestroy(comm));
}

// A watchdog-like thread: communicators made, used once, destroyed or aborted.
void churn(unsigned seed) {
  Worker worker(seed);
  for (int step = 0; step < kSteps; ++step) {
    ncclComm_t comm = make_comm();
    const int comm_id = next_comm_id++;
    worker.group(comm, comm_id, 2, ncclSum);
    NCCL_OK(step % 2 ? ncclCommAbort(comm) : ncclCommDestroy(comm));
    worker.forget(comm_id);
  }
}

}  // namespace

int main() {
  std::vector<std::thread> threads;
  for (unsigned t = 1; t <= 3; ++t) threads.emplace_back(train, t);
  threads.emplace_back(churn, 4u);
  slimreduce_counters seen{};
  for (int read = 0; read < 50;
       ++read) {  // read while the threads run (-1 before their first call)
    slimreduce_nccl_get_counters(&seen);
    std::this_thread::yield();
  }
  for (std::thread& t : threads) t.join();
  slimreduce_counters c{};
  CHECK(slimreduce_nccl_get_counters(&c) == 0, "slimreduce_nccl_get_counters");
  const bool counted = c.intercepted == calls_made &&
                       c.compressed + c.passed_through == c.intercepted &&
                       (mode.compressor == "none" ? c.compressed == 0 : c.compressed == calls_made);
  std::printf(
      "%s counters: %llu calls made, intercepted %llu, compressed %llu, passed through %llu\n",
      counted ? "ok  " : "FAIL", calls_made.load(), static_cast<unsigned long long>(c.intercepted),
      static_cast<unsigned long long>(c.compressed),
      static_cast<unsigned long long>(c.passed_through));
  failures += !counted;
  std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures.load());
  return failures ? 1 : 0;
}
