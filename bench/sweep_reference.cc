#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "bench/bench_reference.h"

namespace slimreduce::bench {
namespace {

// splitmix64: a cheap, well-mixed hash, so inputs need no storage.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// What the wire makes of a top-k value: fp16 rounds to nearest even, as the kernels do.
float as_sent(float value, bool fp16) { return fp16 ? float(static_cast<_Float16>(value)) : value; }

std::string describe(std::size_t index, double out, double ref, const char* rule) {
  char text[160];
  std::snprintf(text, sizeof text, "element %zu: got %.9g, reference %.9g (%s)", index, out, ref,
                rule);
  return text;
}

// Pass-through and casts: the result may differ from the exact sum by
// unit x sum|x| (one rounding per addend and per partial sum, each bounded
// by the magnitudes summed) plus `floor` for fp16's subnormal spacing;
// `rule` names the bound in messages (nullptr: measure only).
Judgement judge_dense(const float* out, std::size_t count, int ranks, double unit, double floor,
                      const char* rule) {
  Judgement j;
  for (std::size_t i = 0; i < count; ++i) {
    double ref = 0, magnitude = 0;
    for (int r = 0; r < ranks; ++r) {
      const double x = input_value(r, i);
      ref += x;
      magnitude += std::fabs(x);
    }
    const double diff = std::fabs(double(out[i]) - ref);
    const double rel = magnitude > 0 ? diff / magnitude : (diff > 0 ? INFINITY : 0);
    if (!(rel <= j.error)) j.error = rel;  // NaN sticks
    if (rule && j.ok && !(diff <= unit * magnitude + floor)) {
      j.ok = false;
      j.why = describe(i, out[i], ref, rule);
    }
  }
  return j;
}

double relative_l2(const float* out, std::size_t count, int ranks) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double ref = 0;
    for (int r = 0; r < ranks; ++r) ref += input_value(r, i);
    err += (double(out[i]) - ref) * (double(out[i]) - ref);
    norm += ref * ref;
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

// Adds rank r's top-k payload of x[0, n) to `expected` the way the kernel
// picks it: the k largest magnitudes (bit patterns without sign), ties to the
// lower index.
void add_topk_of_rank(const float* x, std::size_t n, std::size_t k, bool fp16,
                      std::vector<std::uint32_t>& keys, float* expected) {
  keys.resize(n);
  for (std::size_t i = 0; i < n; ++i) keys[i] = bits_of(x[i]) & 0x7fffffffu;
  std::nth_element(keys.begin(), keys.begin() + std::ptrdiff_t(k - 1), keys.end(),
                   std::greater<>());
  const std::uint32_t threshold = keys[k - 1];
  std::size_t above = 0;
  for (std::size_t i = 0; i < n; ++i) above += (bits_of(x[i]) & 0x7fffffffu) > threshold;
  std::size_t ties_left = k - above;  // taken in index order
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t key = bits_of(x[i]) & 0x7fffffffu;
    const bool take = key > threshold || (key == threshold && ties_left > 0 && ties_left--);
    if (take) expected[i] += as_sent(x[i], fp16);  // rank order, in fp32, as the engine adds
  }
}

float round_bf16(float value) {
  std::uint32_t bits = bits_of(value);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  float rounded;
  std::memcpy(&rounded, &bits, sizeof rounded);
  return rounded;
}

// The sharded algorithm's owners on a piece's summed payloads (no owner
// residual yet): each shard's top k_o kept and the rest zeroed, or the whole
// shard in 16 bits where that is smaller (bf16 where fp16 would overflow).
void owner_step(float* sum, std::size_t n, int ranks, const TopkShape& shape,
                std::vector<std::uint32_t>& keys) {
  const auto shards = std::size_t(ranks);
  const std::size_t entry = shape.fp16_values ? 6 : 8;
  std::vector<float> kept;
  for (std::size_t s = 0; s < shards; ++s) {
    const std::size_t begin = n / shards * s + n % shards * s / shards;
    const std::size_t end = n / shards * (s + 1) + n % shards * (s + 1) / shards;
    const std::size_t count = end - begin;
    if (count == 0) continue;
    float* shard = sum + begin;
    const std::size_t k = topk_k(count, shape.ratio);
    if (k * entry >= 2 * count) {
      const bool wide = std::any_of(shard, shard + count, [](float v) {
        return std::isfinite(v) && std::fabs(v) >= 65520.0f;
      });
      for (std::size_t i = 0; i < count; ++i)
        shard[i] = wide ? round_bf16(shard[i]) : float(static_cast<_Float16>(shard[i]));
      continue;
    }
    kept.assign(count, 0.0f);
    add_topk_of_rank(shard, count, k, shape.fp16_values, keys, kept.data());
    std::copy(kept.begin(), kept.end(), shard);
  }
}

// First top-k step (no residual): the result must be bit for bit what the
// engine makes of inputs known exactly: piece by piece (a call larger than
// SLIMREDUCE_PARTITION_BYTES is cut into near-equal pieces, each with its own
// top k), the sum in rank order of each rank's own top k; sharded, each
// owner's selection of its shard of that sum.
Judgement judge_topk_first(const float* out, std::size_t count, int ranks, const TopkShape& shape) {
  Judgement j;
  j.error = relative_l2(out, count, ranks);
  std::vector<float> x(count), expected(count, 0.0f);
  std::vector<std::uint32_t> keys;
  const std::size_t pieces = std::max<std::size_t>(1, shape.pieces);
  const auto piece_begin = [&](std::size_t p) {
    return count / pieces * p + std::min(p, count % pieces);  // the longer pieces first
  };
  for (int r = 0; r < ranks; ++r) {
    fill_input(r, x.data(), count);
    for (std::size_t p = 0; p < pieces; ++p) {
      const std::size_t begin = piece_begin(p), n = piece_begin(p + 1) - begin;
      if (n > 0)
        add_topk_of_rank(x.data() + begin, n, topk_k(n, shape.ratio), shape.fp16_values, keys,
                         expected.data() + begin);
    }
  }
  if (shape.sharded) {
    for (std::size_t p = 0; p < pieces; ++p)
      owner_step(expected.data() + piece_begin(p), piece_begin(p + 1) - piece_begin(p), ranks,
                 shape, keys);
  }
  for (std::size_t i = 0; i < count && j.ok; ++i) {
    if (bits_of(out[i]) != bits_of(expected[i])) {
      j.ok = false;
      j.why = describe(i, out[i], expected[i],
                       shape.sharded ? "not the owners' top k of the sum of every rank's top k"
                                     : "not the sum of every rank's top k");
    }
  }
  return j;
}

// A later top-k step carries residuals this bench cannot see, so its error is
// measured, and only its shape is enforced: finite, at most ranks x k nonzeros.
Judgement judge_topk_step(const float* out, std::size_t count, int ranks, const TopkShape& shape) {
  Judgement j;
  j.error = relative_l2(out, count, ranks);
  std::size_t nonzero = 0;
  for (std::size_t i = 0; i < count; ++i) {
    nonzero += out[i] != 0.0f;
    if (j.ok && !std::isfinite(out[i])) {
      j.ok = false;
      j.why = describe(i, out[i], 0, "not finite");
    }
  }
  // Sharded owners may send a shard whole (16 bits) where that is smaller.
  if (j.ok && !shape.sharded && nonzero > shape.k * std::size_t(ranks)) {
    j.ok = false;
    j.why = std::to_string(nonzero) +
            " nonzeros, more than ranks x k = " + std::to_string(shape.k * std::size_t(ranks));
  }
  return j;
}

}  // namespace

float input_value(int rank, std::size_t index) {
  const std::uint64_t h = mix((std::uint64_t(rank) << 40) ^ index);
  const std::int32_t centred = std::int32_t(h >> 40) - (1 << 23);  // [-2^23, 2^23)
  return float(centred) * 0x1p-23f;
}

void fill_input(int rank, float* out, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) out[i] = input_value(rank, i);
}

bool uses_l2_metric(Bound bound) { return bound == Bound::topk_first || bound == Bound::topk_step; }

Judgement judge(const float* out, std::size_t count, int ranks, Bound bound,
                const TopkShape& topk) {
  // Unit roundoffs: fp32 2^-24, fp16 2^-11, bf16 2^-8. The casts get n + 2
  // of them: n - 1 partial sums, the inputs, and one more for error feedback.
  const double n = ranks;
  switch (bound) {
    case Bound::exact_sum:
      return judge_dense(out, count, ranks, n * 0x1p-24, 0, "beyond n fp32 roundings");
    case Bound::cast_fp16:
      return judge_dense(out, count, ranks, (n + 2) * 0x1p-11, 2 * (n + 2) * 0x1p-25,
                         "beyond n + 2 fp16 roundings");
    case Bound::cast_bf16:
      return judge_dense(out, count, ranks, (n + 2) * 0x1p-8, 0, "beyond n + 2 bf16 roundings");
    case Bound::quant8:
      // A rank's code is off by at most half its bucket's step (largest |x| / 252,
      // |x| <= 1 here) and its residual carries at most that; the owner's the
      // same of sums up to n: 4 (n + 1) half steps with the residuals, plus fp32 sums.
      return judge_dense(out, count, ranks, n * 0x1p-24, 4.1 * (n + 1) / 252,
                         "beyond the 8-bit steps of every rank and the owner");
    case Bound::topk_first:
      return judge_topk_first(out, count, ranks, topk);
    case Bound::topk_step:
      return judge_topk_step(out, count, ranks, topk);
    case Bound::none_known:
      break;
  }
  return judge_dense(out, count, ranks, 0, 0, nullptr);
}

std::uint64_t digest(const float* values, std::size_t count) {
  std::uint64_t h = count;
  for (std::size_t i = 0; i < count; ++i) h = mix(h ^ bits_of(values[i]));
  return h;
}

}  // namespace slimreduce::bench
