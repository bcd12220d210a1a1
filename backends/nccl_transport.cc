#include "backends/nccl_transport.h"

#include <cstddef>

#include "backends/nccl_backend.h"

namespace slimreduce::backends {

// One group of a send and a receive, so that NCCL runs them together and a
// ring of ranks that all send first cannot deadlock.
Status NcclTransport::sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                               std::size_t recv_bytes, int source) {
  const nccl::Api& api = nccl::api();
  SLIMREDUCE_TRY(Status::nccl(nccl::call(api.group_start)));
  Status issued =
      Status::nccl(nccl::call(api.send, send, send_bytes, ncclUint8, dest, comm_, stream_));
  if (issued.ok()) {
    issued =
        Status::nccl(nccl::call(api.recv, recv, recv_bytes, ncclUint8, source, comm_, stream_));
  }
  const Status ended = Status::nccl(nccl::call(api.group_end));  // the group we opened, always
  return issued.ok() ? ended : issued;
}

Status NcclTransport::alltoallv(const void* send, const std::size_t* send_bytes, void* recv,
                                const std::size_t* recv_bytes) {
  const nccl::Api& api = nccl::api();
  const auto* send_at = static_cast<const std::byte*>(send);
  auto* recv_at = static_cast<std::byte*>(recv);
  SLIMREDUCE_TRY(Status::nccl(nccl::call(api.group_start)));
  Status issued;
  for (int r = 0; r < size() && issued.ok(); ++r) {
    if (send_bytes[r] > 0) {
      issued =
          Status::nccl(nccl::call(api.send, send_at, send_bytes[r], ncclUint8, r, comm_, stream_));
    }
    if (issued.ok() && recv_bytes[r] > 0) {
      issued =
          Status::nccl(nccl::call(api.recv, recv_at, recv_bytes[r], ncclUint8, r, comm_, stream_));
    }
    send_at += send_bytes[r];
    recv_at += recv_bytes[r];
  }
  const Status ended = Status::nccl(nccl::call(api.group_end));  // the group we opened, always
  return issued.ok() ? ended : issued;
}

Status NcclTransport::allgather(const void* send, std::size_t bytes_per_rank, void* gathered) {
  return Status::nccl(nccl::call(nccl::api().all_gather, send, gathered, bytes_per_rank, ncclUint8,
                                 comm_, stream_));
}

NcclTransport::~NcclTransport() {
  if (owns_comm_) nccl::call(nccl::api().comm_destroy, comm_);
}

Status NcclTransport::abort_owned() {
  if (!owns_comm_) return {};
  owns_comm_ = false;  // an aborted communicator is gone: never destroyed after
  return Status::nccl(nccl::call(nccl::api().comm_abort, comm_));
}

Status NcclTransport::finalize_owned() {
  if (!owns_comm_) return {};
  return Status::nccl(nccl::call(nccl::api().comm_finalize, comm_));
}

Status NcclTransport::read_back(void* host, const void* from, std::size_t bytes) {
  cudaError_t rc = cudaMemcpyAsync(host, from, bytes, cudaMemcpyDeviceToHost, stream_);
  if (rc == cudaSuccess) rc = cudaStreamSynchronize(stream_);
  if (rc != cudaSuccess) cudaGetLastError();  // not left as the runtime's last error
  return Status::cuda(rc);
}

Status NcclTransport::reduce_scatter_sum(const float* send, float* recv,
                                         std::size_t count_per_rank) {
  return Status::nccl(nccl::call(nccl::api().reduce_scatter, static_cast<const void*>(send),
                                 static_cast<void*>(recv), count_per_rank, ncclFloat32, ncclSum,
                                 comm_, stream_));
}

Status NcclTransport::split(int color, int key, std::unique_ptr<Transport>* sub) {
  const nccl::Api& api = nccl::api();
  ncclComm_t made = nullptr;
  SLIMREDUCE_TRY(Status::nccl(nccl::call(api.comm_split, comm_, color, key, &made, nullptr)));
  if (!made) return Status::nccl(ncclInvalidArgument);  // NCCL_SPLIT_NOCOLOR: no group
  int rank = 0, size = 0;
  Status asked = Status::nccl(nccl::call(api.comm_count, made, &size));
  if (asked.ok()) asked = Status::nccl(nccl::call(api.comm_user_rank, made, &rank));
  if (!asked.ok()) {
    nccl::call(api.comm_destroy, made);
    return asked;
  }
  auto transport = std::make_unique<NcclTransport>(made, rank, size, stream_);
  transport->owns_comm_ = true;
  *sub = std::move(transport);
  return {};
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
