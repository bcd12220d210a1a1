// libFuzzer target: a 4- or 2-bit packed block as it may arrive from another
// rank (kernels/quant_packed.h and kernels/quant_packed_minmax.h,
// docs/reliability.md). The first 9 bytes choose the width (byte 0's bit 0:
// set 2 bits, clear 4 bits), the codes (byte 0's bit 1: clear absmax, set
// min-max), n (bytes 1-4, at most 4096 values) and the bucket (bytes 5-8, 1
// to 4096); the rest is the block, padded with zeros to its size.
//
// Absmax (quant_packed_bytes): kernels::quant_packed_valid must
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
//
// Min-max (quant_packed_minmax_bytes): kernels::quant_packed_minmax_valid
// must accept it exactly when every bucket's (a, b) is a pair the header
// allows (restated here: a finite; (v, +inf), a marked flat bucket, with v +0
// or a normal float; else b finite and the pair not both below 2^-100 but
// (+0, +0); a > b only at 4 bits with a - b finite and >= 2^-100; a <= b with
// b - a finite). An accepted block is decoded on every path, the same bits
// everywhere and as the independent reference
// (tests/reference/independent_packed_minmax.h) decodes it, NaN's bits
// included; accumulate into zeros gives decompress's values; every code up to
// the bucket's top decodes finite within [lo, hi], code 0 to lo and top to hi.
// The same bytes as n floats are compressed on every path: the same block
// and residual everywhere, bit for bit the reference's (and without a
// residual too), valid, NaN, +inf and -inf decoded exactly where the input
// had them, the residual residual_after's, and each finite value within the
// header's bound: (hi - lo) / (2 top) + (hi - lo + M) 2^-21 in a bucket with a
// step, < 2^-100 in a flat one, 0 in a tiny one, (hi - lo) / 2 (plus the same
// rounding) in a marked flat one; buckets clipped to +-2^126 are not bounded.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax.h"
#include "tests/reference/independent_packed_minmax.h"

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

// ----------------------------------------------------------- min-max codes ----
// The header's words (quant_packed_minmax.h), restated: codes are unsigned
// `bits`-bit fields; top is 2^bits - 2, or 2^bits - 4 in a marked bucket
// (whose codes top + 1 and top + 2 are -inf and +inf); 2^bits - 1 is NaN.

int minmax_top(int bits, bool marked) { return (1 << bits) - (marked ? 4 : 2); }
int minmax_nan_code(int bits) { return (1 << bits) - 1; }
bool tiny(float x) { return std::fabs(x) < kTiny; }  // false for NaN and inf

std::size_t minmax_codes_offset(std::size_t n, std::size_t bucket, int bits, std::size_t j) {
  return 8 * ((n + bucket - 1) / bucket) + j * code_bytes(bucket, bits);
}

int minmax_code_at(const std::uint8_t* codes, std::size_t i, int bits) {
  const std::size_t bit = i * bits;
  return (codes[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
}

void load_pair(const std::vector<std::uint8_t>& block, std::size_t j, float* a, float* b) {
  std::memcpy(a, block.data() + 8 * j, 4);
  std::memcpy(b, block.data() + 8 * j + 4, 4);
}

// A pair compress can write, as quant_packed_minmax_valid's header states it:
// a finite; values all below 2^-100 send +0, so the only pair with both
// below is (+0, +0); (v, +inf) is a marked flat bucket, v +0 or a normal
// float (its midpoint or lo may lie below 2^-100, but is never -0 nor
// subnormal: the fuzzer found compress writing 0x1.20fep-101 there, which
// the check once refused); (hi, lo), a > b, a marked
// bucket with a step: 4 bits only (a marked 2-bit bucket's top is 0), its
// range in fp32 finite and at least 2^-100; (lo, hi) otherwise, lo <= hi
// (+0 before -0 refused, both tiny anyway) and hi - lo finite (a wider
// bucket is clipped to +-2^126).
bool minmax_pair_ok(float a, float b, int bits) {
  if (!std::isfinite(a)) return false;
  if (bits_of(b) == 0x7f800000u) return bits_of(a) == 0 || std::fpclassify(a) == FP_NORMAL;
  if (!std::isfinite(b)) return false;
  if (tiny(a) && tiny(b)) return bits_of(a) == 0 && bits_of(b) == 0;
  if (a > b) {
    const float range = a - b;
    return bits == 4 && std::isfinite(range) && range >= kTiny;
  }
  return std::isfinite(b - a);
}

// Decodes an accepted min-max block on every path: the same bits everywhere
// and as the reference decodes it; codes up to top finite within [lo, hi]
// (code 0 lo, top hi), the others -inf, +inf (marked) and NaN; accumulate
// into zeros = decompress.
void decode_minmax_everywhere(const std::vector<std::uint8_t>& block, std::size_t n,
                              std::size_t bucket, int bits) {
  const std::vector<float> want =
      slimreduce::reference::quant_packed_minmax_decompress(block.data(), n, bucket, bits);
  for (Isa isa : isas()) {
    std::vector<float> out(n), sum(n, 0.0f);
    quant_packed_minmax_decompress(block.data(), n, bucket, bits, out.data(), isa);
    quant_packed_minmax_accumulate(block.data(), n, bucket, bits, sum.data(), isa);
    // The reference writes NaN as 0x7fc00000, as the kernels do: all bits compared.
    check(n == 0 || std::memcmp(want.data(), out.data(), 4 * n) == 0);
    for (std::size_t j = 0, start = 0; start < n; ++j, start += bucket) {
      float a, b;
      load_pair(block, j, &a, &b);
      const bool flat_marked = bits_of(b) == 0x7f800000u, marked = flat_marked || a > b;
      const float lo = flat_marked ? a : marked ? b : a, hi = flat_marked ? a : marked ? a : b;
      const int top = minmax_top(bits, marked);
      const std::uint8_t* codes = block.data() + minmax_codes_offset(n, bucket, bits, j);
      for (std::size_t i = start; i < std::min(n, start + bucket); ++i) {
        const int c = minmax_code_at(codes, i - start, bits);
        const float value = out[i];
        if (c == minmax_nan_code(bits)) {
          check(std::isnan(value));
        } else if (c == top + 1) {
          check(marked && value == -INFINITY);
        } else if (c == top + 2) {
          check(marked && value == INFINITY);
        } else {
          check(c <= top && std::isfinite(value) && value >= lo && value <= hi);
          if (c == 0) check(bits_of(value) == bits_of(lo));
          if (c == top) check(bits_of(value) == bits_of(hi));
        }
        // 0 + value: -0 comes back +0, a NaN with its quiet bit set.
        const std::uint32_t want_sum = std::isnan(value) ? bits_of(value) | 0x400000u
                                       : value == 0.0f   ? 0u
                                                         : bits_of(value);
        check(bits_of(sum[i]) == want_sum);
      }
    }
  }
}

// Each finite value of the block compress wrote for acc, decoded as d, within
// the header's bound for its bucket (lo, hi and the mark worked out here from
// acc): a tiny bucket sends 0; one with a step errs by at most
// (hi - lo) / (2 top) + (hi - lo + M) 2^-21 and sends lo and hi exactly; a
// flat one (hi - lo < 2^-100) by less than 2^-100; a marked flat one by
// (hi - lo) / 2 and the same rounding. A clipped bucket (hi - lo overflows
// in fp32) is skipped.
void check_minmax_bound(const std::vector<float>& acc, const std::vector<float>& decoded,
                        std::size_t n, std::size_t bucket, int bits) {
  for (std::size_t start = 0; start < n; start += bucket) {
    const std::size_t end = std::min(n, start + bucket);
    bool any = false, marked = false;
    float lo = 0.0f, hi = 0.0f;
    for (std::size_t i = start; i < end; ++i) {
      marked = marked || std::isinf(acc[i]);
      if (!std::isfinite(acc[i])) continue;
      lo = any ? std::min(lo, acc[i]) : acc[i];
      hi = any ? std::max(hi, acc[i]) : acc[i];
      any = true;
    }
    if (!any) continue;
    const float m = std::max(std::fabs(lo), std::fabs(hi)), range32 = hi - lo;
    if (m >= kTiny && !std::isfinite(range32)) continue;  // clipped to +-2^126
    const double range = double(hi) - double(lo), rounding = (range + double(m)) * 0x1p-21;
    const int top = minmax_top(bits, marked);
    const bool step = m >= kTiny && top != 0 && range32 >= kTiny;
    for (std::size_t i = start; i < end; ++i) {
      if (!std::isfinite(acc[i])) continue;
      const double err = std::fabs(double(decoded[i]) - double(acc[i]));
      if (m < kTiny) {
        check(bits_of(decoded[i]) == 0);
      } else if (step) {
        check(err <= range / (2 * top) + rounding);
        if (acc[i] == lo || acc[i] == hi) check(decoded[i] == acc[i]);
      } else if (!marked || range32 < kTiny) {
        check(err < double(kTiny));
      } else {
        check(err <= range / 2 + rounding);
      }
    }
  }
}

// The min-max codes: validity, an accepted block decoded, the same bytes as
// floats compressed.
void check_minmax(const std::uint8_t* data, std::size_t size, std::size_t n, std::size_t bucket,
                  int bits) {
  const std::size_t buckets = (n + bucket - 1) / bucket;
  check(quant_packed_minmax_bytes(n, bucket, bits) ==
        (buckets == 0 ? 0
                      : minmax_codes_offset(n, bucket, bits, buckets - 1) +
                            code_bytes(n - (buckets - 1) * bucket, bits)));
  std::vector<std::uint8_t> block(quant_packed_minmax_bytes(n, bucket, bits), 0);
  if (!block.empty()) std::memcpy(block.data(), data + 9, std::min(block.size(), size - 9));

  bool well_formed = true;
  for (std::size_t j = 0; j < buckets; ++j) {
    float a, b;
    load_pair(block, j, &a, &b);
    well_formed = well_formed && minmax_pair_ok(a, b, bits);
  }
  const bool valid = quant_packed_minmax_valid(block.data(), n, bucket, bits);
  check(valid == well_formed);
  if (valid) decode_minmax_everywhere(block, n, bucket, bits);

  // The same bytes as n floats (zero-padded), through compress on every path,
  // with a residual starting at 0 and without one.
  std::vector<float> in(n, 0.0f), acc(n);
  if (n > 0) std::memcpy(in.data(), data + 9, std::min(4 * n, size - 9));
  for (std::size_t i = 0; i < n; ++i) acc[i] = std::isnan(in[i]) ? in[i] : in[i] + 0.0f;
  std::vector<float> want_res(n, 0.0f);
  const std::vector<std::uint8_t> want = slimreduce::reference::quant_packed_minmax_compress(
      in.data(), want_res.data(), n, bucket, bits);
  const std::vector<std::uint8_t> want_plain =
      slimreduce::reference::quant_packed_minmax_compress(in.data(), nullptr, n, bucket, bits);
  for (Isa isa : isas()) {
    std::vector<std::uint8_t> out(quant_packed_minmax_bytes(n, bucket, bits)), plain(out.size());
    std::vector<float> res(n, 0.0f), decoded(n);
    quant_packed_minmax_compress(in.data(), res.data(), n, bucket, bits, out.data(), isa);
    quant_packed_minmax_compress(in.data(), nullptr, n, bucket, bits, plain.data(), isa);
    // The reference's blocks and residual, bit for bit: so the same on every path.
    check(out == want);
    check(plain == want_plain);  // acc is the input itself: -0 may be lo, a NaN unquieted
    check(n == 0 || std::memcmp(want_res.data(), res.data(), 4 * n) == 0);
    check(quant_packed_minmax_valid(out.data(), n, bucket, bits));
    check(quant_packed_minmax_valid(plain.data(), n, bucket, bits));
    quant_packed_minmax_decompress(out.data(), n, bucket, bits, decoded.data(), isa);
    for (std::size_t i = 0; i < n; ++i) {
      const float a = acc[i], d = decoded[i];
      check(std::isnan(d) == std::isnan(a));
      check(std::isinf(d) == std::isinf(a));
      if (std::isinf(a)) check(d == a);
      // residual_after: acc - decoded in fp32, +0 where decoded is not finite.
      check(bits_of(res[i]) == (std::isfinite(d) ? bits_of(a - d) : 0u));
    }
    check_minmax_bound(acc, decoded, n, bucket, bits);
  }
  decode_minmax_everywhere(want, n, bucket, bits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 9) return 0;
  const int bits = data[0] & 1 ? 2 : 4;
  const bool minmax = data[0] & 2;
  std::uint32_t n_bits, bucket_bits;
  std::memcpy(&n_bits, data + 1, 4);
  std::memcpy(&bucket_bits, data + 5, 4);
  const std::size_t n = n_bits % 4097, bucket = bucket_bits % 4096 + 1;
  const std::size_t buckets = quant_packed_buckets(n, bucket);
  check(buckets == (n + bucket - 1) / bucket);
  if (minmax) {
    check_minmax(data, size, n, bucket, bits);
    return 0;
  }
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
