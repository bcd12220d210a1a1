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

namespace {

// An MPI datatype, freed when it goes out of scope.
class OwnedType {
 public:
  OwnedType() = default;
  OwnedType(const OwnedType&) = delete;
  OwnedType& operator=(const OwnedType&) = delete;
  ~OwnedType() {
    if (type_ != MPI_DATATYPE_NULL) PMPI_Type_free(&type_);
  }
  MPI_Datatype* out() { return &type_; }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// piece_bytes bytes whose extent is a whole rank's share: one of them per
// rank puts rank r's piece at r * stride_bytes.
int spaced_piece_type(std::size_t piece_bytes, std::size_t stride_bytes, OwnedType& spaced) {
  OwnedType piece;
  int rc = PMPI_Type_contiguous(static_cast<int>(piece_bytes), MPI_BYTE, piece.out());
  if (rc == MPI_SUCCESS)
    rc =
        PMPI_Type_create_resized(piece.get(), 0, static_cast<MPI_Aint>(stride_bytes), spaced.out());
  if (rc == MPI_SUCCESS) rc = PMPI_Type_commit(spaced.out());
  return rc;
}

}  // namespace

int allgather_bytes(const void* send, std::size_t bytes_per_rank, void* gathered, MPI_Comm comm,
                    std::size_t max_piece) {
  if (bytes_per_rank <= max_piece) {
    return PMPI_Allgather(send, static_cast<int>(bytes_per_rank), MPI_BYTE, gathered,
                          static_cast<int>(bytes_per_rank), MPI_BYTE, comm);
  }
  // Too large for one call's int count: piece i of every rank, each landing
  // at its offset within that rank's share. Every rank cuts the same pieces.
  const auto* send_at = static_cast<const std::uint8_t*>(send);
  auto* gathered_at = static_cast<std::uint8_t*>(gathered);
  for (std::size_t offset = 0; offset < bytes_per_rank; offset += max_piece) {
    const std::size_t piece = std::min(max_piece, bytes_per_rank - offset);
    OwnedType spaced;
    int rc = spaced_piece_type(piece, bytes_per_rank, spaced);
    if (rc == MPI_SUCCESS)
      rc = PMPI_Allgather(send_at + offset, static_cast<int>(piece), MPI_BYTE, gathered_at + offset,
                          1, spaced.get(), comm);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int raise_error(MPI_Comm comm, int code) {
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (PMPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length));
}

}  // namespace slimreduce::backends::mpi
