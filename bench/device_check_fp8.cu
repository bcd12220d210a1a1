// Block-scaled fp8 on the GPU (kernels/cuda/quant_fp8.cu) against its CPU
// twin (kernels/quant_fp8.h), bit for bit: compress with and without error
// feedback (the exponent bytes, the codes, the residual), decompress with a
// divisor, and several ranks' blocks accumulated in order; values over many
// magnitudes with the usual specials, blocks at odd addresses, buckets of
// 32 (MXFP8's) to past the warp/block edge. Blocks to decode are ones the
// CPU twin wrote.
#include "bench/device_check_util.cuh"
#include "kernels/quant_fp8.h"

namespace slimreduce::device_check {
namespace {

struct Fp8Case {
  const char* name;
  std::size_t n, bucket;
  bool ef;
  std::size_t offset;  // the block this many bytes past a 16-byte boundary
};

std::string fp8_name(const char* what, const Fp8Case& c) {
  return std::string(what) + (*c.name ? " " : "") + c.name + " n=" + std::to_string(c.n) +
         " bucket=" + std::to_string(c.bucket) + (c.ef ? " +EF" : "") +
         (c.offset ? " block+" + std::to_string(c.offset) : "");
}

// The usual values, every fifth scaled by 2^(i % 40 - 20): e4m3's subnormal
// and normal ranges both met within a bucket.
std::vector<float> fp8_values(std::size_t n) {
  std::vector<float> v = values(n, true);
  for (std::size_t i = 0; i < n; i += 5) v[i] = std::ldexp(v[i], int(i % 40) - 20);
  return v;
}

std::vector<std::uint8_t> cpu_block(const std::vector<float>& in, std::size_t bucket) {
  std::vector<std::uint8_t> block(k::quant_fp8_bytes(in.size(), bucket));
  k::quant_fp8_compress(in.data(), nullptr, in.size(), bucket, block.data(), k::Isa::scalar);
  return block;
}

void check_compress(const Fp8Case& c) {
  const std::vector<float> in = fp8_values(c.n);
  std::vector<float> res = values(c.n, false);
  const std::size_t bytes = k::quant_fp8_bytes(c.n, c.bucket);
  auto din = dev(c.n * 4), dres = dev(c.n * 4), dout = dev(bytes + c.offset);
  put(din.get(), in);
  put(dres.get(), res);
  std::byte* gout = dout.get() + c.offset;
  poison(gout, bytes);
  float* gres = c.ef ? reinterpret_cast<float*>(dres.get()) : nullptr;
  CK(cu::quant_fp8_compress(reinterpret_cast<float*>(din.get()), gres, c.n, c.bucket, gout,
                            nullptr));
  std::vector<std::uint8_t> want(bytes);
  k::quant_fp8_compress(in.data(), c.ef ? res.data() : nullptr, c.n, c.bucket, want.data(),
                        k::Isa::scalar);
  std::string where;
  bool ok = same_bits(get<std::uint8_t>(gout, bytes), want, &where);
  if (ok && c.ef) ok = same_bits(get<float>(dres.get(), c.n), res, &where);
  report(fp8_name("quant_fp8_compress", c), ok, where);
}

void check_decode(const Fp8Case& c, int divisor, int ranks) {
  std::vector<std::uint8_t> block = cpu_block(fp8_values(c.n), c.bucket);
  auto dblock = dev(block.size() + c.offset), dout = dev(c.n * 4);
  std::byte* gblock = dblock.get() + c.offset;
  auto* gout = reinterpret_cast<float*>(dout.get());
  put(gblock, block);
  poison(gout, c.n * 4);
  CK(cu::quant_fp8_decompress(gblock, c.n, c.bucket, gout, divisor, nullptr));
  std::vector<float> want(c.n);
  k::quant_fp8_decompress(block.data(), c.n, c.bucket, want.data(), k::Isa::scalar);
  for (auto& x : want) x = k::divide_keeping_nan(x, divisor);
  std::string where;
  report(fp8_name("quant_fp8_decompress", c) + " /" + std::to_string(divisor),
         same_bits(get<float>(gout, c.n), want, &where), where);

  std::vector<float> sum = values(c.n, true);
  put(gout, sum);
  for (int r = 0; r < ranks; ++r) {
    if (r > 0) block = cpu_block(fp8_values(c.n), c.bucket);
    put(gblock, block);
    CK(cu::quant_fp8_accumulate(gblock, c.n, c.bucket, gout, nullptr));
    k::quant_fp8_accumulate(block.data(), c.n, c.bucket, sum.data(), k::Isa::scalar);
  }
  report(fp8_name("quant_fp8_accumulate", c) + " " + std::to_string(ranks) + " ranks",
         same_bits(get<float>(gout, c.n), sum, &where), where);
}

}  // namespace

void check_quant_fp8() {
  const Fp8Case cases[] = {
      {"", 3'000'017, 32, false, 0},
      {"", 3'000'017, 32, true, 0},
      {"misaligned", 1'000'003, 512, true, 1},
      {"block per bucket", 1'000'003, 4097, true, 2},
      {"", 100'003, 7, true, 3},
      {"one value", 1, 32, true, 0},
      {"", 511, 512, false, 0},
  };
  for (const Fp8Case& c : cases) check_compress(c);
  check_decode(cases[0], 1, 4);
  check_decode(cases[2], 3, 2);
  check_decode(cases[4], 1, 3);
}

}  // namespace slimreduce::device_check
