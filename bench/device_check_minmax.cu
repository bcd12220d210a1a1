// int8's min-max codes on the GPU (kernels/cuda/quant8_minmax.cu) against
// their CPU twins (kernels/quant8_minmax.h), bit for bit: compress with and
// without error feedback (the codes, the offsets and steps, the residual),
// decompress with a divisor, and several ranks' blocks accumulated in order.
// Blocks to decode are ones the CPU twin wrote (a min-max block's offset is a
// whole number of its power-of-two steps: random bytes are not one).
#include "bench/device_check_util.cuh"
#include "kernels/quant8_minmax.h"

namespace slimreduce::device_check {
namespace {

struct MinmaxCase {
  const char* name;
  std::size_t n, bucket;
  bool ef;
  std::size_t offset;  // the block this many bytes past a 16-byte boundary
};

std::string minmax_name(const char* what, const MinmaxCase& c) {
  return std::string(what) + (*c.name ? " " : "") + c.name + " n=" + std::to_string(c.n) +
         " bucket=" + std::to_string(c.bucket) + (c.ef ? " +EF" : "") +
         (c.offset ? " block+" + std::to_string(c.offset) : "");
}

// Values of a bucket far from zero, as min-max codes are for, with the usual specials.
std::vector<float> offset_values(std::size_t n) {
  std::vector<float> v = values(n, true);
  for (std::size_t i = 0; i < n; i += 3) v[i] += 1000.0f;
  return v;
}

std::vector<std::uint8_t> cpu_block(const std::vector<float>& in, std::size_t bucket) {
  std::vector<std::uint8_t> block(k::quant8_minmax_bytes(in.size(), bucket));
  k::quant8_minmax_compress(in.data(), nullptr, in.size(), bucket, block.data(), k::Isa::scalar);
  return block;
}

void check_compress(const MinmaxCase& c, const k::Rounding& rounding = {}) {
  const std::vector<float> in = offset_values(c.n);
  std::vector<float> res = values(c.n, false);
  const std::size_t bytes = k::quant8_minmax_bytes(c.n, c.bucket);
  auto din = dev(c.n * 4), dres = dev(c.n * 4), dout = dev(bytes + c.offset);
  put(din.get(), in);
  put(dres.get(), res);
  std::byte* gout = dout.get() + c.offset;
  poison(gout, bytes);
  float* gres = c.ef ? reinterpret_cast<float*>(dres.get()) : nullptr;
  CK(cu::quant8_minmax_compress(reinterpret_cast<float*>(din.get()), gres, c.n, c.bucket, gout,
                                nullptr, rounding));
  std::vector<std::uint8_t> want(bytes);
  k::quant8_minmax_compress(in.data(), c.ef ? res.data() : nullptr, c.n, c.bucket, want.data(),
                            k::Isa::scalar, rounding);
  std::string where;
  bool ok = same_bits(get<std::uint8_t>(gout, bytes), want, &where);
  if (ok && c.ef) ok = same_bits(get<float>(dres.get(), c.n), res, &where);
  report(minmax_name("quant8_minmax_compress", c) + rounding_suffix(rounding), ok, where);
}

void check_decode(const MinmaxCase& c, int divisor, int ranks) {
  std::vector<std::uint8_t> block = cpu_block(offset_values(c.n), c.bucket);
  auto dblock = dev(block.size() + c.offset), dout = dev(c.n * 4);
  std::byte* gblock = dblock.get() + c.offset;
  auto* gout = reinterpret_cast<float*>(dout.get());
  put(gblock, block);
  poison(gout, c.n * 4);
  CK(cu::quant8_minmax_decompress(gblock, c.n, c.bucket, gout, divisor, nullptr));
  std::vector<float> want(c.n);
  k::quant8_minmax_decompress(block.data(), c.n, c.bucket, want.data(), k::Isa::scalar);
  for (auto& x : want) x = k::divide_keeping_nan(x, divisor);
  std::string where;
  report(minmax_name("quant8_minmax_decompress", c) + " /" + std::to_string(divisor),
         same_bits(get<float>(gout, c.n), want, &where), where);

  std::vector<float> sum = values(c.n, true);
  put(gout, sum);
  for (int r = 0; r < ranks; ++r) {
    if (r > 0) block = cpu_block(offset_values(c.n), c.bucket);
    put(gblock, block);
    CK(cu::quant8_minmax_accumulate(gblock, c.n, c.bucket, gout, nullptr));
    k::quant8_minmax_accumulate(block.data(), c.n, c.bucket, sum.data(), k::Isa::scalar);
  }
  report(minmax_name("quant8_minmax_accumulate", c) + " " + std::to_string(ranks) + " ranks",
         same_bits(get<float>(gout, c.n), sum, &where), where);
}

}  // namespace

void check_quant8_minmax() {
  const MinmaxCase cases[] = {
      {"", 3'000'017, 512, false, 0},
      {"", 3'000'017, 512, true, 0},
      {"misaligned", 1'000'003, 512, true, 1},
      {"block per bucket", 1'000'003, 4097, true, 2},
      {"", 100'003, 7, true, 3},
      {"one value", 1, 512, true, 0},
      {"", 511, 512, false, 0},
  };
  for (const MinmaxCase& c : cases) check_compress(c);
  for (const int i : {1, 2, 4}) check_compress(cases[i], stochastic_key());
  check_decode(cases[0], 1, 4);
  check_decode(cases[2], 3, 2);
  check_decode(cases[4], 1, 3);
}

}  // namespace slimreduce::device_check
