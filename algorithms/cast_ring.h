// The allreduce of a summable compressor (fp16, bf16), written once over a
// Transport (docs/architecture.md, "Dense"): each rank compresses its input
// into wire elements; the wire buffer is summed over all ranks, by the
// backend itself where it sums 16-bit elements natively (NCCL), else by a
// ring over sendrecv that adds in fp32 at each hop; every rank decodes the
// same reduced wire bits.
//
// Phases, so that a path whose compress and finish run elsewhere (kernels on
// a stream, before and after staging) uses the same object for the part on
// the wire: compress() and finish() are the host entry points; communicate()
// is the collective. The caller owns the buffers (sized by the static
// functions): memory is taken before compress() writes the residual, so a call
// that runs out of memory leaves error feedback as it was.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/phases.h"
#include "backends/transport.h"
#include "compressors/compressor.h"

namespace slimreduce::algorithms {

class CastRing : public Phases<CastRing> {
 public:
  static std::size_t wire_bytes(const compressors::SummableCompressor& compressor,
                                std::size_t count) {
    return count * compressor.wire_element_bytes();
  }
  // The ring's receive buffer: one chunk (unused where the backend sums natively).
  static std::size_t scratch_bytes(const compressors::SummableCompressor& compressor,
                                   std::size_t count, int ranks);

  // Where chunk c of n elements split over `parts` ranks begins: the ring's
  // one rule, which fused buffers follow too (algorithms/fused_casts.h).
  static std::size_t split_at(std::size_t n, int parts, int chunk);

  // wire: wire_bytes(count) bytes; scratch: scratch_bytes(count, ranks) bytes.
  CastRing(backends::Transport& transport, compressors::SummableCompressor& compressor,
           std::size_t count, std::byte* wire, std::byte* scratch)
      : transport_(transport),
        compressor_(compressor),
        count_(count),
        wire_(wire),
        scratch_(scratch) {}
  // Chunks at given boundaries: chunk c is [chunk_begins[c], chunk_begins[c + 1]),
  // size() + 1 entries from 0 to count (a fused buffer's, algorithms/fused_casts.h);
  // scratch: the largest chunk's wire bytes. The caller keeps chunk_begins alive.
  CastRing(backends::Transport& transport, compressors::SummableCompressor& compressor,
           std::size_t count, std::byte* wire, std::byte* scratch,
           const std::vector<std::size_t>* chunk_begins)
      : CastRing(transport, compressor, count, wire, scratch) {
    chunk_begins_ = chunk_begins;
  }

  // Host entry point: wire = compress(input + residual).
  void compress(const float* input, float* residual) {
    compressor_.compress(input, residual, count_, wire_);
  }
  // The wire buffer becomes the sum over all ranks.
  Status communicate();
  // Host entry point: output = decode(wire).
  void finish(float* output) const { compressor_.decompress(wire_, output, count_); }

  // Bytes this rank hands to the transport (a ring's 2(n-1)/n of the wire).
  double wire_sent() const;

 private:
  std::size_t chunk_begin(int chunk) const;
  std::size_t chunk_bytes(int chunk) const;
  std::byte* chunk_at(int chunk) const;
  int wrap(int chunk) const;
  Status reduce_scatter();
  Status allgather();

  backends::Transport& transport_;
  compressors::SummableCompressor& compressor_;
  std::size_t count_;
  std::byte* wire_;
  std::byte* scratch_;
  const std::vector<std::size_t>* chunk_begins_ = nullptr;  // nullptr: split_at's
};

}  // namespace slimreduce::algorithms
