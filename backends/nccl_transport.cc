#ifdef SLIMREDUCE_HAVE_CUDA
#include "backends/nccl_transport.h"

#include "backends/nccl_backend.h"

namespace slimreduce::backends {

Status NcclTransport::sendrecv(const void*, std::size_t, int, void*, std::size_t, int) {
  return Status::internal();
}

Status NcclTransport::allgather(const void* send, std::size_t bytes_per_rank, void* gathered) {
  return Status::nccl(nccl::call(nccl::api().all_gather, send, gathered, bytes_per_rank, ncclUint8,
                                 comm_, stream_));
}

Status NcclTransport::sum16(void* inout, std::size_t n, kernels::HalfFormat format) {
  const ncclDataType_t type = format == kernels::HalfFormat::bf16 ? ncclBfloat16 : ncclFloat16;
  return Status::nccl(nccl::call(nccl::api().all_reduce, static_cast<const void*>(inout), inout, n,
                                 type, ncclSum, comm_, stream_));
}

ncclResult_t nccl_code(const Status& status) {
  switch (status.domain()) {
    case ErrorDomain::none:
      return ncclSuccess;
    case ErrorDomain::nccl:
      return static_cast<ncclResult_t>(status.code());
    case ErrorDomain::cuda:
      return ncclUnhandledCudaError;
    case ErrorDomain::no_memory:
    case ErrorDomain::internal:
    case ErrorDomain::mpi:
      break;
  }
  return ncclSystemError;
}

}  // namespace slimreduce::backends
#endif  // SLIMREDUCE_HAVE_CUDA
