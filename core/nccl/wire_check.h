// The NCCL side of the ranks' agreement on what shapes the wire
// (core/runtime/wire_agreement.h; the MPI side's is core/mpi/wire_check.h).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <vector>

namespace slimreduce {

// On comm's current device and `stream`: MAX-reduces this rank's fingerprint
// (one 16-byte ncclAllReduce, then a host wait). Where the ranks differ, they
// gather every record, rank 0 of the communicator (`rank`) prints the line
// that names the difference, and every rank gets ncclInvalidUsage (each saw
// the same MAX, so all of them fail the same call, and the job stops where a
// framework raises NCCL's errors). Else ncclSuccess; an error of NCCL or CUDA
// as its ncclResult_t.
ncclResult_t check_wire_agreement(ncclComm_t comm, int rank, int size, cudaStream_t stream,
                                  const std::vector<char>& record);

}  // namespace slimreduce
