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

// Adds rank r's top-k payload to `expected` the way the kernel picks it: the
// k largest magnitudes (bit patterns without sign), ties to the lower index.
void add_topk_of_rank(int rank, std::size_t k, bool fp16, std::vector<float>& x,
                      std::vector<std::uint32_t>& keys, std::vector<float>& expected) {
  fill_input(rank, x.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) keys[i] = bits_of(x[i]) & 0x7fffffffu;
  std::nth_element(keys.begin(), keys.begin() + std::ptrdiff_t(k - 1), keys.end(),
                   std::greater<>());
  const std::uint32_t threshold = keys[k - 1];
  std::size_t above = 0;
  for (float v : x) above += (bits_of(v) & 0x7fffffffu) > threshold;
  std::size_t ties_left = k - above;  // taken in index order
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t key = bits_of(x[i]) & 0x7fffffffu;
    const bool take = key > threshold || (key == threshold && ties_left > 0 && ties_left--);
    if (take) expected[i] += as_sent(x[i], fp16);  // rank order, in fp32, as the engine adds
  }
}

// First top-k step (no residual): the result must be bit for bit the sum, in
// rank order, of each rank's own top k, since inputs are known exactly.
Judgement judge_topk_first(const float* out, std::size_t count, int ranks, const TopkShape& shape) {
  Judgement j;
  j.error = relative_l2(out, count, ranks);
  const std::size_t k = std::min(count, std::max<std::size_t>(1, shape.k));
  std::vector<float> x(count), expected(count, 0.0f);
  std::vector<std::uint32_t> keys(count);
  for (int r = 0; r < ranks; ++r) add_topk_of_rank(r, k, shape.fp16_values, x, keys, expected);
  for (std::size_t i = 0; i < count && j.ok; ++i) {
    if (bits_of(out[i]) != bits_of(expected[i])) {
      j.ok = false;
      j.why = describe(i, out[i], expected[i], "not the sum of every rank's top k");
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
  if (j.ok && nonzero > shape.k * std::size_t(ranks)) {
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
