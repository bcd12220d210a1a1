// The cast ring over a fused batch (docs/architecture.md, "Fusion"): many
// tensors, one collective, and for each tensor the same bits as its own
// CastRing would give.
//
// The ring sums chunk c of its buffer in the fixed order c, c+1, ... (16-bit
// adds, so the order shows in the bits). Fused chunk c therefore holds chunk
// c of every tensor (split by CastRing::split_at, as unfused), in batch
// order: each element meets the same adds in the same order as unfused. The
// casts are element by element, so compressing and decompressing segment by
// segment changes nothing either.
//
// Overflow (algorithms/rescued_cast_ring.h) is checked tensor by tensor: a
// tensor whose reduced wire is not finite is rerun with the compressor's
// overflow_rescue(), alone with the other such tensors, from its untouched
// input and with its residual restarted from zero; the others keep their
// 16-bit result. So a batch rescues exactly the tensors a run of unfused
// calls would, with the same bits.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "algorithms/batch.h"
#include "algorithms/cast_ring.h"
#include "backends/transport.h"
#include "compressors/compressor.h"

namespace slimreduce::algorithms {

class FusedCasts {
 public:
  // One tensor's piece of one fused chunk.
  struct Segment {
    std::size_t tensor_offset;
    std::size_t fused_offset;
    std::size_t length;
  };
  struct Layout {
    std::vector<std::size_t> chunk_begins;       // ranks + 1 entries, 0 ... elements
    std::vector<std::vector<Segment>> segments;  // per tensor, one per chunk
    std::size_t elements = 0;
    std::size_t largest_chunk = 0;
  };
  static Layout layout(const std::vector<std::size_t>& counts, int ranks);
  static std::size_t wire_bytes(const compressors::SummableCompressor& compressor,
                                const Layout& layout) {
    return layout.elements * compressor.wire_element_bytes();
  }
  static std::size_t scratch_bytes(const compressors::SummableCompressor& compressor,
                                   const Layout& layout) {
    return layout.largest_chunk * compressor.wire_element_bytes();
  }

  // wire and scratch: wire_bytes and scratch_bytes of layout(counts of tensors, ranks).
  FusedCasts(backends::Transport& transport, compressors::SummableCompressor& compressor,
             std::vector<BatchTensor> tensors, std::byte* wire, std::byte* scratch);

  void compress();
  // The ring, then the overflow check and rescue, tensor by tensor.
  Status communicate();
  void finish();

  double wire_sent() const;
  // Tensors rerun with a wider wire.
  std::size_t rescued() const { return rescue_batch_ ? rescue_batch_->tensors_.size() : 0; }

 private:
  std::byte* wire_at(const Segment& segment) const {
    return wire_ + segment.fused_offset * compressor_.wire_element_bytes();
  }
  bool finite(std::size_t tensor) const;
  void decompress(std::size_t tensor) const;
  Status rescue(const std::vector<std::size_t>& overflowed);

  backends::Transport& transport_;
  compressors::SummableCompressor& compressor_;
  std::vector<BatchTensor> tensors_;
  std::byte* wire_;
  std::byte* scratch_;
  Layout layout_;
  CastRing ring_;
  std::unique_ptr<compressors::SummableCompressor> rescue_;
  std::unique_ptr<FusedCasts> rescue_batch_;  // the overflowed tensors, rerun
};

}  // namespace slimreduce::algorithms
