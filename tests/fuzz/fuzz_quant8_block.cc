// libFuzzer target: an 8-bit quantized block as it may arrive from another
// rank (kernels/quant8.h, docs/reliability.md). The first 8 bytes choose n
// (the block's values, at most 4096) and the bucket (1 to 4096); the rest is
// the block, padded with zeros to its size. kernels::quant8_valid must accept
// it exactly when every scale is 0 or one compress can write (checked here
// independently); an accepted block is decoded on every path this CPU has,
// which must agree bit for bit, and no value of a finite code may decode as
// an inf or a NaN. The same bytes, read as n floats, are also compressed: the
// block written must be valid and decode to finite values where they were.
// The same bytes are also read as a block-scaled fp8 block (kernels/quant_fp8.h,
// b exponent bytes then n codes) and put through the same checks: valid
// exactly when every exponent byte is 0 or in [19, 246], decoded alike on
// every path, a finite code (all but 0x80, 0x7f, 0xff) never inf or NaN; and
// the floats compressed as fp8, alike everywhere, valid, decoding finite
// where they were, the residual exact.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/quant8.h"
#include "kernels/quant_fp8.h"

namespace {

using namespace slimreduce::kernels;

bool scale_ok(float scale) {
  const float lowest = std::ldexp(1.0f, -100) / 126.0f, highest = FLT_MAX / 126.0f;
  std::uint32_t bits;
  std::memcpy(&bits, &scale, 4);
  return bits == 0 || (scale >= lowest && scale <= highest);  // false for NaN, -0, negatives
}

std::vector<Isa> isas() {
  std::vector<Isa> all = {Isa::scalar};
  if (best_isa() != Isa::scalar) all.push_back(Isa::avx2);
  if (best_isa() == Isa::avx512) all.push_back(Isa::avx512);
  return all;
}

void check(bool condition) {
  if (!condition) std::abort();
}

// Decodes an accepted block on every path; finite codes must decode finite.
void decode_everywhere(const std::vector<std::uint8_t>& block, std::size_t n, std::size_t bucket) {
  const std::size_t codes = 4 * quant8_buckets(n, bucket);
  std::vector<float> first;
  for (Isa isa : isas()) {
    std::vector<float> out(n), sum(n, 0.0f);
    quant8_decompress(block.data(), n, bucket, out.data(), isa);
    quant8_accumulate(block.data(), n, bucket, sum.data(), isa);
    for (std::size_t i = 0; i < n; ++i) {
      const int q = static_cast<std::int8_t>(block[codes + i]);
      check(std::isfinite(out[i]) == (q >= -126 && q <= 126));
      check(std::memcmp(&out[i], &sum[i], 4) == 0 || (std::isnan(out[i]) && std::isnan(sum[i])) ||
            (out[i] == 0 && sum[i] == 0));  // 0 + -0 is +0
    }
    if (first.empty()) first = out;
    check(n == 0 || std::memcmp(first.data(), out.data(), 4 * n) == 0);
  }
}

// The fp8 block read from the same bytes: its checks, as above.
void check_fp8(const std::uint8_t* data, std::size_t size, std::size_t n, std::size_t bucket) {
  std::vector<std::uint8_t> block(quant_fp8_bytes(n, bucket), 0);
  if (!block.empty()) std::memcpy(block.data(), data + 8, std::min(block.size(), size - 8));
  const std::size_t buckets = quant_fp8_buckets(n, bucket);
  bool well_formed = true;
  for (std::size_t j = 0; j < buckets; ++j)
    well_formed = well_formed && (block[j] == 0 || (block[j] >= 19 && block[j] <= 246));
  check(quant_fp8_valid(block.data(), n, bucket) == well_formed);
  if (well_formed) {
    std::vector<float> first;
    for (Isa isa : isas()) {
      std::vector<float> out(n), sum(n, 0.0f);
      quant_fp8_decompress(block.data(), n, bucket, out.data(), isa);
      quant_fp8_accumulate(block.data(), n, bucket, sum.data(), isa);
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t c = block[buckets + i];
        check(std::isfinite(out[i]) == (c != 0x80 && c != 0x7f && c != 0xff));
        check(std::memcmp(&out[i], &sum[i], 4) == 0 || (std::isnan(out[i]) && std::isnan(sum[i])) ||
              (out[i] == 0 && sum[i] == 0));
      }
      if (first.empty()) first = out;
      check(n == 0 || std::memcmp(first.data(), out.data(), 4 * n) == 0);
    }
  }
  std::vector<float> in(n, 0.0f);
  if (n > 0) std::memcpy(in.data(), data + 8, std::min(4 * n, size - 8));
  std::vector<std::uint8_t> first;
  for (Isa isa : isas()) {
    std::vector<std::uint8_t> out(quant_fp8_bytes(n, bucket));
    std::vector<float> res(n, 0.0f), decoded(n);
    quant_fp8_compress(in.data(), res.data(), n, bucket, out.data(), isa);
    check(quant_fp8_valid(out.data(), n, bucket));
    quant_fp8_decompress(out.data(), n, bucket, decoded.data(), isa);
    for (std::size_t i = 0; i < n; ++i) {
      const float acc = in[i] + 0.0f;  // the residual started at 0
      check(std::isfinite(decoded[i]) == std::isfinite(acc));
      check(std::isnan(decoded[i]) == std::isnan(acc));
      check(!std::isfinite(acc) || decoded[i] + res[i] == acc);
    }
    if (first.empty()) first = out;
    check(first == out);
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
  std::vector<std::uint8_t> block(quant8_bytes(n, bucket), 0);
  if (!block.empty()) std::memcpy(block.data(), data + 8, std::min(block.size(), size - 8));

  bool well_formed = true;
  for (std::size_t j = 0; j < buckets; ++j) {
    float scale;
    std::memcpy(&scale, block.data() + 4 * j, 4);
    well_formed = well_formed && scale_ok(scale);
  }
  const bool valid = quant8_valid(block.data(), n, bucket);
  check(valid == well_formed);
  if (valid) decode_everywhere(block, n, bucket);

  // The same bytes as n floats (zero-padded), through compress on every path.
  std::vector<float> in(n, 0.0f);
  if (n > 0) std::memcpy(in.data(), data + 8, std::min(4 * n, size - 8));
  std::vector<std::uint8_t> first;
  for (Isa isa : isas()) {
    std::vector<std::uint8_t> out(quant8_bytes(n, bucket));
    std::vector<float> res(n, 0.0f), decoded(n);
    quant8_compress(in.data(), res.data(), n, bucket, out.data(), isa);
    check(quant8_valid(out.data(), n, bucket));
    quant8_decompress(out.data(), n, bucket, decoded.data(), isa);
    for (std::size_t i = 0; i < n; ++i) {
      const float acc = in[i] + 0.0f;  // the residual started at 0
      check(std::isfinite(decoded[i]) == std::isfinite(acc));
      check(!std::isfinite(acc) || decoded[i] + res[i] == acc);
    }
    if (first.empty()) first = out;
    check(first == out);
  }
  check_fp8(data, size, n, bucket);
  return 0;
}
