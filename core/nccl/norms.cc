#include "core/nccl/norms.h"

#include <utility>

#include "core/gpu/cuda_support.h"
#include "kernels/device.h"

namespace slimreduce {
namespace {

// Where the norm's own result sits in measure()'s scratch.
std::size_t result_offset(std::size_t count) {
  return kernels::device::round256(kernels::device::fixed_order_norm_scratch_bytes(count));
}

}  // namespace

NcclNorms::Slot::~Slot() {
  if (event) cudaEventDestroy(event);
  if (pinned) cudaFreeHost(pinned);
}

NcclNorms::~NcclNorms() {
  // Pending copies may still be in flight: their events first.
  for (auto& [shape, pending] : pending_) {
    for (Pending& p : pending) cudaEventSynchronize(p.slot->event);
  }
  for (auto& slot : retired_) cudaEventSynchronize(slot->event);
}

std::size_t NcclNorms::scratch_bytes(std::size_t count) {
  return result_offset(count) + sizeof(double);
}

std::unique_ptr<NcclNorms::Slot> NcclNorms::take_slot(int device) {
  {
    std::lock_guard lock(mutex_);
    // A gone communicator's slots come back once their copies are done.
    for (auto it = retired_.begin(); it != retired_.end();) {
      if (cudaEventQuery((*it)->event) != cudaSuccess) {
        cudaGetLastError();  // cudaErrorNotReady is not an error of the caller's
        ++it;
        continue;
      }
      spare_[(*it)->device].push_back(std::move(*it));
      it = retired_.erase(it);
    }
    std::vector<std::unique_ptr<Slot>>& spare = spare_[device];
    if (!spare.empty()) {
      std::unique_ptr<Slot> slot = std::move(spare.back());
      spare.pop_back();
      return slot;
    }
  }
  cudaEvent_t event = nullptr;
  void* pinned = nullptr;
  if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess) return nullptr;
  if (cudaMallocHost(&pinned, sizeof(double)) != cudaSuccess) {
    cudaEventDestroy(event);
    return nullptr;
  }
  return std::make_unique<Slot>(event, static_cast<double*>(pinned), device);
}

Status NcclNorms::measure(const CallShape& shape, int level, const void* output, ElemType type,
                          void* scratch, cudaStream_t stream, int device) {
  DeviceGuard guard(device);
  if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
  std::unique_ptr<Slot> slot = take_slot(device);
  if (!slot) return Status::cuda(cudaErrorMemoryAllocation);
  auto* result =
      reinterpret_cast<double*>(static_cast<std::byte*>(scratch) + result_offset(shape.count));
  const int launched =
      type == ElemType::fp32
          ? kernels::device::fixed_order_norm(static_cast<const float*>(output), shape.count,
                                              result, scratch, stream)
          : kernels::device::fixed_order_norm(
                type == ElemType::fp16 ? kernels::HalfFormat::fp16 : kernels::HalfFormat::bf16,
                static_cast<const std::uint16_t*>(output), shape.count, result, scratch, stream);
  SLIMREDUCE_TRY(Status::cuda(static_cast<cudaError_t>(launched)));
  SLIMREDUCE_TRY(Status::cuda(
      cudaMemcpyAsync(slot->pinned, result, sizeof(double), cudaMemcpyDeviceToHost, stream)));
  SLIMREDUCE_TRY(Status::cuda(cudaEventRecord(slot->event, stream)));
  std::lock_guard lock(mutex_);
  pending_[shape].push_back({level, std::move(slot)});
  return {};
}

Status NcclNorms::take_due(const CallShape& shape, std::vector<Measured>* due) {
  std::vector<Pending> taken;
  {
    std::lock_guard lock(mutex_);
    const auto found = pending_.find(shape);
    if (found == pending_.end()) return {};
    std::deque<Pending>& pending = found->second;
    while (pending.size() >= kLag) {
      taken.push_back(std::move(pending.front()));
      pending.pop_front();
    }
  }
  Status status;
  for (Pending& p : taken) {
    // Outside the lock: a wait only where the device has not reached the copy yet.
    const cudaError_t rc = cudaEventSynchronize(p.slot->event);
    if (rc != cudaSuccess && status.ok()) status = Status::cuda(rc);
    if (status.ok()) due->push_back({p.level, *p.slot->pinned});
  }
  std::lock_guard lock(mutex_);
  for (Pending& p : taken) {
    if (status.ok()) {
      spare_[p.slot->device].push_back(std::move(p.slot));
    } else {
      retired_.push_back(std::move(p.slot));
    }
  }
  return status;
}

void NcclNorms::forget_communicator(std::uint64_t comm_id) {
  std::lock_guard lock(mutex_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->first.comm_id != comm_id) {
      ++it;
      continue;
    }
    for (Pending& p : it->second) retired_.push_back(std::move(p.slot));
    it = pending_.erase(it);
  }
}

}  // namespace slimreduce
