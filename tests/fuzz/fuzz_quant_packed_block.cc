// libFuzzer target: a 4- or 2-bit packed block as it may arrive from another
// rank (kernels/quant_packed.h, docs/reliability.md). The first 9 bytes choose
// the width (byte 0: odd 2 bits, even 4 bits), n (bytes 1-4, at most 4096
// values) and the bucket (bytes 5-8, 1 to 4096); the rest is the block,
// padded with zeros to quant_packed_bytes. kernels::quant_packed_valid must
// accept it exactly when every bucket's fp32 is one compress can write
// (restated here from the header's words); an accepted block is decoded on
// every path this CPU has, which must agree bit for bit with each other and
// with the header's decode rule (NaN code, +-inf in a marked bucket, +-top
// to +-m, else q * (m / top)), and accumulate into zeros must give decompress's
// values. The same bytes, read as n floats, are also compressed on every
// path: the block written must be the same everywhere, valid, store each
// bucket's m as the header says, decode finite, NaN, +inf and -inf exactly
// where the input was, within the header's step bound, and leave the
// residual residual_after promises (acc - decoded in fp32, 0 where the
// decoded value is not finite). decoded + residual == acc is not promised
// (acc - decoded may round), so it is not checked.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/quant_packed.h"

namespace {

using namespace slimreduce::kernels;

void check(bool condition) {
  if (!condition) std::abort();
}

std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// quant_packed supports a scalar and an AVX2 path (an AVX-512 CPU runs the
// AVX2 one); every ISA this CPU has is asked for, as in fuzz_quant8_block.cc.
std::vector<Isa> isas() {
  std::vector<Isa> all = {Isa::scalar};
  if (best_isa() != Isa::scalar) all.push_back(Isa::avx2);
  if (best_isa() == Isa::avx512) all.push_back(Isa::avx512);
  return all;
}

// The header's words, restated: codes are two's complement in `bits` bits;
// top is 2^(bits-1) - 1, one less in a marked bucket (its fp32's sign bit
// set); the NaN code is -2^(bits-1); m is at least 2^-100 or 0.
int top_of(int bits, bool marked) { return (1 << (bits - 1)) - 1 - (marked ? 1 : 0); }
int nan_code(int bits) { return -(1 << (bits - 1)); }
const float kTiny = std::ldexp(1.0f, -100);

// A bucket's fp32 compress can write: +0 (no finite value of 2^-100 or more),
// -0 (a marked bucket with none, and every marked 2-bit bucket), +m or -m
// (marked) for a finite m in [2^-100, FLT_MAX], except -m at 2 bits (a
// marked 2-bit bucket sends no finite value, so stores no m). A NaN, an inf
// or a subnormal is none of these.
bool stored_ok(float stored, int bits) {
  if (stored == 0.0f) return true;  // +0 or -0
  if (std::isnan(stored)) return false;
  const float m = std::fabs(stored);
  const bool marked = std::signbit(stored);
  if (marked && bits == 2) return false;
  return m >= kTiny && m <= FLT_MAX;
}

std::size_t code_bytes(std::size_t len, int bits) { return (len * bits + 7) / 8; }
std::size_t codes_offset(std::size_t n, std::size_t bucket, int bits, std::size_t j) {
  return 4 * quant_packed_buckets(n, bucket) + j * code_bytes(bucket, bits);
}

// Code i of a bucket's codes: the `bits`-bit field at bit i * bits, low bits first.
int code_at(const std::uint8_t* codes, std::size_t i, int bits) {
  const std::size_t bit = i * bits;
  const int field = (codes[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
  return field >= (1 << (bits - 1)) ? field - (1 << bits) : field;
}

// Decodes an accepted block on every path: the same bits everywhere, the
// header's value for every code, and accumulate into zeros = decompress.
void decode_everywhere(const std::vector<std::uint8_t>& block, std::size_t n, std::size_t bucket,
                       int bits) {
  std::vector<float> first;
  for (Isa isa : isas()) {
    std::vector<float> out(n), sum(n, 0.0f);
    quant_packed_decompress(block.data(), n, bucket, bits, out.data(), isa);
    quant_packed_accumulate(block.data(), n, bucket, bits, sum.data(), isa);
    for (std::size_t j = 0, start = 0; start < n; ++j, start += bucket) {
      float stored;
      std::memcpy(&stored, block.data() + 4 * j, 4);
      const bool marked = std::signbit(stored);
      const int top = top_of(bits, marked);
      const float m = std::fabs(stored);
      const float step = m == 0.0f ? 0.0f : m / static_cast<float>(top);
      const std::uint8_t* codes = block.data() + codes_offset(n, bucket, bits, j);
      for (std::size_t i = start; i < std::min(n, start + bucket); ++i) {
        const int q = code_at(codes, i - start, bits);
        const float value = out[i];
        if (q == nan_code(bits)) {
          check(std::isnan(value));
        } else if (marked && q == top + 1) {
          check(value == INFINITY);
        } else if (marked && q == -(top + 1)) {
          check(value == -INFINITY);
        } else {
          // A finite code: +-top is +-m itself, any other q * step (q = 0 is +0).
          check(std::isfinite(value) && std::fabs(value) <= m);
          float want = static_cast<float>(q) * step;
          if (top != 0 && q == top) want = m;
          if (top != 0 && q == -top) want = -m;
          check(bits_of(value) == bits_of(want));
          if (q == 0) check(bits_of(value) == 0);
        }
        // 0 + value: -0 comes back +0, a NaN with its quiet bit set.
        const std::uint32_t want_sum = std::isnan(value) ? bits_of(value) | 0x400000u
                                       : value == 0.0f   ? 0u
                                                         : bits_of(value);
        check(bits_of(sum[i]) == want_sum);
      }
    }
    if (first.empty()) first = out;
    check(n == 0 || std::memcmp(first.data(), out.data(), 4 * n) == 0);
  }
}

// The block compress wrote for acc (the input, its residual 0): each bucket's
// fp32 is its largest finite |acc| (0 below 2^-100 or in a marked 2-bit
// bucket), its sign bit set where the bucket holds an inf; the unused high
// bits of each bucket's last code byte are 0.
void check_written(const std::vector<std::uint8_t>& block, const std::vector<float>& acc,
                   std::size_t n, std::size_t bucket, int bits) {
  for (std::size_t j = 0, start = 0; start < n; ++j, start += bucket) {
    const std::size_t len = std::min(bucket, n - start);
    float m = 0.0f;
    bool marked = false;
    for (std::size_t i = start; i < start + len; ++i) {
      if (std::isfinite(acc[i])) m = std::max(m, std::fabs(acc[i]));
      marked = marked || std::isinf(acc[i]);
    }
    if (m < kTiny || top_of(bits, marked) == 0) m = 0.0f;
    float stored;
    std::memcpy(&stored, block.data() + 4 * j, 4);
    check(bits_of(stored) == (bits_of(m) | (marked ? 0x80000000u : 0u)));
    const std::size_t used = len * bits;
    if (used % 8 != 0) {
      const std::uint8_t last = block[codes_offset(n, bucket, bits, j) + used / 8];
      check((last >> (used % 8)) == 0);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 9) return 0;
  const int bits = data[0] % 2 ? 2 : 4;
  std::uint32_t n_bits, bucket_bits;
  std::memcpy(&n_bits, data + 1, 4);
  std::memcpy(&bucket_bits, data + 5, 4);
  const std::size_t n = n_bits % 4097, bucket = bucket_bits % 4096 + 1;
  const std::size_t buckets = quant_packed_buckets(n, bucket);
  check(buckets == (n + bucket - 1) / bucket);
  check(quant_packed_bytes(n, bucket, bits) ==
        (buckets == 0 ? 0
                      : codes_offset(n, bucket, bits, buckets - 1) +
                            code_bytes(n - (buckets - 1) * bucket, bits)));
  std::vector<std::uint8_t> block(quant_packed_bytes(n, bucket, bits), 0);
  if (!block.empty()) std::memcpy(block.data(), data + 9, std::min(block.size(), size - 9));

  bool well_formed = true;
  for (std::size_t j = 0; j < buckets; ++j) {
    float stored;
    std::memcpy(&stored, block.data() + 4 * j, 4);
    well_formed = well_formed && stored_ok(stored, bits);
  }
  const bool valid = quant_packed_valid(block.data(), n, bucket, bits);
  check(valid == well_formed);
  if (valid) decode_everywhere(block, n, bucket, bits);

  // The same bytes as n floats (zero-padded), through compress on every path.
  std::vector<float> in(n, 0.0f), acc(n);
  if (n > 0) std::memcpy(in.data(), data + 9, std::min(4 * n, size - 9));
  for (std::size_t i = 0; i < n; ++i) acc[i] = std::isnan(in[i]) ? in[i] : in[i] + 0.0f;
  std::vector<std::uint8_t> first;
  std::vector<float> first_res;
  for (Isa isa : isas()) {
    std::vector<std::uint8_t> out(quant_packed_bytes(n, bucket, bits)), plain(out.size());
    std::vector<float> res(n, 0.0f), decoded(n);
    quant_packed_compress(in.data(), res.data(), n, bucket, bits, out.data(), isa);
    quant_packed_compress(in.data(), nullptr, n, bucket, bits, plain.data(), isa);
    check(plain == out);  // acc is the input, +0 for -0, either way
    check(quant_packed_valid(out.data(), n, bucket, bits));
    check_written(out, acc, n, bucket, bits);
    quant_packed_decompress(out.data(), n, bucket, bits, decoded.data(), isa);
    for (std::size_t j = 0, start = 0; start < n; ++j, start += bucket) {
      float stored;
      std::memcpy(&stored, out.data() + 4 * j, 4);
      const float m = std::fabs(stored);
      const int top = top_of(bits, std::signbit(stored));
      for (std::size_t i = start; i < std::min(n, start + bucket); ++i) {
        const float a = acc[i], d = decoded[i];
        check(std::isnan(d) == std::isnan(a));
        check(std::isinf(d) == std::isinf(a));
        if (std::isinf(a)) check(d == a);
        // residual_after: acc - decoded in fp32, +0 where decoded is not finite.
        check(bits_of(res[i]) == (std::isfinite(d) ? bits_of(a - d) : 0u));
        if (!std::isfinite(a)) continue;
        if (m == 0.0f) {
          check(d == 0.0f);  // nothing sent: below 2^-100, or a marked 2-bit bucket
        } else {
          // The step bound, and the bucket's largest value decodes exactly.
          const double bound = double(m) / (2 * top) + double(m) * 0x1p-21;
          check(std::fabs(double(d) - double(a)) <= bound);
          if (std::fabs(a) == m) check(d == a);
        }
      }
    }
    if (first.empty()) {
      first = out, first_res = res;
    } else {
      check(first == out);
      check(n == 0 || std::memcmp(first_res.data(), res.data(), 4 * n) == 0);
    }
  }
  if (!first.empty()) decode_everywhere(first, n, bucket, bits);
  return 0;
}
