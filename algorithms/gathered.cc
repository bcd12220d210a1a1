#include "algorithms/gathered.h"

#include <algorithm>

#include "algorithms/wire_bytes.h"

namespace slimreduce::algorithms {

Status check_payloads(const backends::Transport& transport,
                      const compressors::GatheredCompressor& compressor, const std::byte* first,
                      std::size_t stride, std::size_t count) {
  if (!transport.host_readable()) return {};
  for (int rank = 0; rank < transport.size(); ++rank) {
    if (!compressor.payload_valid(first + stride * rank, count)) return Status::internal();
  }
  return {};
}

Status GatheredAllreduce::communicate() {
  SLIMREDUCE_TRY(transport_.allgather(payload_, slot_bytes_, gathered_));
  return check_payloads(transport_, compressor_, gathered_, slot_bytes_, count_);
}

void GatheredAllreduce::finish(float* output) const {
  std::fill_n(output, count_, 0.0f);
  for (int rank = 0; rank < transport_.size(); ++rank) {
    compressor_.accumulate(gathered_ + slot_bytes_ * rank, count_, output);
  }
}

double GatheredAllreduce::wire_sent() const {
  return ring_allgather_wire_bytes(slot_bytes_, transport_.size());
}

}  // namespace slimreduce::algorithms
