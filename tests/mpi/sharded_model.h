// An independent model of the sharded top-k allreduce (algorithms/sharded.h
// with compressors/topk_shards.h), in float64 where the algorithm sums: each
// rank's top-k of input + residual (selected by fp32 magnitude, ties to the
// lower index, as the kernel's contract says), the owners' sums, the owners'
// second selection (or 16-bit dense shard) with their residuals. It shares no
// code with the library: the tests compare the two.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "tests/reference/independent.h"

namespace slimreduce::testing {

inline std::uint32_t magnitude_bits(double value) {
  const float f = static_cast<float>(value);
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits & 0x7fffffffu;
}

// The k positions of largest fp32 magnitude, ties to the lower position, ascending.
inline std::vector<std::size_t> model_top(const std::vector<double>& acc, std::size_t k) {
  std::vector<std::size_t> order(acc.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&acc](std::size_t a, std::size_t b) {
    return magnitude_bits(acc[a]) > magnitude_bits(acc[b]);
  });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

inline std::size_t model_k(std::size_t n, double ratio) {
  if (n == 0) return 0;
  const auto k = static_cast<std::size_t>(std::ceil(ratio * static_cast<double>(n)));
  return std::clamp<std::size_t>(k, 1, n);
}

inline double round_fp16(double value) { return static_cast<float>(static_cast<_Float16>(value)); }
// fp32's top 16 bits, rounded to nearest even (finite values).
inline double round_bf16(double value) {
  const float f = static_cast<float>(value);
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float rounded;
  std::memcpy(&rounded, &bits, sizeof rounded);
  return rounded;
}

class ShardedTopkModel {
 public:
  ShardedTopkModel(int ranks, std::size_t n, double ratio, bool fp16_values, bool error_feedback)
      : ranks_(ranks),
        n_(n),
        ratio_(ratio),
        fp16_values_(fp16_values),
        error_feedback_(error_feedback),
        residual_(ranks, std::vector<float>(n, 0.0f)),
        bounds_(ranks + 1),
        pairs_(ranks, std::vector<std::size_t>(ranks, 0)) {
    for (int s = 0; s <= ranks; ++s) bounds_[s] = n * s / ranks;  // n * s fits: small n here
    for (int s = 0; s < ranks; ++s) owner_residual_.emplace_back(count(s), 0.0);
  }

  std::size_t begin(int s) const { return bounds_[s]; }
  std::size_t count(int s) const { return bounds_[s + 1] - bounds_[s]; }
  // Selected values of rank r's payload that fell in shard s, last call.
  std::size_t pairs(int r, int s) const { return pairs_[r][s]; }
  const std::vector<float>& residual(int r) const { return residual_[r]; }
  const std::vector<double>& owner_residual(int s) const { return owner_residual_[s]; }
  bool owner_dense(int s) const {
    return model_k(count(s), ratio_) * (4 + (fp16_values_ ? 2 : 4)) >= 2 * count(s);
  }

  // One call: inputs[r] is rank r's tensor; returns the output every rank gets.
  std::vector<double> call(const std::vector<std::vector<float>>& inputs) {
    std::vector<double> sum(n_, 0.0);
    for (int r = 0; r < ranks_; ++r) select_and_send(r, inputs[r], sum);
    std::vector<double> output(n_, 0.0);
    for (int s = 0; s < ranks_; ++s) owner_step(s, sum, output);
    return output;
  }

 private:
  void select_and_send(int r, const std::vector<float>& input, std::vector<double>& sum) {
    std::vector<double> acc(n_);
    for (std::size_t i = 0; i < n_; ++i) {
      acc[i] = error_feedback_ ? static_cast<double>(input[i] + residual_[r][i]) : input[i];
    }
    std::fill(pairs_[r].begin(), pairs_[r].end(), 0);
    std::vector<bool> chosen(n_, false);
    for (const std::size_t i : model_top(acc, model_k(n_, ratio_))) {
      const double sent = fp16_values_ ? round_fp16(acc[i]) : acc[i];
      sum[i] += sent;
      chosen[i] = true;
      const int s =
          static_cast<int>(std::upper_bound(bounds_.begin(), bounds_.end(), i) - bounds_.begin()) -
          1;
      ++pairs_[r][s];
      if (error_feedback_) residual_[r][i] = static_cast<float>(acc[i] - sent);
    }
    if (!error_feedback_) return;
    for (std::size_t i = 0; i < n_; ++i) {
      if (!chosen[i]) residual_[r][i] = static_cast<float>(acc[i]);
    }
  }

  void owner_step(int s, const std::vector<double>& sum, std::vector<double>& output) {
    std::vector<double> acc(count(s));
    for (std::size_t i = 0; i < count(s); ++i) {
      acc[i] = sum[begin(s) + i] + (error_feedback_ ? owner_residual_[s][i] : 0.0);
    }
    std::vector<double> sent(count(s), 0.0);
    if (owner_dense(s)) {
      const bool wide =
          std::any_of(acc.begin(), acc.end(), [](double v) { return std::fabs(v) >= 65520.0; });
      for (std::size_t i = 0; i < count(s); ++i)
        sent[i] = wide ? round_bf16(acc[i]) : round_fp16(acc[i]);
    } else {
      for (const std::size_t i : model_top(acc, model_k(count(s), ratio_)))
        sent[i] = fp16_values_ ? round_fp16(acc[i]) : acc[i];
    }
    for (std::size_t i = 0; i < count(s); ++i) {
      output[begin(s) + i] = sent[i];
      if (error_feedback_) owner_residual_[s][i] = acc[i] - sent[i];
    }
  }

  int ranks_;
  std::size_t n_;
  double ratio_;
  bool fp16_values_;
  bool error_feedback_;
  std::vector<std::vector<float>> residual_;
  std::vector<std::vector<double>> owner_residual_;
  std::vector<std::size_t> bounds_;
  std::vector<std::vector<std::size_t>> pairs_;
};

// The int8 codec on one bucket, as kernels/quant8.h states its rules: scale =
// m / 126 in fp32 (0 below 2^-100), codes rint(x / scale) clamped to 126,
// decoded q * scale; non-finite values kept. Returns the decoded values.
inline std::vector<float> model_quant8_bucket(const std::vector<float>& x) {
  float m = 0.0f;
  for (float v : x)
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  const float scale = m < 0x1p-100f ? 0.0f : m / 126.0f;
  std::vector<float> decoded(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      decoded[i] = std::isnan(x[i]) ? std::numeric_limits<float>::quiet_NaN() : x[i];
      continue;
    }
    const float q =
        scale == 0.0f ? 0.0f : std::clamp(std::nearbyint(x[i] / scale), -126.0f, 126.0f);
    decoded[i] = q == 0.0f ? 0.0f : q * scale;
  }
  return decoded;
}

// The min-max codec on one bucket (kernels/quant8_minmax.h), through the
// independent reference (tests/reference/independent.h). Returns the decoded values.
inline std::vector<float> model_minmax_bucket(const std::vector<float>& x) {
  const reference::MinmaxBucket b = reference::minmax_bucket(x.data(), x.size());
  std::vector<float> decoded(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    decoded[i] = reference::minmax_decode(reference::minmax_code(x[i], b), b.step, b.offset);
  return decoded;
}

// The sharded int8 allreduce: shards of whole buckets, each rank's buckets
// quantized (with its residual), the owners' float64 sums of the decoded
// values quantized again (with their residuals).
class ShardedInt8Model {
 public:
  ShardedInt8Model(int ranks, std::size_t n, std::size_t bucket, bool error_feedback,
                   bool minmax = false)
      : minmax_(minmax),
        ranks_(ranks),
        n_(n),
        bucket_(bucket),
        error_feedback_(error_feedback),
        residual_(ranks, std::vector<float>(n, 0.0f)),
        bounds_(ranks + 1) {
    const std::size_t buckets = (n + bucket - 1) / bucket;
    for (int s = 0; s <= ranks; ++s) bounds_[s] = std::min(buckets * s / ranks * bucket, n);
    for (int s = 0; s < ranks; ++s) owner_residual_.emplace_back(count(s), 0.0);
  }

  std::size_t begin(int s) const { return bounds_[s]; }
  std::size_t count(int s) const { return bounds_[s + 1] - bounds_[s]; }
  const std::vector<float>& residual(int r) const { return residual_[r]; }
  const std::vector<double>& owner_residual(int s) const { return owner_residual_[s]; }

  std::vector<double> call(const std::vector<std::vector<float>>& inputs) {
    std::vector<double> sum(n_, 0.0);
    for (int r = 0; r < ranks_; ++r) {
      std::vector<float> acc(n_);
      for (std::size_t i = 0; i < n_; ++i)
        acc[i] = error_feedback_ ? inputs[r][i] + residual_[r][i] : inputs[r][i];
      const std::vector<float> sent = quantize(acc);
      for (std::size_t i = 0; i < n_; ++i) {
        sum[i] += sent[i];
        if (error_feedback_) residual_[r][i] = std::isfinite(sent[i]) ? acc[i] - sent[i] : 0.0f;
      }
    }
    std::vector<double> output(n_);
    std::vector<float> acc(n_);
    for (int s = 0; s < ranks_; ++s)
      for (std::size_t i = 0; i < count(s); ++i)
        acc[begin(s) + i] =
            static_cast<float>(sum[begin(s) + i] + (error_feedback_ ? owner_residual_[s][i] : 0.0));
    const std::vector<float> sent = quantize(acc);
    for (int s = 0; s < ranks_; ++s)
      for (std::size_t i = 0; i < count(s); ++i) {
        const std::size_t at = begin(s) + i;
        output[at] = sent[at];
        if (error_feedback_)
          owner_residual_[s][i] = std::isfinite(sent[at]) ? double(acc[at]) - sent[at] : 0.0;
      }
    return output;
  }

 private:
  // Bucket by bucket: shards begin on bucket bounds, so buckets are the same
  // whether a tensor is cut into shards or not.
  std::vector<float> quantize(const std::vector<float>& x) const {
    std::vector<float> out;
    for (std::size_t b = 0; b < n_; b += bucket_) {
      const std::vector<float> part(x.begin() + b, x.begin() + std::min(n_, b + bucket_));
      const std::vector<float> decoded =
          minmax_ ? model_minmax_bucket(part) : model_quant8_bucket(part);
      out.insert(out.end(), decoded.begin(), decoded.end());
    }
    return out;
  }

  bool minmax_;  // SLIMREDUCE_QUANT_CODES=minmax
  int ranks_;
  std::size_t n_;
  std::size_t bucket_;
  bool error_feedback_;
  std::vector<std::vector<float>> residual_;
  std::vector<std::vector<double>> owner_residual_;
  std::vector<std::size_t> bounds_;
};

}  // namespace slimreduce::testing
