// The 4- and 2-bit packed codes on the GPU (kernels/cuda/quant_packed.cu)
// against their CPU twins (kernels/quant_packed.h), bit for bit: compress with
// and without error feedback (the fp32s, the packed codes with their zero
// high bits, the residual), decompress with a divisor, and several ranks'
// blocks accumulated in order. Blocks at odd addresses (a gathered buffer
// puts them anywhere), counts that end mid-byte and mid-bucket, buckets
// whose codes do not fill their last byte, the warp/block edge at 4096
// values, and buckets marked by an inf (at 2 bits their finite values all
// code 0), with NaNs, constants and values too small for a step. Blocks to
// decode are ones the CPU twin wrote, as a peer's would be.
#include "bench/device_check_util.cuh"
#include "kernels/quant_packed.h"

namespace slimreduce::device_check {
namespace {

struct PackedCase {
  const char* name;
  std::size_t n, bucket;
  bool ef;
  std::size_t offset;  // the block this many bytes past a 16-byte boundary
};

std::string packed_name(const char* what, int bits, const PackedCase& c) {
  return std::string(what) + " int" + std::to_string(bits) + (*c.name ? " " : "") + c.name +
         " n=" + std::to_string(c.n) + " bucket=" + std::to_string(c.bucket) +
         (c.ef ? " +EF" : "") + (c.offset ? " block+" + std::to_string(c.offset) : "");
}

// Finite values, with a few buckets made special: an inf (a marked bucket),
// a NaN, both, all infs, a constant, all below 2^-100, the fp32 randoms' own
// specials, values on exact ties between codes (without error feedback the
// division lands on x.5: a rounding other than ties to even shows there).
std::vector<float> packed_values(std::size_t n, std::size_t bucket) {
  std::vector<float> v = values(n, false);
  const std::vector<float> specials = values(n, true);
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t first = 0, j = 0; first < n; first += bucket, ++j) {
    const std::size_t last = std::min(n, first + bucket), mid = first + (last - first) / 2;
    switch (j % 9) {
      case 1:
        v[mid] = inf;
        break;
      case 2:
        v[mid] = std::numeric_limits<float>::quiet_NaN();
        break;
      case 3:
        v[first] = -inf;
        v[mid] = std::nanf("");
        break;
      case 4:
        for (std::size_t i = first; i < last; ++i) v[i] = i % 2 ? inf : -inf;
        break;
      case 5:
        for (std::size_t i = first; i < last; ++i) v[i] = -3.25f;
        break;
      case 6:
        for (std::size_t i = first; i < last; ++i) v[i] = std::ldexp(v[i], -110);
        break;
      case 7:
        for (std::size_t i = first; i < last; ++i) v[i] = specials[i];
        break;
      case 8: {  // codes on exact ties (steps 1 at 4 bits, 7 at 2): rint's ties to even
        const float ties[] = {0.5f, 1.5f, 2.5f, -2.5f, 3.5f, -3.5f, 4.5f, 5.5f, -0.5f, 6.5f};
        for (std::size_t i = first; i < last; ++i) v[i] = ties[(i - first) % 10];
        v[first] = 7.0f;
        break;
      }
      default:
        break;
    }
  }
  return v;
}

std::vector<std::uint8_t> cpu_block(const std::vector<float>& in, std::size_t bucket, int bits) {
  std::vector<std::uint8_t> block(k::quant_packed_bytes(in.size(), bucket, bits));
  k::quant_packed_compress(in.data(), nullptr, in.size(), bucket, bits, block.data(),
                           k::Isa::scalar);
  return block;
}

void check_compress(const PackedCase& c, int bits, const k::Rounding& rounding = {}) {
  const std::vector<float> in = packed_values(c.n, c.bucket);
  std::vector<float> res = values(c.n, false);
  const std::size_t bytes = k::quant_packed_bytes(c.n, c.bucket, bits);
  auto din = dev(c.n * 4), dres = dev(c.n * 4), dout = dev(bytes + c.offset);
  put(din.get(), in);
  put(dres.get(), res);
  std::byte* gout = dout.get() + c.offset;
  poison(gout, bytes);
  float* gres = c.ef ? reinterpret_cast<float*>(dres.get()) : nullptr;
  CK(cu::quant_packed_compress(reinterpret_cast<float*>(din.get()), gres, c.n, c.bucket, bits, gout,
                               nullptr, rounding));
  std::vector<std::uint8_t> want(bytes);
  k::quant_packed_compress(in.data(), c.ef ? res.data() : nullptr, c.n, c.bucket, bits, want.data(),
                           k::Isa::scalar, rounding);
  std::string where;
  bool ok = same_bits(get<std::uint8_t>(gout, bytes), want, &where);
  if (ok && c.ef) ok = same_bits(get<float>(dres.get(), c.n), res, &where);
  report(packed_name("quant_packed_compress", bits, c) + rounding_suffix(rounding), ok, where);
}

void check_decode(const PackedCase& c, int bits, int divisor, int ranks) {
  std::vector<std::uint8_t> block = cpu_block(packed_values(c.n, c.bucket), c.bucket, bits);
  auto dblock = dev(block.size() + c.offset), dout = dev(c.n * 4);
  std::byte* gblock = dblock.get() + c.offset;
  auto* gout = reinterpret_cast<float*>(dout.get());
  put(gblock, block);
  poison(gout, c.n * 4);
  CK(cu::quant_packed_decompress(gblock, c.n, c.bucket, bits, gout, divisor, nullptr));
  std::vector<float> want(c.n);
  k::quant_packed_decompress(block.data(), c.n, c.bucket, bits, want.data(), k::Isa::scalar);
  for (auto& x : want) x = k::divide_keeping_nan(x, divisor);
  std::string where;
  report(packed_name("quant_packed_decompress", bits, c) + " /" + std::to_string(divisor),
         same_bits(get<float>(gout, c.n), want, &where), where);

  std::vector<float> sum = values(c.n, true);
  put(gout, sum);
  for (int r = 0; r < ranks; ++r) {
    if (r > 0) block = cpu_block(packed_values(c.n, c.bucket), c.bucket, bits);
    put(gblock, block);
    CK(cu::quant_packed_accumulate(gblock, c.n, c.bucket, bits, gout, nullptr));
    k::quant_packed_accumulate(block.data(), c.n, c.bucket, bits, sum.data(), k::Isa::scalar);
  }
  report(packed_name("quant_packed_accumulate", bits, c) + " " + std::to_string(ranks) + " ranks",
         same_bits(get<float>(gout, c.n), sum, &where), where);
}

// Arguments the kernels refuse, as the CPU-side callers expect them to.
void check_refusals() {
  auto d = dev(64);
  auto* f = reinterpret_cast<float*>(d.get());
  const bool ok =
      cu::quant_packed_compress(f, nullptr, 4, 0, 4, d.get(), nullptr) == cudaErrorInvalidValue &&
      cu::quant_packed_compress(f, nullptr, 4, 4, 3, d.get(), nullptr) == cudaErrorInvalidValue &&
      cu::quant_packed_decompress(d.get(), 4, 4, 2, f, 0, nullptr) == cudaErrorInvalidValue &&
      cu::quant_packed_accumulate(d.get(), 4, 4, 8, f, nullptr) == cudaErrorInvalidValue &&
      cu::quant_packed_compress(f, nullptr, 0, 4, 4, d.get(), nullptr) == cudaSuccess;
  report("quant_packed refusals (bucket 0, 3 or 8 bits, divisor 0; n = 0 enqueues nothing)", ok);
}

}  // namespace

void check_quant_packed() {
  const PackedCase cases[] = {
      {"", 3'000'017, 512, false, 0},
      {"", 3'000'017, 512, true, 0},
      {"misaligned", 1'000'003, 512, true, 1},
      {"", 1'000'003, 4096, true, 3},
      {"block per bucket", 1'000'003, 4097, true, 2},
      {"few buckets", 2'000'001, 1 << 20, true, 0},
      {"odd bucket", 100'003, 7, true, 1},
      {"", 10'007, 1, false, 2},
      {"", 10'007, 3, true, 0},
      {"one value", 1, 512, true, 0},
      {"", 511, 512, false, 0},
  };
  for (const int bits : {4, 2}) {
    for (const PackedCase& c : cases) check_compress(c, bits);
    for (const int i : {1, 2, 6}) check_compress(cases[i], bits, stochastic_key());
    check_decode(cases[0], bits, 1, 4);
    check_decode(cases[2], bits, 3, 2);
    check_decode(cases[4], bits, 1, 3);
    check_decode(cases[6], bits, 3, 3);
  }
  check_refusals();
}

}  // namespace slimreduce::device_check
