// A sharded compressor (int8) on the NCCL path (DeviceKernels::sharded): one
// call's algorithms::ShardedAllreduce over the caller's communicator and
// stream, every step enqueued, no host wait. The parts are made on the
// device before the group's collectives; after the group ends, the parts go
// to their owners (grouped ncclSend/ncclRecv: fixed sizes, so no count
// exchange), each owner's step runs on the device (its shard's parts summed
// in rank order, compressed again with its owner-side residual), the owners'
// results are allgathered and every rank decodes the same bytes. The
// exchange waits for the group's end, after the group's collectives, so a
// user's group never holds point-to-point calls beside them.
// CUDA builds only.
#pragma once

#include <cstddef>
#include <memory>

#include "compressors/compressor.h"
#include "core/nccl_plan.h"
#include "scheduler/plan.h"

namespace slimreduce {

// The floats a sharded call's key keeps on the device: the residual of its
// `count` values, then this rank's owner-side residual (its shard); both
// zeroed together at the key's first call, both counted against the cap.
std::size_t sharded_key_floats(const compressors::Compressor& compressor, std::size_t count,
                               int ranks, int rank);

// The workspace bytes of one sharded call (its region).
std::size_t sharded_region_bytes(const CallPlan& p, const compressors::Compressor& compressor);

// Bytes this rank hands to NCCL for one sharded call: its parts to the other
// owners and a ring allgather of one owner's result.
double sharded_wire_sent(const CallPlan& p, const compressors::Compressor& compressor);

// The call's step (after its region was assigned).
std::unique_ptr<scheduler::Step> sharded_step(const CallPlan& p,
                                              compressors::Compressor& compressor);

}  // namespace slimreduce
