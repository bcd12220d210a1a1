#include "core/algorithms.h"

#include <algorithm>
#include <cstring>

#include "backends/mpi_backend.h"
#include "core/counters.h"

namespace slimreduce {
namespace {

// Chunk c of n elements split over `parts` ranks: [begin(c), begin(c + 1)).
std::size_t chunk_begin(std::size_t n, int parts, int chunk) {
  return static_cast<std::size_t>(static_cast<unsigned __int128>(n) * chunk / parts);
}

class Ring {
 public:
  Ring(std::byte* wire, std::size_t n, std::size_t element_bytes, CommState& state, MPI_Comm comm)
      : wire_(wire), n_(n), element_bytes_(element_bytes), state_(state), comm_(comm) {}

  std::size_t begin(int chunk) const { return chunk_begin(n_, state_.size(), chunk); }
  std::size_t elements(int chunk) const { return begin(chunk + 1) - begin(chunk); }
  std::byte* at(int chunk) const { return wire_ + begin(chunk) * element_bytes_; }
  int wrap(int chunk) const { return ((chunk % state_.size()) + state_.size()) % state_.size(); }
  int right() const { return wrap(state_.rank() + 1); }
  int left() const { return wrap(state_.rank() - 1); }

  // Step s: send chunk (rank - s) right, receive chunk (rank - s - 1) from the
  // left and add our own. Chunk c is summed in the fixed order c, c+1, ... and
  // ends, reduced, on rank c - 1.
  int reduce_scatter(const compressors::SummableCompressor& compressor, std::byte* incoming) {
    for (int step = 0; step + 1 < state_.size(); ++step) {
      const int send_chunk = wrap(state_.rank() - step);
      const int recv_chunk = wrap(state_.rank() - step - 1);
      const int rc = backends::mpi::sendrecv_bytes(
          at(send_chunk), elements(send_chunk) * element_bytes_, right(), incoming,
          elements(recv_chunk) * element_bytes_, left(), comm_);
      if (rc != MPI_SUCCESS) return rc;
      compressor.accumulate(incoming, at(recv_chunk), elements(recv_chunk));
    }
    return MPI_SUCCESS;
  }

  // Step s: pass the reduced chunk (rank + 1 - s) right, take (rank - s) from the left.
  int allgather() {
    for (int step = 0; step + 1 < state_.size(); ++step) {
      const int send_chunk = wrap(state_.rank() + 1 - step);
      const int recv_chunk = wrap(state_.rank() - step);
      const int rc = backends::mpi::sendrecv_bytes(
          at(send_chunk), elements(send_chunk) * element_bytes_, right(), at(recv_chunk),
          elements(recv_chunk) * element_bytes_, left(), comm_);
      if (rc != MPI_SUCCESS) return rc;
    }
    return MPI_SUCCESS;
  }

 private:
  std::byte* wire_;
  std::size_t n_;
  std::size_t element_bytes_;
  CommState& state_;
  MPI_Comm comm_;
};

}  // namespace

AlgorithmResult ring_allreduce(const AllreduceCall& call,
                               compressors::SummableCompressor& compressor, CommState& state,
                               double* wire_sent) {
  MPI_Comm comm = MPI_COMM_NULL;
  if (const int rc = state.private_comm(&comm); rc != MPI_SUCCESS) return rc;
  const std::size_t element_bytes = compressor.wire_element_bytes();
  // All memory before the compress step, which writes the residual: a call
  // that runs out of memory leaves the error-feedback state as it was.
  std::byte* wire = state.wire(call.count * element_bytes);
  Ring ring(wire, call.count, element_bytes, state, comm);
  const std::size_t largest_chunk = ring.elements(0) + 1;
  std::byte* incoming = state.scratch(largest_chunk * element_bytes);
  compressor.compress(call.input, call.residual, call.count, wire);

  if (const int rc = ring.reduce_scatter(compressor, incoming); rc != MPI_SUCCESS) return rc;
  if (const int rc = ring.allgather(); rc != MPI_SUCCESS) return rc;

  // Every rank decodes the same wire bits, the owner of each chunk included.
  compressor.decompress(wire, call.output, call.count);
  *wire_sent = ring_allreduce_wire_bytes(call.count * element_bytes, state.size());
  return MPI_SUCCESS;
}

AlgorithmResult gather_allreduce(const AllreduceCall& call,
                                 compressors::GatheredCompressor& compressor, CommState& state,
                                 double* wire_sent) {
  MPI_Comm comm = MPI_COMM_NULL;
  if (const int rc = state.private_comm(&comm); rc != MPI_SUCCESS) return rc;
  const std::size_t payload_bytes = compressor.compressed_bytes(call.count);
  // All memory first, as in ring_allreduce.
  std::byte* payload = state.scratch(payload_bytes);
  std::byte* gathered = state.wire(payload_bytes * state.size());
  compressor.compress(call.input, call.residual, call.count, payload);

  const int rc = backends::mpi::allgather_bytes(payload, payload_bytes, gathered, comm);
  if (rc != MPI_SUCCESS) return rc;

  // Rank order, on every rank: the same adds in the same order, the same bits.
  std::fill_n(call.output, call.count, 0.0f);
  for (int rank = 0; rank < state.size(); ++rank) {
    compressor.accumulate(gathered + payload_bytes * rank, call.count, call.output);
  }
  *wire_sent = ring_allgather_wire_bytes(payload_bytes, state.size());
  return MPI_SUCCESS;
}

}  // namespace slimreduce
