// Any algorithm's phases behind one interface, for an algorithm that wraps
// another (algorithms/hierarchical.h runs CastRing or GatheredAllreduce on a
// shard) without knowing which.
#pragma once

#include <memory>
#include <utility>

#include "backends/status.h"

namespace slimreduce::algorithms {

// Whether an algorithm object reran with a wider wire after an overflow
// (algorithms/rescued_cast_ring.h); false for one that never does.
template <class Algorithm>
bool overflow_rescued_of(const Algorithm& algorithm) {
  if constexpr (requires { algorithm.overflow_rescued(); }) {
    return algorithm.overflow_rescued();
  } else {
    return false;
  }
}

class Allreduce {
 public:
  virtual ~Allreduce() = default;
  virtual void compress(const float* input, float* residual) = 0;
  virtual Status communicate() = 0;
  virtual void finish(float* output) = 0;
  virtual double wire_sent() const = 0;
  // Whether it reran with a wider wire after an overflow (rescued_cast_ring.h).
  virtual bool overflow_rescued() const { return false; }
};

template <class Algorithm>
class AllreduceOf final : public Allreduce {
 public:
  template <class... Args>
  explicit AllreduceOf(Args&&... args) : algorithm_(std::forward<Args>(args)...) {}
  void compress(const float* input, float* residual) override {
    algorithm_.compress(input, residual);
  }
  Status communicate() override { return algorithm_.communicate(); }
  void finish(float* output) override { algorithm_.finish(output); }
  double wire_sent() const override { return algorithm_.wire_sent(); }
  bool overflow_rescued() const override { return overflow_rescued_of(algorithm_); }

 private:
  Algorithm algorithm_;
};

// An algorithm chosen at run time, held through the interface, with the
// phases of an algorithm class (for scheduler::HostStep and its kin).
class AnyAllreduce {
 public:
  explicit AnyAllreduce(std::unique_ptr<Allreduce> algorithm) : algorithm_(std::move(algorithm)) {}
  void compress(const float* input, float* residual) { algorithm_->compress(input, residual); }
  Status communicate() { return algorithm_->communicate(); }
  void finish(float* output) { algorithm_->finish(output); }
  double wire_sent() const { return algorithm_->wire_sent(); }
  bool overflow_rescued() const { return algorithm_->overflow_rescued(); }

 private:
  std::unique_ptr<Allreduce> algorithm_;
};

}  // namespace slimreduce::algorithms
