// libFuzzer target: an 8-bit min-max block as it may arrive from another
// rank (kernels/quant8_minmax.h, docs/reliability.md). The first 8 bytes
// choose n (at most 4096 values) and the bucket (1 to 4096); the rest is the
// block, padded with zeros to its size. kernels::quant8_minmax_valid must
// accept it exactly when every (step, offset) pair is one compress can write
// (checked here independently, in long double); an accepted block is decoded
// on every path this CPU has, which must agree bit for bit, and no finite
// code (0..252) may decode as an inf or a NaN. The same bytes, read as n
// floats, are also compressed: the block written must be valid, decode
// finite where the input was, and give the input back with its residual.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"

namespace {

using namespace slimreduce::kernels;

void check(bool condition) {
  if (!condition) std::abort();
}

// A pair compress can write, restated from the header: both +0; or a step
// 2^k, k in [-123, 120], and an offset j * 2^k (j whole, in [-2^24, 2^24),
// not -0) whose 253 points lie within [-FLT_MAX, FLT_MAX].
bool pair_ok(float step, float offset) {
  std::uint32_t step_bits, offset_bits;
  std::memcpy(&step_bits, &step, 4);
  std::memcpy(&offset_bits, &offset, 4);
  if (step_bits == 0) return offset_bits == 0;
  int k = 0;
  if (!(step > 0) || !std::isfinite(step) || std::frexp(step, &k) != 0.5f) return false;
  if (k - 1 < -123 || k - 1 > 120 || !std::isfinite(offset) || offset_bits == 0x80000000u)
    return false;
  const long double j = static_cast<long double>(offset) / step;
  return j == std::floor(j) && j >= -16777216.0L && j < 16777216.0L &&
         (j + 252) * step <= static_cast<long double>(FLT_MAX);
}

std::vector<Isa> isas() {
  std::vector<Isa> all = {Isa::scalar};
  if (best_isa() != Isa::scalar) all.push_back(Isa::avx2);
  if (best_isa() == Isa::avx512) all.push_back(Isa::avx512);
  return all;
}

void decode_everywhere(const std::vector<std::uint8_t>& block, std::size_t n, std::size_t bucket) {
  const std::size_t codes = 8 * quant8_buckets(n, bucket);
  std::vector<float> first;
  for (Isa isa : isas()) {
    std::vector<float> out(n), sum(n, 0.0f);
    quant8_minmax_decompress(block.data(), n, bucket, out.data(), isa);
    quant8_minmax_accumulate(block.data(), n, bucket, sum.data(), isa);
    for (std::size_t i = 0; i < n; ++i) {
      check(std::isfinite(out[i]) == (block[codes + i] <= 252));
      check(std::memcmp(&out[i], &sum[i], 4) == 0 || (std::isnan(out[i]) && std::isnan(sum[i])) ||
            (out[i] == 0 && sum[i] == 0));  // 0 + -0 is +0
    }
    if (first.empty()) first = out;
    check(n == 0 || std::memcmp(first.data(), out.data(), 4 * n) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 8) return 0;
  std::uint32_t n_bits, bucket_bits;
  std::memcpy(&n_bits, data, 4);
  std::memcpy(&bucket_bits, data + 4, 4);
  const std::size_t n = n_bits % 4097, bucket = bucket_bits % 4096 + 1;
  const std::size_t buckets = quant8_buckets(n, bucket);
  std::vector<std::uint8_t> block(quant8_minmax_bytes(n, bucket), 0);
  if (!block.empty()) std::memcpy(block.data(), data + 8, std::min(block.size(), size - 8));

  bool well_formed = true;
  for (std::size_t j = 0; j < buckets; ++j) {
    float pair[2];
    std::memcpy(pair, block.data() + 8 * j, 8);
    well_formed = well_formed && pair_ok(pair[0], pair[1]);
  }
  const bool valid = quant8_minmax_valid(block.data(), n, bucket);
  check(valid == well_formed);
  if (valid) decode_everywhere(block, n, bucket);

  // The same bytes as n floats (zero-padded), through compress on every path.
  std::vector<float> in(n, 0.0f);
  if (n > 0) std::memcpy(in.data(), data + 8, std::min(4 * n, size - 8));
  std::vector<std::uint8_t> first;
  for (Isa isa : isas()) {
    std::vector<std::uint8_t> out(quant8_minmax_bytes(n, bucket));
    std::vector<float> res(n, 0.0f), decoded(n);
    quant8_minmax_compress(in.data(), res.data(), n, bucket, out.data(), isa);
    check(quant8_minmax_valid(out.data(), n, bucket));
    quant8_minmax_decompress(out.data(), n, bucket, decoded.data(), isa);
    for (std::size_t i = 0; i < n; ++i) {
      const float acc = in[i] + 0.0f;  // the residual started at 0
      check(std::isfinite(decoded[i]) == std::isfinite(acc));
      check(!std::isfinite(acc) || decoded[i] + res[i] == acc);
    }
    if (first.empty()) first = out;
    check(first == out);
  }
  return 0;
}
