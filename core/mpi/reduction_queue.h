// MPI_Iallreduce calls that SlimReduce compresses, held per communicator
// until a flush fuses them into batches (docs/architecture.md, "Fusion").
// The caller holds a generalized request (MPI_Grequest_start) per call,
// completed by the flush that reduces it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "compressors/compressor.h"
#include "core/runtime/decision.h"

namespace slimreduce {

// What a request reports once its reduction ran: the extra state of its
// generalized request, owned by the MPI side until MPI frees the request.
struct RequestRecord {
  int error = MPI_SUCCESS;
};

struct QueuedReduction {
  const float* input;  // sendbuf, or recvbuf for MPI_IN_PLACE
  float* output;
  std::size_t count;
  // The residual key's buffer: the receive buffer, or a tensor name's stand-in
  // (slimreduce_enqueue); and its datatype.
  const void* residual_key;
  std::uint64_t datatype_tag;
  // The call's decision (core/runtime/decision.h): its compressor stays alive until the flush.
  CallDecision decision;
  int priority;      // the native API's; 0 for MPI_Iallreduce (scheduler/order.h)
  double queued_us;  // when it was queued (SLIMREDUCE_TIMELINE's QUEUE span), or 0
  MPI_Request request;
  RequestRecord* record;
  std::size_t rows = 0;  // the tensor's real row count (slimreduce_enqueue_matrix), or 0
  std::uint64_t bytes() const { return count * sizeof(float); }
};

struct ReductionQueue {
  std::mutex mutex;                      // held through a flush of this communicator
  std::vector<QueuedReduction> pending;  // in call order
  std::uint64_t bytes = 0;               // of pending
};

}  // namespace slimreduce
