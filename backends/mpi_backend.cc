#include "backends/mpi_backend.h"

#include <algorithm>
#include <cstdint>

namespace slimreduce::backends::mpi {
namespace {
// Tag space of our own point-to-point traffic; a communicator's collectives
// never see it, and user tags on the same communicator stay below it in practice.
constexpr int kRingTag = 0x51f0;
}  // namespace

int sendrecv_bytes(const void* send, std::size_t send_bytes, int dest, void* recv,
                   std::size_t recv_bytes, int source, MPI_Comm comm) {
  const auto* send_at = static_cast<const std::uint8_t*>(send);
  auto* recv_at = static_cast<std::uint8_t*>(recv);
  // Both sides cut the same sizes into the same pieces, so piece i matches piece i.
  while (send_bytes > 0 || recv_bytes > 0) {
    const std::size_t send_piece = std::min(send_bytes, kMaxBytesPerCall);
    const std::size_t recv_piece = std::min(recv_bytes, kMaxBytesPerCall);
    // A direction with nothing left talks to MPI_PROC_NULL, so an empty piece
    // never matches the next real piece of the other stream.
    const int rc = PMPI_Sendrecv(
        send_at, static_cast<int>(send_piece), MPI_BYTE, send_piece ? dest : MPI_PROC_NULL,
        kRingTag, recv_at, static_cast<int>(recv_piece), MPI_BYTE,
        recv_piece ? source : MPI_PROC_NULL, kRingTag, comm, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    send_at += send_piece;
    recv_at += recv_piece;
    send_bytes -= send_piece;
    recv_bytes -= recv_piece;
  }
  return MPI_SUCCESS;
}

int allgather_bytes(const void* send, std::size_t bytes_per_rank, void* gathered, MPI_Comm comm) {
  if (bytes_per_rank > kMaxBytesPerCall) return MPI_ERR_COUNT;
  return PMPI_Allgather(send, static_cast<int>(bytes_per_rank), MPI_BYTE, gathered,
                        static_cast<int>(bytes_per_rank), MPI_BYTE, comm);
}

}  // namespace slimreduce::backends::mpi
