// A reduction of a fused batch (docs/architecture.md, "Fusion"): the
// caller's buffers of one tensor. Several of them ride one collective of
// algorithms/fused_casts.h or algorithms/fused_gathered.h.
#pragma once

#include <cstddef>
#include <vector>

#include "compressors/compressor.h"

namespace slimreduce::algorithms {

struct BatchTensor {
  const float* input;  // may be output itself (MPI_IN_PLACE): read before output is written
  float* residual;     // nullptr: no error feedback for this tensor
  float* output;
  std::size_t count;
  std::vector<float>* state = nullptr;  // the key's compressor state (a low-rank one's Q)
  std::size_t rows = 0;                 // the tensor's real row count (the native API's), or 0
  compressors::CallDraw draw = {};      // a stochastic quantizer's (compressors::CallDraw)
};

}  // namespace slimreduce::algorithms
