#include "algorithms/cast_ring.h"

#include "algorithms/wire_bytes.h"

namespace slimreduce::algorithms {
std::size_t CastRing::split_at(std::size_t n, int parts, int chunk) {
  return static_cast<std::size_t>(static_cast<unsigned __int128>(n) * chunk / parts);
}

std::size_t CastRing::scratch_bytes(const compressors::SummableCompressor& compressor,
                                    std::size_t count, int ranks) {
  const std::size_t largest_chunk = split_at(count, ranks, 1) + 1;
  return largest_chunk * compressor.wire_element_bytes();
}

std::size_t CastRing::chunk_begin(int chunk) const {
  if (chunk_begins_) return (*chunk_begins_)[chunk];
  return split_at(count_, transport_.size(), chunk);
}
std::size_t CastRing::chunk_bytes(int chunk) const {
  return (chunk_begin(chunk + 1) - chunk_begin(chunk)) * compressor_.wire_element_bytes();
}
std::byte* CastRing::chunk_at(int chunk) const {
  return wire_ + chunk_begin(chunk) * compressor_.wire_element_bytes();
}
int CastRing::wrap(int chunk) const {
  const int n = transport_.size();
  return ((chunk % n) + n) % n;
}

Status CastRing::communicate() {
  if (const auto format = compressor_.native_format(); format && transport_.sums_natively(*format))
    return transport_.sum16(wire_, count_, *format);
  // The ring adds each received chunk on the host, between collectives: on a
  // stream-ordered transport the chunk is not there yet (that needs a device
  // add between the steps, which no transport asks for today).
  if (transport_.execution() != backends::Execution::blocking) return Status::internal();
  SLIMREDUCE_TRY(reduce_scatter());
  return allgather();
}

// Step s: send chunk (rank - s) right, receive chunk (rank - s - 1) from the
// left and add our own. Chunk c is summed in the fixed order c, c+1, ... and
// ends, reduced, on rank c - 1.
Status CastRing::reduce_scatter() {
  const int rank = transport_.rank();
  for (int step = 0; step + 1 < transport_.size(); ++step) {
    const int send_chunk = wrap(rank - step);
    const int recv_chunk = wrap(rank - step - 1);
    SLIMREDUCE_TRY(transport_.sendrecv(chunk_at(send_chunk), chunk_bytes(send_chunk),
                                       wrap(rank + 1), scratch_, chunk_bytes(recv_chunk),
                                       wrap(rank - 1)));
    compressor_.accumulate(scratch_, chunk_at(recv_chunk),
                           chunk_bytes(recv_chunk) / compressor_.wire_element_bytes());
  }
  return {};
}

// Step s: pass the reduced chunk (rank + 1 - s) right, take (rank - s) from the left.
Status CastRing::allgather() {
  const int rank = transport_.rank();
  for (int step = 0; step + 1 < transport_.size(); ++step) {
    const int send_chunk = wrap(rank + 1 - step);
    const int recv_chunk = wrap(rank - step);
    SLIMREDUCE_TRY(transport_.sendrecv(chunk_at(send_chunk), chunk_bytes(send_chunk),
                                       wrap(rank + 1), chunk_at(recv_chunk),
                                       chunk_bytes(recv_chunk), wrap(rank - 1)));
  }
  return {};
}

double CastRing::wire_sent() const {
  return ring_allreduce_wire_bytes(count_ * compressor_.wire_element_bytes(), transport_.size());
}

}  // namespace slimreduce::algorithms
