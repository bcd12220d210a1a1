#include "algorithms/powersgd.h"

#include <algorithm>

#include "algorithms/wire_bytes.h"

namespace slimreduce::algorithms {
namespace {

std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// Where each buffer lies in the workspace, in floats.
struct Floats {
  std::size_t m, p, q_sum, q_local, block, tail;
  std::size_t total() const { return m + p + q_sum + q_local + block + tail; }
};

Floats floats_for(const kernels::LowRankShape& shape, int ranks) {
  const LowRankSums sums(shape, ranks);
  Floats f{};
  f.m = shape.count;
  f.p = sums.p_padded;
  f.q_sum = sums.q_padded;
  f.q_local = shape.q_floats();
  f.block = sums.block;
  f.tail = static_cast<std::size_t>(ranks);
  return f;
}

}  // namespace

LowRankSums::LowRankSums(const kernels::LowRankShape& shape, int ranks) {
  const auto n = static_cast<std::size_t>(ranks);
  p_padded = round_up(shape.p_floats(), n);
  q_padded = round_up(shape.q_floats(), n);
  factor_block = std::max(p_padded, q_padded) / n;
  block = std::max({factor_block, shape.count / n, std::size_t{1}});
}

std::size_t PowerSgd::workspace_bytes(const compressors::LowRankCompressor& compressor,
                                      std::size_t count, int ranks, std::size_t rows) {
  return floats_for(compressor.shape(count, rows), ranks).total() * sizeof(float);
}

PowerSgd::PowerSgd(backends::Transport& transport, compressors::LowRankCompressor& compressor,
                   std::size_t count, std::vector<float>* state, std::byte* workspace,
                   std::size_t rows)
    : transport_(transport),
      compressor_(compressor),
      shape_(compressor.shape(count, rows)),
      q_(state) {
  const Floats f = floats_for(shape_, transport.size());
  m_ = reinterpret_cast<float*>(workspace);
  p_ = m_ + f.m;
  q_sum_ = p_ + f.p;
  q_local_ = q_sum_ + f.q_sum;
  sums_.block = q_local_ + f.q_local;
  sums_.tail = sums_.block + f.block;
  p_padded_ = f.p;
  q_padded_ = f.q_sum;
  if (shape_.rank == 0) return;
  // Allocated here, before compress() writes anything.
  q_ = warm_start(compressor_, shape_, q_, own_q_);
}

std::vector<float>* warm_start(const compressors::LowRankCompressor& compressor,
                               const kernels::LowRankShape& shape, std::vector<float>* state,
                               std::vector<float>& own) {
  std::vector<float>* q = state ? state : &own;
  if (q->size() != shape.q_floats()) {
    q->assign(shape.q_floats(), 0.0f);
    compressor.seed(shape, q->data());
  }
  return q;
}

void PowerSgd::compress(const float* input, float* residual) {
  residual_ = residual;
  const std::size_t n = shape_.count;
  if (residual) {
    for (std::size_t e = 0; e < n; ++e) m_[e] = input[e] + residual[e];
  } else {
    std::copy_n(input, n, m_);
  }
  if (shape_.rank == 0) return;
  compressor_.project(m_, shape_, q_->data(), p_);
  std::fill(p_ + shape_.p_floats(), p_ + p_padded_, 0.0f);
}

Status PowerSgd::communicate() { return sum_low_rank(transport_, *this, sums_, &wire_sent_); }

std::span<float> PowerSgd::p_summand() {
  if (shape_.rank == 0) return {};
  return {p_, shape_.p_floats()};
}

Status PowerSgd::p_summed(bool* finite) {
  // Every rank holds the same summed bits, so every rank decides alike.
  *finite = kernels::all_finite(p_, shape_.p_floats());
  if (!*finite) return {};
  compressor_.orthonormalise(p_, shape_);
  compressor_.back_project(m_, shape_, p_, q_local_);
  std::copy_n(q_local_, shape_.q_floats(), q_sum_);
  std::fill(q_sum_ + shape_.q_floats(), q_sum_ + q_padded_, 0.0f);
  return {};
}

std::span<float> PowerSgd::q_summand() { return {q_sum_, shape_.q_floats()}; }

Status PowerSgd::q_summed(bool* finite) {
  *finite = kernels::all_finite(q_sum_, shape_.q_floats());
  if (*finite) std::copy_n(q_sum_, shape_.q_floats(), q_->data());  // the next call's start
  return {};
}

Status PowerSgd::exact_summand(std::span<float>* m) {
  exact_ = true;
  *m = {m_, shape_.count};
  return {};
}

void PowerSgd::finish(float* output) {
  if (exact_) {
    std::copy_n(m_, shape_.count, output);
    if (residual_) std::fill_n(residual_, shape_.count, 0.0f);  // all of M was sent
    return;
  }
  compressor_.finish(m_, shape_, p_, q_sum_, q_local_, output, residual_);
}

Status sum_low_rank(backends::Transport& transport, LowRankStages& stages,
                    const SumScratch& scratch, double* wire_sent) {
  // P and Q with their zeros up to whole blocks: one reduce-scatter each.
  const auto ranks = static_cast<std::size_t>(transport.size());
  auto sum_padded = [&](std::span<float> summand) {
    return sum_over_ranks(transport, summand.data(), round_up(summand.size(), ranks), scratch,
                          wire_sent);
  };
  bool finite = false;
  if (const std::span<float> p = stages.p_summand(); !p.empty()) {
    SLIMREDUCE_TRY(sum_padded(p));
    SLIMREDUCE_TRY(stages.p_summed(&finite));
    if (finite) {
      SLIMREDUCE_TRY(sum_padded(stages.q_summand()));
      SLIMREDUCE_TRY(stages.q_summed(&finite));
      if (finite) return {};
    }
  }
  std::span<float> m;
  SLIMREDUCE_TRY(stages.exact_summand(&m));
  return sum_over_ranks(transport, m.data(), m.size(), scratch, wire_sent);
}

Status sum_over_ranks(backends::Transport& transport, float* data, std::size_t n,
                      const SumScratch& scratch, double* wire_sent) {
  const auto ranks = static_cast<std::size_t>(transport.size());
  const std::size_t block = n / ranks;
  const std::size_t rest = n % ranks;
  if (block > 0) {
    SLIMREDUCE_TRY(transport.reduce_scatter_sum(data, scratch.block, block));
    SLIMREDUCE_TRY(transport.allgather(scratch.block, block * sizeof(float), data));
    *wire_sent += ring_allreduce_wire_bytes(block * ranks * sizeof(float), transport.size());
  }
  if (rest > 0) {
    // The last floats, one per rank, the rest zeros: one more block each.
    std::fill_n(scratch.tail, ranks, 0.0f);
    std::copy_n(data + block * ranks, rest, scratch.tail);
    SLIMREDUCE_TRY(transport.reduce_scatter_sum(scratch.tail, scratch.block, 1));
    SLIMREDUCE_TRY(transport.allgather(scratch.block, sizeof(float), scratch.tail));
    std::copy_n(scratch.tail, rest, data + block * ranks);
    *wire_sent += ring_allreduce_wire_bytes(ranks * sizeof(float), transport.size());
  }
  return {};
}

}  // namespace slimreduce::algorithms
