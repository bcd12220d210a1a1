// The sharded algorithm on the NCCL path: int8 (DeviceKernels::sharded)
// always, top-k where its cost model says so (NcclEngine::decide). One
// call's algorithms::ShardedAllreduce over the caller's communicator and
// stream. The parts (and, for top-k, their sizes) are made on the device
// before the group's collectives; after the group ends, the parts go to
// their owners (grouped ncclSend/ncclRecv), each owner's step runs on the
// device (its shard's parts summed in rank order, compressed again with its
// owner-side residual), the owners' results are allgathered and every rank
// decodes the same bytes. The exchange waits for the group's end, after the
// group's collectives, so a user's group never holds point-to-point calls
// beside them.
//
// int8's part sizes are fixed: nothing waits for the device. Top-k's vary
// with the values: they are exchanged first and read back to the host (one
// host wait per call, after the group's collectives were enqueued), so a
// top-k call being captured into a graph is gathered instead.
// CUDA builds only.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "compressors/compressor.h"
#include "core/nccl/plan.h"
#include "scheduler/partition.h"
#include "scheduler/plan.h"

namespace slimreduce {

// The floats a sharded call's key keeps on the device: the residual of its
// `count` values, then this rank's owner-side residual (its shard); both
// zeroed together at the key's first call, both counted against the cap.
// A call cut into pieces keeps the owner-side residuals of its pieces back to
// back (the MPI path's layout, core/mpi/host_allreduce.h's owner_residuals).
std::size_t sharded_key_floats(const compressors::Compressor& compressor,
                               const std::vector<scheduler::Partition>& pieces, int ranks,
                               int rank);
// This rank's owner-side floats for one (piece of a) call of `count` values.
std::size_t sharded_owned_floats(const compressors::Compressor& compressor, std::size_t count,
                                 int ranks, int rank);

// The workspace bytes of one sharded call (its region).
std::size_t sharded_region_bytes(const CallPlan& p, const compressors::Compressor& compressor);

// Bytes this rank hands to NCCL for one sharded call: its parts to the other
// owners and a ring allgather of one owner's result; 0 where the part sizes
// vary (top-k: the step writes them to
// sent_after_run once they are known: GroupPlan::sent_after_run).
double sharded_wire_sent(const CallPlan& p, const compressors::Compressor& compressor);

// The call's step (after its region was assigned). sent_after_run: where it
// writes its bytes once it has run, if only the run knows them.
std::unique_ptr<scheduler::Step> sharded_step(const CallPlan& p,
                                              compressors::Compressor& compressor,
                                              double* sent_after_run);

}  // namespace slimreduce
