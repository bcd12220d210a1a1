#include "algorithms/fused_gathered.h"

#include <algorithm>

#include "algorithms/gathered.h"
#include "algorithms/wire_bytes.h"

namespace slimreduce::algorithms {

std::size_t FusedGathered::slot_bytes(const compressors::GatheredCompressor& compressor,
                                      const std::vector<BatchTensor>& tensors) {
  std::size_t bytes = 0;
  for (const BatchTensor& tensor : tensors) bytes += compressor.compressed_bytes(tensor.count);
  return bytes;
}

FusedGathered::FusedGathered(backends::Transport& transport,
                             compressors::GatheredCompressor& compressor,
                             std::vector<BatchTensor> tensors, std::byte* payload,
                             std::byte* gathered)
    : transport_(transport),
      compressor_(compressor),
      tensors_(std::move(tensors)),
      slot_bytes_(slot_bytes(compressor, tensors_)),
      payload_(payload),
      gathered_(gathered) {
  std::size_t offset = 0;
  for (const BatchTensor& tensor : tensors_) {
    offsets_.push_back(offset);
    offset += compressor.compressed_bytes(tensor.count);
  }
}

void FusedGathered::compress() {
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    const BatchTensor& tensor = tensors_[t];
    compressor_.compress(tensor.input, tensor.residual, tensor.count, payload_ + offsets_[t]);
  }
}

Status FusedGathered::communicate() {
  SLIMREDUCE_TRY(transport_.allgather(payload_, slot_bytes_, gathered_));
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    SLIMREDUCE_TRY(check_payloads(transport_, compressor_, gathered_ + offsets_[t], slot_bytes_,
                                  tensors_[t].count));
  }
  return {};
}

void FusedGathered::finish() const {
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    const BatchTensor& tensor = tensors_[t];
    std::fill_n(tensor.output, tensor.count, 0.0f);
    for (int rank = 0; rank < transport_.size(); ++rank) {
      compressor_.accumulate(gathered_ + slot_bytes_ * rank + offsets_[t], tensor.count,
                             tensor.output);
    }
  }
}

double FusedGathered::wire_sent() const {
  return ring_allgather_wire_bytes(slot_bytes_, transport_.size());
}

}  // namespace slimreduce::algorithms
