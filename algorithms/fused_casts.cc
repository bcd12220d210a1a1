#include "algorithms/fused_casts.h"

#include <algorithm>

namespace slimreduce::algorithms {
namespace {

std::vector<std::size_t> counts_of(const std::vector<BatchTensor>& tensors) {
  std::vector<std::size_t> counts;
  counts.reserve(tensors.size());
  for (const BatchTensor& tensor : tensors) counts.push_back(tensor.count);
  return counts;
}

}  // namespace

FusedCasts::Layout FusedCasts::layout(const std::vector<std::size_t>& counts, int ranks) {
  Layout layout;
  layout.chunk_begins.assign(ranks + 1, 0);
  layout.segments.assign(counts.size(), std::vector<Segment>(ranks));
  std::size_t fused = 0;
  for (int chunk = 0; chunk < ranks; ++chunk) {
    layout.chunk_begins[chunk] = fused;
    for (std::size_t t = 0; t < counts.size(); ++t) {
      const std::size_t begin = CastRing::split_at(counts[t], ranks, chunk);
      const std::size_t end = CastRing::split_at(counts[t], ranks, chunk + 1);
      layout.segments[t][chunk] = {begin, fused, end - begin};
      fused += end - begin;
    }
    layout.largest_chunk = std::max(layout.largest_chunk, fused - layout.chunk_begins[chunk]);
  }
  layout.chunk_begins[ranks] = fused;
  layout.elements = fused;
  return layout;
}

FusedCasts::FusedCasts(backends::Transport& transport, compressors::SummableCompressor& compressor,
                       std::vector<BatchTensor> tensors, std::byte* wire, std::byte* scratch)
    : transport_(transport),
      compressor_(compressor),
      tensors_(std::move(tensors)),
      wire_(wire),
      scratch_(scratch),
      layout_(layout(counts_of(tensors_), transport.size())),
      ring_(transport, compressor, layout_.elements, wire, scratch, &layout_.chunk_begins) {}

void FusedCasts::compress() {
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    const BatchTensor& tensor = tensors_[t];
    for (const Segment& segment : layout_.segments[t]) {
      if (segment.length == 0) continue;
      float* residual = tensor.residual ? tensor.residual + segment.tensor_offset : nullptr;
      compressor_.compress(tensor.input + segment.tensor_offset, residual, segment.length,
                           wire_at(segment));
    }
  }
}

bool FusedCasts::finite(std::size_t tensor) const {
  for (const Segment& segment : layout_.segments[tensor]) {
    if (segment.length && !compressor_.wire_finite(wire_at(segment), segment.length)) return false;
  }
  return true;
}

void FusedCasts::decompress(std::size_t tensor) const {
  float* output = tensors_[tensor].output;
  for (const Segment& segment : layout_.segments[tensor]) {
    if (segment.length == 0) continue;
    compressor_.decompress(wire_at(segment), output + segment.tensor_offset, segment.length);
  }
}

Status FusedCasts::communicate() {
  SLIMREDUCE_TRY(ring_.communicate());
  std::vector<std::size_t> overflowed;
  for (std::size_t t = 0; t < tensors_.size(); ++t) {
    if (!finite(t)) overflowed.push_back(t);
  }
  if (overflowed.empty()) return {};
  rescue_ = compressor_.overflow_rescue();
  if (!rescue_) return {};  // a wire whose range is fp32's: the fp32 sum is not finite either
  if (rescue_->wire_element_bytes() != compressor_.wire_element_bytes()) return Status::internal();
  return rescue(overflowed);
}

// The tensors that kept their 16-bit sum are finished now (their inputs are
// no longer needed, and the rerun reuses the wire); the others rerun.
Status FusedCasts::rescue(const std::vector<std::size_t>& overflowed) {
  std::vector<BatchTensor> rerun;
  for (std::size_t t = 0, next = 0; t < tensors_.size(); ++t) {
    if (next < overflowed.size() && overflowed[next] == t) {
      ++next;
      BatchTensor tensor = tensors_[t];
      if (tensor.residual) std::fill_n(tensor.residual, tensor.count, 0.0f);
      tensor.residual = nullptr;
      rerun.push_back(tensor);
    } else {
      decompress(t);
    }
  }
  // A subset's fused chunks are no longer than the whole batch's: the same buffers serve.
  rescue_batch_ =
      std::make_unique<FusedCasts>(transport_, *rescue_, std::move(rerun), wire_, scratch_);
  rescue_batch_->compress();
  return rescue_batch_->communicate();
}

void FusedCasts::finish() {
  if (rescue_batch_) return rescue_batch_->finish();  // the rest was finished by rescue()
  for (std::size_t t = 0; t < tensors_.size(); ++t) decompress(t);
}

double FusedCasts::wire_sent() const {
  return ring_.wire_sent() + (rescue_batch_ ? rescue_batch_->wire_sent() : 0.0);
}

}  // namespace slimreduce::algorithms
