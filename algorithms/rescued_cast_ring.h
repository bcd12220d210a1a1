// The cast ring (algorithms/cast_ring.h) with the wire's overflow rescued
// (docs/architecture.md, "Dense"): fp16 holds values up to 65504, so a sum of
// finite fp32 values can come out of the ring as inf. After the ring every
// rank holds the same reduced wire bits, so every rank of the transport sees
// the same non-finite element and reruns the call alike: with the
// compressor's overflow_rescue() (bf16, fp32's range), from the caller's
// input, which only finish() writes over. The rescued call's residual
// restarts from zero (what the first ring left in it belongs to a sum that
// was never delivered). A NaN or inf in the input comes out where a plain sum
// has it, rescued or not.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>

#include "algorithms/cast_ring.h"
#include "backends/transport.h"
#include "compressors/compressor.h"

namespace slimreduce::algorithms {

class RescuedCastRing {
 public:
  // The buffers of CastRing, which the rescue reuses (its wire elements are as wide).
  RescuedCastRing(backends::Transport& transport, compressors::SummableCompressor& compressor,
                  std::size_t count, std::byte* wire, std::byte* scratch)
      : transport_(transport),
        compressor_(compressor),
        count_(count),
        wire_(wire),
        scratch_(scratch),
        ring_(transport, compressor, count, wire, scratch) {}

  void compress(const float* input, float* residual) {
    input_ = input;
    residual_ = residual;
    ring_.compress(input, residual);
  }
  // The ring, then the check, and the rescue where it failed.
  Status communicate();
  void finish(float* output) const {
    if (rescue_ring_) return rescue_ring_->finish(output);
    ring_.finish(output);
  }
  double wire_sent() const {
    return ring_.wire_sent() + (rescue_ring_ ? rescue_ring_->wire_sent() : 0.0);
  }
  bool overflow_rescued() const { return rescue_ring_.has_value(); }

 private:
  backends::Transport& transport_;
  compressors::SummableCompressor& compressor_;
  std::size_t count_;
  std::byte* wire_;
  std::byte* scratch_;
  CastRing ring_;
  const float* input_ = nullptr;
  float* residual_ = nullptr;
  std::unique_ptr<compressors::SummableCompressor> rescue_;
  std::optional<CastRing> rescue_ring_;
};

}  // namespace slimreduce::algorithms
