// Where a golden or warm-start run's buffers live and how it reduces them:
// MPI_Allreduce on host buffers (libslimreduce.so preloaded), MPI_Allreduce
// on device buffers and ncclAllReduce (both on the host simulation of the
// GPU, GOLDEN_SIM). Shared by tests/golden/golden_app.cc and
// tests/golden/warm_start_app.cc.
#pragma once

#include <dlfcn.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "interpose/slimreduce.h"

#ifdef GOLDEN_SIM
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace golden {

inline int rank = 0;
inline int ranks = 1;

// The counters through the preloaded library (the host program links no SlimReduce).
inline bool counters_of(const char* function, slimreduce_counters* out) {
  using Get = int (*)(slimreduce_counters*);
  const auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, function));
  return get && get(out) == 0;
}

inline slimreduce_counters mpi_counters() {
  slimreduce_counters counters{};
  if (!counters_of("slimreduce_get_counters", &counters)) {
    std::printf("FAIL rank %d: no SlimReduce counters (is the library preloaded?)\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return counters;
}

// Where the buffers live and how a call is made: host MPI, device MPI, NCCL.
class Path {
 public:
  virtual ~Path() = default;
  virtual void* alloc(std::size_t bytes) = 0;
  virtual void put(void* to, const void* from, std::size_t bytes) = 0;
  virtual void get(void* to, const void* from, std::size_t bytes) = 0;
  // One float sum (in_place: send is recv).
  virtual void sum(const void* send, void* recv, std::size_t n) = 0;
  // The compressed-call count of this path's side (the counters the library keeps).
  virtual std::uint64_t compressed_so_far() = 0;
  // Whether a passed-through call is checked against PMPI_Allreduce (MPI paths).
  virtual bool mpi_sums() const { return true; }
};

// A float sum through MPI, blocking or handed over (in_place: send is recv).
inline void mpi_sum(const void* send, void* recv, std::size_t n) {
  MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
}
inline void mpi_start_sum(const void* send, void* recv, std::size_t n, MPI_Request* request) {
  MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                 MPI_COMM_WORLD, request);
}

class HostMpi : public Path {
 public:
  void* alloc(std::size_t bytes) override {
    blocks_.emplace_back(bytes);
    return blocks_.back().data();
  }
  void put(void* to, const void* from, std::size_t bytes) override { std::memcpy(to, from, bytes); }
  void get(void* to, const void* from, std::size_t bytes) override { std::memcpy(to, from, bytes); }
  void sum(const void* send, void* recv, std::size_t n) override { mpi_sum(send, recv, n); }
  std::uint64_t compressed_so_far() override { return mpi_counters().compressed; }

 private:
  std::vector<std::vector<std::byte>> blocks_;  // alive to the end: residual keys stay apart
};

#ifdef GOLDEN_SIM

#define CUDA_OK(x) ok((x) == cudaSuccess, #x)
#define NCCL_OK(x) ok((x) == ncclSuccess, #x)

inline void ok(bool good, const char* what) {
  if (good) return;
  std::printf("FAIL rank %d: %s\n", rank, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

class DeviceMemory : public Path {
 public:
  ~DeviceMemory() override {
    for (void* p : blocks_) cudaFree(p);
  }
  void* alloc(std::size_t bytes) override {
    void* p = nullptr;
    CUDA_OK(cudaMalloc(&p, bytes));
    blocks_.push_back(p);
    return p;
  }
  // A cudaMemcpy from pageable memory may return before its data lands (on
  // the legacy default stream). The NCCL path's stream is non-blocking, so
  // not joined to that stream, and the MPI that reads device memory here
  // stands in for a CUDA-aware one, which asks for the data to be ready:
  // wait for it, as a job would.
  void put(void* to, const void* from, std::size_t bytes) override {
    CUDA_OK(cudaMemcpy(to, from, bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaStreamSynchronize(cudaStreamLegacy));
  }
  void get(void* to, const void* from, std::size_t bytes) override {
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(to, from, bytes, cudaMemcpyDeviceToHost));
  }

 private:
  std::vector<void*> blocks_;
};

class DeviceMpi : public DeviceMemory {
 public:
  void sum(const void* send, void* recv, std::size_t n) override { mpi_sum(send, recv, n); }
  std::uint64_t compressed_so_far() override { return mpi_counters().compressed; }
};

class Nccl : public DeviceMemory {
 public:
  Nccl() {
    ncclUniqueId id;
    if (rank == 0) NCCL_OK(ncclGetUniqueId(&id));
    PMPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_OK(ncclCommInitRank(&comm_, ranks, id, rank));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~Nccl() override { ncclCommDestroy(comm_); }
  void sum(const void* send, void* recv, std::size_t n) override { issue(send, recv, n, ncclSum); }
  std::uint64_t compressed_so_far() override { return 0; }
  bool mpi_sums() const override { return false; }
  void issue(const void* send, void* recv, std::size_t n, ncclRedOp_t op,
             ncclDataType_t type = ncclFloat32) {
    NCCL_OK(ncclAllReduce(send, recv, n, type, op, comm_, stream_));
  }
  void get(void* to, const void* from, std::size_t bytes) override {
    CUDA_OK(cudaStreamSynchronize(stream_));
    DeviceMemory::get(to, from, bytes);
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

#endif  // GOLDEN_SIM

}  // namespace golden
