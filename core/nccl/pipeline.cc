#include "core/nccl/pipeline.h"

#include <nccl.h>

#include "core/gpu/cuda_support.h"

namespace slimreduce {

SideStream::~SideStream() { release(); }

// Destroyed with work still queued is fine: CUDA frees them once it ran.
void SideStream::release() {
  for (cudaEvent_t& event : events_) {
    if (event) cudaEventDestroy(event);
    event = nullptr;
  }
  if (side_) cudaStreamDestroy(side_);
  side_ = nullptr;
}

bool SideStream::ready() {
  if (side_) return true;
  if (failed_) return false;
  // Non-blocking: only our events order it, never the legacy default stream.
  bool made = cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking) == cudaSuccess;
  for (cudaEvent_t& event : events_)
    made = made && cudaEventCreateWithFlags(&event, cudaEventDisableTiming) == cudaSuccess;
  if (!made) {
    cudaGetLastError();
    release();
    failed_ = true;
  }
  return made;
}

Status NcclHandoff::tie(SideStream::Event which, cudaStream_t recorded, cudaStream_t waiter) {
  const cudaEvent_t event = side_.event(which);
  SLIMREDUCE_TRY(Status::cuda(cudaEventRecord(event, recorded)));
  return Status::cuda(cudaStreamWaitEvent(waiter, event, 0));
}

// Recorded now, waited for later (wait_compressed): a wait takes the event's
// latest record, which the pipeline's order makes the piece's own.
Status NcclHandoff::compressed() {
  return Status::cuda(cudaEventRecord(side_.event(SideStream::compressed), side_.stream()));
}

Status NcclHandoff::wait_compressed() {
  return Status::cuda(cudaStreamWaitEvent(caller_, side_.event(SideStream::compressed), 0));
}

Status NcclHandoff::open_collectives() { return Status::nccl(group_start_()); }
Status NcclHandoff::close_collectives() { return Status::nccl(group_end_()); }

void NcclHandoff::mark(std::size_t step, scheduler::Phase phase, bool) {
  if (!mark_) return;
  const bool on_side = phase != scheduler::Phase::communicate;
  mark_(step, on_side ? side_.stream() : caller_);
}

}  // namespace slimreduce
