#include "algorithms/fused_powersgd.h"

#include <algorithm>

namespace slimreduce::algorithms {
namespace {

// The largest of the three stages' summands, end to end: every P, every Q
// (a Q may be longer than its M: the view pads the last row), every M.
std::size_t floats_of(const compressors::LowRankCompressor& compressor,
                      const std::vector<BatchTensor>& tensors) {
  std::size_t p = 0, q = 0, m = 0;
  for (const BatchTensor& t : tensors) {
    const kernels::LowRankShape shape = compressor.shape(t.count, t.rows);
    if (shape.rank > 0) p += shape.p_floats(), q += shape.q_floats();
    m += t.count;
  }
  return std::max({p, q, m});
}

// The shared buffer: the summands end to end, and a sum's scratch.
struct Shared {
  std::size_t together, block, tail;
  Shared(std::size_t floats, int ranks)
      : together(floats),
        block(std::max<std::size_t>(floats / static_cast<std::size_t>(ranks), 1)),
        tail(static_cast<std::size_t>(ranks)) {}
  std::size_t bytes() const { return (together + block + tail) * sizeof(float); }
};

}  // namespace

std::size_t FusedPowerSgd::workspace_bytes(const compressors::LowRankCompressor& compressor,
                                           const std::vector<BatchTensor>& tensors, int ranks) {
  std::size_t bytes = Shared(floats_of(compressor, tensors), ranks).bytes();
  for (const BatchTensor& t : tensors)
    bytes += PowerSgd::workspace_bytes(compressor, t.count, ranks, t.rows);
  return bytes;
}

FusedPowerSgd::FusedPowerSgd(backends::Transport& transport,
                             compressors::LowRankCompressor& compressor,
                             std::vector<BatchTensor> tensors, std::byte* workspace)
    : transport_(transport), tensors_(std::move(tensors)) {
  const Shared shared(floats_of(compressor, tensors_), transport.size());
  together_ = reinterpret_cast<float*>(workspace);
  sums_ = {together_ + shared.together, together_ + shared.together + shared.block};
  std::byte* next = workspace + shared.bytes();
  for (const BatchTensor& t : tensors_) {
    steps_.push_back(
        std::make_unique<PowerSgd>(transport, compressor, t.count, t.state, next, t.rows));
    next += PowerSgd::workspace_bytes(compressor, t.count, transport.size(), t.rows);
  }
}

void FusedPowerSgd::compress() {
  for (std::size_t i = 0; i < steps_.size(); ++i)
    steps_[i]->compress(tensors_[i].input, tensors_[i].residual);
}

Status FusedPowerSgd::communicate() {
  std::vector<PowerSgd*> compressed, exact;
  std::vector<std::span<float>> summands;
  for (auto& step : steps_) {
    const std::span<float> p = step->p_summand();
    (p.empty() ? exact : compressed).push_back(step.get());
    if (!p.empty()) summands.push_back(p);
  }
  SLIMREDUCE_TRY(sum_together(summands));
  // Each stage keeps the tensors whose sum came out finite; the others are
  // summed exactly at the end.
  std::vector<PowerSgd*> kept;
  summands.clear();
  bool finite = false;
  for (PowerSgd* step : compressed) {
    SLIMREDUCE_TRY(step->p_summed(&finite));
    if (finite) {
      kept.push_back(step);
      summands.push_back(step->q_summand());
    } else {
      exact.push_back(step);
    }
  }
  SLIMREDUCE_TRY(sum_together(summands));
  for (PowerSgd* step : kept) {
    SLIMREDUCE_TRY(step->q_summed(&finite));
    if (!finite) exact.push_back(step);
  }
  summands.clear();
  for (PowerSgd* step : exact) {
    std::span<float> m;
    SLIMREDUCE_TRY(step->exact_summand(&m));
    summands.push_back(m);
  }
  return sum_together(summands);
}

void FusedPowerSgd::finish() {
  for (std::size_t i = 0; i < steps_.size(); ++i) steps_[i]->finish(tensors_[i].output);
}

Status FusedPowerSgd::sum_together(const std::vector<std::span<float>>& summands) {
  if (summands.empty()) return {};
  float* end = together_;
  for (const std::span<float> summand : summands)
    end = std::copy(summand.begin(), summand.end(), end);
  SLIMREDUCE_TRY(sum_over_ranks(transport_, together_, static_cast<std::size_t>(end - together_),
                                sums_, &wire_sent_));
  const float* from = together_;
  for (const std::span<float> summand : summands) {
    std::copy_n(from, summand.size(), summand.begin());
    from += summand.size();
  }
  return {};
}

}  // namespace slimreduce::algorithms
