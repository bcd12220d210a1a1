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
  const auto n = static_cast<std::size_t>(ranks);
  Floats f{};
  f.m = shape.count;
  // P and Q are padded with zeros to whole blocks: one reduce-scatter each.
  f.p = round_up(shape.p_floats(), n);
  f.q_sum = round_up(shape.q_floats(), n);
  f.q_local = shape.q_floats();
  f.block = std::max({f.p / n, f.q_sum / n, shape.count / n, std::size_t{1}});
  f.tail = n;
  return f;
}

}  // namespace

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
  if (!q_) q_ = &own_q_;
  // A new key, a new shape or another rank: start again from the seed
  // (allocated here, before compress() writes anything).
  if (q_->size() != shape_.q_floats()) {
    q_->assign(shape_.q_floats(), 0.0f);
    compressor_.seed(shape_, q_->data());
  }
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

Status PowerSgd::communicate() {
  if (shape_.rank == 0) return sum_exactly();
  SLIMREDUCE_TRY(sum_over_ranks(transport_, p_, p_padded_, sums_, &wire_sent_));
  if (!p_summed()) return sum_exactly();
  SLIMREDUCE_TRY(sum_over_ranks(transport_, q_sum_, q_padded_, sums_, &wire_sent_));
  if (!q_summed()) return sum_exactly();
  return {};
}

std::span<float> PowerSgd::p_summand() {
  if (shape_.rank == 0) return {};
  return {p_, shape_.p_floats()};
}

bool PowerSgd::p_summed() {
  // Every rank holds the same summed bits, so every rank decides alike.
  if (!kernels::all_finite(p_, shape_.p_floats())) return false;
  compressor_.orthonormalise(p_, shape_);
  compressor_.back_project(m_, shape_, p_, q_local_);
  std::copy_n(q_local_, shape_.q_floats(), q_sum_);
  std::fill(q_sum_ + shape_.q_floats(), q_sum_ + q_padded_, 0.0f);
  return true;
}

std::span<float> PowerSgd::q_summand() { return {q_sum_, shape_.q_floats()}; }

bool PowerSgd::q_summed() {
  if (!kernels::all_finite(q_sum_, shape_.q_floats())) return false;
  std::copy_n(q_sum_, shape_.q_floats(), q_->data());  // the next call's start
  return true;
}

std::span<float> PowerSgd::exact_summand() {
  exact_ = true;
  return {m_, shape_.count};
}

void PowerSgd::finish(float* output) {
  if (exact_) {
    std::copy_n(m_, shape_.count, output);
    if (residual_) std::fill_n(residual_, shape_.count, 0.0f);  // all of M was sent
    return;
  }
  compressor_.finish(m_, shape_, p_, q_sum_, q_local_, output, residual_);
}

Status PowerSgd::sum_exactly() {
  const std::span<float> m = exact_summand();
  return sum_over_ranks(transport_, m.data(), m.size(), sums_, &wire_sent_);
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
