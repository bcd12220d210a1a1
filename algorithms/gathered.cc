#include "algorithms/gathered.h"

#include <algorithm>

#include "algorithms/wire_bytes.h"

namespace slimreduce::algorithms {

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
