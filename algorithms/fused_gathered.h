// The gathered allreduce (algorithms/gathered.h) over a fused batch
// (docs/architecture.md, "Fusion"): each tensor is selected on its own (its
// own k, so a layer of small gradients keeps its share of the payload),
// their payloads are laid end to end in one slot, one allgather carries
// every rank's slot, and each tensor's payloads are added in rank order. So
// every tensor gets the bits its own GatheredAllreduce would give.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/batch.h"
#include "backends/transport.h"
#include "compressors/compressor.h"

namespace slimreduce::algorithms {

class FusedGathered {
 public:
  // The bytes of one rank's slot: every tensor's payload, end to end.
  static std::size_t slot_bytes(const compressors::GatheredCompressor& compressor,
                                const std::vector<BatchTensor>& tensors);

  // payload: slot_bytes; gathered: slot_bytes x ranks.
  FusedGathered(backends::Transport& transport, compressors::GatheredCompressor& compressor,
                std::vector<BatchTensor> tensors, std::byte* payload, std::byte* gathered);

  void compress();
  // Every rank's slot into the gathered buffer; each tensor's payloads checked.
  Status communicate();
  void finish() const;
  double wire_sent() const;
  std::size_t rescued() const { return 0; }

 private:
  backends::Transport& transport_;
  compressors::GatheredCompressor& compressor_;
  std::vector<BatchTensor> tensors_;
  std::vector<std::size_t> offsets_;  // each tensor's payload in the slot
  std::size_t slot_bytes_;
  std::byte* payload_;
  std::byte* gathered_;
};

}  // namespace slimreduce::algorithms
