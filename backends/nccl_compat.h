// NCCL functions newer than the oldest nccl.h SlimReduce builds against (the
// CUDA toolkit's here: NCCL 2.28). Each is NCCL's own declaration, the same
// types in the same order, so a newer nccl.h that declares it again agrees.
// A job can only call one of them with an NCCL that has it; the real function
// is looked up at run time (backends/nccl_backend.cc).
#pragma once

#include <nccl.h>

#include "backends/nccl_coll_config.h"

extern "C" {
// NCCL 2.29: a communicator grown by new ranks (elastic training). Ranks
// already in `comm` pass rank = -1; a new rank passes comm = NULL and the
// rank it is given; the root hands out the id ncclCommGetUniqueId made.
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 32, 0)
// NCCL 2.32: ncclAllReduce with a per-call config (NULL: the plain call).
// The config's layout is NCCL's (backends/nccl_coll_config.h).
typedef slimreduce::NcclCollConfigV23200 ncclCollConfig_t;
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                 cudaStream_t stream, const ncclCollConfig_t* config);
#endif
}
