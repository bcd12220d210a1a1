// What every algorithm class is: three phases, compress (the host entry
// point, or a device path's kernels), communicate (the collectives, over the
// Transport) and finish (the host entry point, or kernels). run() is the
// whole allreduce on host buffers; a path whose compress and finish run
// elsewhere calls communicate() alone, between its own steps.
#pragma once

#include "backends/status.h"

namespace slimreduce::algorithms {

template <class Algorithm>
class Phases {
 public:
  Status run(const float* input, float* residual, float* output) {
    auto& algorithm = static_cast<Algorithm&>(*this);
    algorithm.compress(input, residual);
    SLIMREDUCE_TRY(algorithm.communicate());
    algorithm.finish(output);
    return {};
  }
};

}  // namespace slimreduce::algorithms
