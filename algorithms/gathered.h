// The allreduce of a gathered compressor (top-k), written once over a
// Transport (docs/architecture.md, "Sparse"): each rank compresses its input
// into a payload of the same size on every rank; the payloads are allgathered;
// every rank zeroes the output and adds the payloads in rank order, so every
// rank does the same adds in the same order and holds the same bits.
//
// Phases as in CastRing: compress() and finish() are the host entry points,
// communicate() the collective, so the device paths (kernels before and after)
// use the same object for the wire. Payloads sit `slot_bytes` apart in the
// gathered buffer: exactly the payload on the host, padded where the device's
// accumulate kernel wants aligned payloads (NCCL). The caller owns the buffers.
#pragma once

#include <cstddef>

#include "algorithms/phases.h"
#include "backends/transport.h"
#include "compressors/compressor.h"

namespace slimreduce::algorithms {

// Every rank's payload of `count` values, the first at `first`, `stride` bytes
// apart, well formed (the compressor's payload_valid): bytes from another
// rank are not trusted to keep accumulate() in bounds. Checked where the host
// can read them when the collective returns (blocking, not device memory);
// an internal error otherwise.
Status check_payloads(const backends::Transport& transport,
                      const compressors::GatheredCompressor& compressor, const std::byte* first,
                      std::size_t stride, std::size_t count);

class GatheredAllreduce : public Phases<GatheredAllreduce> {
 public:
  // payload: slot_bytes bytes; gathered: slot_bytes x ranks bytes.
  GatheredAllreduce(backends::Transport& transport, compressors::GatheredCompressor& compressor,
                    std::size_t count, std::size_t slot_bytes, std::byte* payload,
                    std::byte* gathered)
      : transport_(transport),
        compressor_(compressor),
        count_(count),
        slot_bytes_(slot_bytes),
        payload_(payload),
        gathered_(gathered) {}

  // Host entry point: payload = compress(input + residual).
  void compress(const float* input, float* residual) {
    compressor_.compress(input, residual, count_, payload_);
  }
  // Every rank's payload, in rank order, into the gathered buffer; each checked.
  Status communicate();
  // Host entry point: output = the payloads added in rank order into zeros.
  void finish(float* output) const;

  // Bytes this rank hands to the transport (a ring allgather of one slot).
  double wire_sent() const;

 private:
  backends::Transport& transport_;
  compressors::GatheredCompressor& compressor_;
  std::size_t count_;
  std::size_t slot_bytes_;
  std::byte* payload_;
  std::byte* gathered_;
};

}  // namespace slimreduce::algorithms
