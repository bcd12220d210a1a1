#include "algorithms/rescued_cast_ring.h"

#include <algorithm>

namespace slimreduce::algorithms {

Status RescuedCastRing::communicate() {
  SLIMREDUCE_TRY(ring_.communicate());
  if (compressor_.wire_finite(wire_, count_)) return {};
  rescue_ = compressor_.overflow_rescue();
  if (!rescue_) return {};  // a wire whose range is fp32's: the fp32 sum is not finite either
  if (rescue_->wire_element_bytes() != compressor_.wire_element_bytes()) return Status::internal();
  rescue_ring_.emplace(transport_, *rescue_, count_, wire_, scratch_);
  rescue_ring_->compress(input_, nullptr);
  if (residual_) std::fill_n(residual_, count_, 0.0f);
  return rescue_ring_->communicate();
}

}  // namespace slimreduce::algorithms
