// The real MPI, reached through PMPI_* so SlimReduce never calls itself.
// Every function returns the MPI error code the caller would have got.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace slimreduce::backends::mpi {

// An MPI handle (MPI_Datatype, MPI_Comm, MPI_Op, ...) as a 64-bit tag for
// keys and shapes: the handle types are opaque, pointers in Open MPI and ints
// in the MPICH family (MPICH, Intel MPI, MVAPICH, Cray MPICH), so no cast
// written for one ABI compiles under the other. Equal handles give equal tags.
template <typename Handle>
inline std::uint64_t handle_tag(Handle handle) noexcept {
  if constexpr (std::is_pointer_v<Handle>) {
    return reinterpret_cast<std::uintptr_t>(handle);
  } else {
    static_assert(std::is_integral_v<Handle>, "an MPI handle is a pointer or an integer");
    return static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<Handle>>(handle));
  }
}

// The caller's call, unchanged (inline: a pass-through call pays for no extra layer).
inline int allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm) {
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}
inline int iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                      MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

// Sends send_bytes to dest while receiving recv_bytes from source (sizes may
// exceed INT_MAX: they are sent in pieces).
int sendrecv_bytes(const void* send, std::size_t send_bytes, int dest, void* recv,
                   std::size_t recv_bytes, int source, MPI_Comm comm);

// The largest byte count one MPI call takes as MPI_BYTE.
constexpr std::size_t kMaxBytesPerCall = std::size_t{1} << 30;

// Every rank's bytes_per_rank bytes, in rank order, into gathered (sizes may
// exceed INT_MAX: they are gathered in pieces of at most max_piece bytes).
int allgather_bytes(const void* send, std::size_t bytes_per_rank, void* gathered, MPI_Comm comm,
                    std::size_t max_piece = kMaxBytesPerCall);

// Hands an error that no MPI call has reported yet (SlimReduce's own, or one
// MPI returned on a communicator of ours) to the error handler of the
// caller's communicator, as the real call would have: MPI_ERRORS_ARE_FATAL
// aborts the job, MPI_ERRORS_RETURN returns, a handler of the caller's runs
// once. Returns code.
int raise_error(MPI_Comm comm, int code);

// MPI_Error_string's text for code.
std::string error_text(int code);

}  // namespace slimreduce::backends::mpi
