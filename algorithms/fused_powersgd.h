// PowerSGD (algorithms/powersgd.h) over a fused batch (docs/architecture.md,
// "Fusion", "Low rank"): each tensor is its own matrix with its own Q (warm
// start per key), and the batch's sums ride one collective each: every
// tensor's P laid end to end and summed at once, then every Q, then the M of
// every tensor summed exactly (below the minimum compression, or a P or Q
// that came out not finite). A batch of many small layers so makes 2 or 3
// collectives instead of 2 per layer. The decisions read counts and summed
// bits, the same on every rank, so every rank takes the same stages.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "algorithms/batch.h"
#include "algorithms/powersgd.h"
#include "backends/transport.h"
#include "compressors/compressor.h"

namespace slimreduce::algorithms {

class FusedPowerSgd {
 public:
  static std::size_t workspace_bytes(const compressors::LowRankCompressor& compressor,
                                     const std::vector<BatchTensor>& tensors, int ranks);

  FusedPowerSgd(backends::Transport& transport, compressors::LowRankCompressor& compressor,
                std::vector<BatchTensor> tensors, std::byte* workspace);

  void compress();
  Status communicate();
  void finish();
  double wire_sent() const { return wire_sent_; }
  std::size_t rescued() const { return 0; }

 private:
  // The tensors' summands, end to end in the shared buffer, summed over the
  // ranks, and back in each tensor's place.
  Status sum_together(const std::vector<std::span<float>>& summands);

  backends::Transport& transport_;
  std::vector<BatchTensor> tensors_;
  std::vector<std::unique_ptr<PowerSgd>> steps_;  // one per tensor, on its own workspace
  float* together_;                               // the summands end to end
  SumScratch sums_;
  double wire_sent_ = 0;
};

}  // namespace slimreduce::algorithms
