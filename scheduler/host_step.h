// A step of an algorithm (algorithms/) on host buffers: its host entry points
// for compress and finish, its collectives for communicate. Any class with
// the phases of algorithms/phases.h fits.
#pragma once

#include <utility>

#include "scheduler/plan.h"

namespace slimreduce::scheduler {

template <class Algorithm>
class HostStep final : public Step {
 public:
  // input and output: the reduction's floats; residual: nullptr without error feedback.
  template <class... AlgorithmArgs>
  HostStep(const float* input, float* residual, float* output, AlgorithmArgs&&... args)
      : algorithm_(std::forward<AlgorithmArgs>(args)...),
        input_(input),
        residual_(residual),
        output_(output) {}

  Status compress() override {
    algorithm_.compress(input_, residual_);
    return {};
  }
  Status communicate() override { return algorithm_.communicate(); }
  Status finish() override {
    algorithm_.finish(output_);
    return {};
  }
  double wire_sent() const override { return algorithm_.wire_sent(); }

 private:
  Algorithm algorithm_;
  const float* input_;
  float* residual_;
  float* output_;
};

}  // namespace slimreduce::scheduler
