#include "backends/mpi_transport.h"

#include <climits>
#include <memory>
#include <vector>

#include "backends/mpi_backend.h"

namespace slimreduce::backends {

Status MpiTransport::sendrecv(const void* send, std::size_t send_bytes, int dest, void* recv,
                              std::size_t recv_bytes, int source) {
  return Status::mpi(mpi::sendrecv_bytes(send, send_bytes, dest, recv, recv_bytes, source, comm_));
}

Status MpiTransport::allgather(const void* send, std::size_t bytes_per_rank, void* gathered) {
  return Status::mpi(mpi::allgather_bytes(send, bytes_per_rank, gathered, comm_));
}

namespace {

// Counts and offsets as MPI_Alltoallv takes them; false when one does not fit an int.
bool int_layout(const std::size_t* bytes, int ranks, std::vector<int>& counts,
                std::vector<int>& offsets) {
  std::size_t offset = 0;
  for (int r = 0; r < ranks; ++r) {
    if (bytes[r] > static_cast<std::size_t>(INT_MAX) || offset > static_cast<std::size_t>(INT_MAX))
      return false;
    counts[r] = static_cast<int>(bytes[r]);
    offsets[r] = static_cast<int>(offset);
    offset += bytes[r];
  }
  return true;
}

}  // namespace

Status MpiTransport::alltoallv(const void* send, const std::size_t* send_bytes, void* recv,
                               const std::size_t* recv_bytes) {
  const int ranks = size();
  std::vector<int> send_counts(ranks), send_offsets(ranks), recv_counts(ranks), recv_offsets(ranks);
  if (!int_layout(send_bytes, ranks, send_counts, send_offsets) ||
      !int_layout(recv_bytes, ranks, recv_counts, recv_offsets)) {
    return Transport::alltoallv(send, send_bytes, recv, recv_bytes);
  }
  return Status::mpi(PMPI_Alltoallv(send, send_counts.data(), send_offsets.data(), MPI_BYTE, recv,
                                    recv_counts.data(), recv_offsets.data(), MPI_BYTE, comm_));
}

MpiTransport::~MpiTransport() {
  if (owns_comm_) PMPI_Comm_free(&comm_);
}

Status MpiTransport::reduce_scatter_sum(const float* send, float* recv,
                                        std::size_t count_per_rank) {
  // One int count per block: larger blocks are refused, never truncated.
  if (count_per_rank > static_cast<std::size_t>(INT_MAX)) return Status::mpi(MPI_ERR_COUNT);
  return Status::mpi(PMPI_Reduce_scatter_block(send, recv, static_cast<int>(count_per_rank),
                                               MPI_FLOAT, MPI_SUM, comm_));
}

Status MpiTransport::split(int color, int key, std::unique_ptr<Transport>* sub) {
  MPI_Comm made = MPI_COMM_NULL;
  SLIMREDUCE_TRY(Status::mpi(PMPI_Comm_split(comm_, color, key, &made)));
  if (made == MPI_COMM_NULL) return Status::mpi(MPI_ERR_COMM);  // MPI_UNDEFINED: no group
  int rank = 0, size = 1;
  PMPI_Comm_set_errhandler(made, MPI_ERRORS_RETURN);  // our errors come back as codes
  PMPI_Comm_rank(made, &rank);
  PMPI_Comm_size(made, &size);
  auto transport = std::make_unique<MpiTransport>(made, rank, size, memory());
  transport->owns_comm_ = true;
  *sub = std::move(transport);
  return {};
}

int mpi_code(const Status& status) {
  switch (status.domain()) {
    case ErrorDomain::none:
      return MPI_SUCCESS;
    case ErrorDomain::mpi:
      return status.code();
    case ErrorDomain::no_memory:
      return MPI_ERR_NO_MEM;
    case ErrorDomain::internal:
      return MPI_ERR_INTERN;
    case ErrorDomain::nccl:
    case ErrorDomain::cuda:
      break;
  }
  return MPI_ERR_OTHER;  // a failed CUDA step on the MPI device path
}

}  // namespace slimreduce::backends
