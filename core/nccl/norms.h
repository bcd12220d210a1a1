// SLIMREDUCE_ADAPTIVE on the NCCL path (docs/architecture.md, "Adaptive
// levels"): each compressed call's reduced norm, in kernels/norm.h's fixed
// order (kernels/cuda/norm.cu, the same bits as the host's), is computed on
// the call's stream after its finishing kernels and copied into pinned
// memory behind an event, with no host wait. A shape's norm goes to its
// schedule kLag calls of that shape later: before a plan is decided, the
// pending norms of each of its shapes but the newest kLag - 1 are taken,
// waiting for the device only where it has not got there yet. The lag is
// counted in calls of the shape, which every rank makes alike, so every rank
// records the same norms before the same call and decides the same levels.
// A call in a CUDA graph is not measured (a replay could not be counted).
// CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/status.h"
#include "core/runtime/call_shape.h"
#include "core/runtime/eligibility.h"

namespace slimreduce {

class NcclNorms {
 public:
  // A call's norm is recorded before its shape's kLag-th call after it is
  // decided: one call of slack for the device, in a job's step order.
  static constexpr std::size_t kLag = 2;

  NcclNorms() = default;
  ~NcclNorms();
  NcclNorms(const NcclNorms&) = delete;
  NcclNorms& operator=(const NcclNorms&) = delete;

  // Device scratch measure() needs for `count` values (the norm's own
  // scratch and its result).
  static std::size_t scratch_bytes(std::size_t count);
  // After a compressed call's work was enqueued on `stream` (on `device`):
  // the norm of output[0..count) sent at `level`, in `scratch` (device
  // memory no later work on the stream uses before this call's finishes).
  // `type`: the output's (fp32, fp16 or bf16; 16-bit values widened to fp32).
  Status measure(const CallShape& shape, int level, const void* output, ElemType type,
                 void* scratch, cudaStream_t stream, int device);

  struct Measured {
    int level;
    double norm;
  };
  // Before a call of `shape` is decided: its pending norms but the newest
  // kLag - 1, oldest first; each waited for where the device is behind.
  Status take_due(const CallShape& shape, std::vector<Measured>* due);
  // A communicator went: its pending norms are dropped (their memory reused
  // once their events are reached).
  void forget_communicator(std::uint64_t comm_id);

 private:
  // An event and the pinned double the norm is copied into, on one device.
  struct Slot {
    Slot(cudaEvent_t e, double* p, int d) : event(e), pinned(p), device(d) {}
    ~Slot();
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    cudaEvent_t event;
    double* pinned;
    int device;
  };
  struct Pending {
    int level;
    std::unique_ptr<Slot> slot;
  };
  // A spare slot of `device`, or a new one; nullptr when none can be made.
  std::unique_ptr<Slot> take_slot(int device);

  std::mutex mutex_;  // guards everything below; never held across a wait
  std::map<CallShape, std::deque<Pending>> pending_;
  std::map<int, std::vector<std::unique_ptr<Slot>>> spare_;
  std::vector<std::unique_ptr<Slot>> retired_;  // a gone communicator's, maybe still in flight
};

}  // namespace slimreduce
