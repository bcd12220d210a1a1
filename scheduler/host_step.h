// A step of an algorithm (algorithms/) on host buffers: its host entry points
// for compress and finish, its collectives for communicate. Any class with
// the phases of algorithms/phases.h fits.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "algorithms/allreduce.h"
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
    return status_of([&] { return algorithm_.compress(input_, residual_); });
  }
  Status communicate() override { return algorithm_.communicate(); }
  Status finish() override {
    return status_of([&] { return algorithm_.finish(output_); });
  }
  double wire_sent() const override { return algorithm_.wire_sent(); }
  std::size_t overflow_rescued() const override {
    return algorithms::overflow_rescued_of(algorithm_) ? 1 : 0;
  }
  // A host phase that returns a Status communicates (a hierarchical one's).
  bool local_phases() const override {
    return !std::is_same_v<decltype(std::declval<Algorithm&>().compress(input_, residual_)),
                           Status>;
  }

 private:
  // A host phase that cannot fail returns nothing; one that communicates
  // (a hierarchical algorithm's) returns its Status.
  template <class Phase>
  static Status status_of(Phase&& phase) {
    if constexpr (std::is_same_v<decltype(phase()), Status>) {
      return phase();
    } else {
      phase();
      return {};
    }
  }

  Algorithm algorithm_;
  const float* input_;
  float* residual_;
  float* output_;
};

// A step of a fused batch's algorithm (algorithms/fused_casts.h,
// fused_gathered.h) on host buffers: the batch carries its tensors' buffers.
template <class Batch>
class HostBatchStep final : public Step {
 public:
  template <class... BatchArgs>
  explicit HostBatchStep(BatchArgs&&... args) : batch_(std::forward<BatchArgs>(args)...) {}

  Status compress() override {
    batch_.compress();
    return {};
  }
  Status communicate() override { return batch_.communicate(); }
  Status finish() override {
    batch_.finish();
    return {};
  }
  double wire_sent() const override { return batch_.wire_sent(); }
  std::size_t overflow_rescued() const override { return batch_.rescued(); }
  bool local_phases() const override { return true; }  // its host entry points alone

 private:
  Batch batch_;
};

}  // namespace slimreduce::scheduler
