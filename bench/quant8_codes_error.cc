// The error of the quantizer's two codes (SLIMREDUCE_QUANT_CODES=absmax|minmax)
// at 8, 4 and 2 bits (int8: kernels/quant8.h, quant8_minmax.h; int4, int2:
// kernels/quant_packed.h, quant_packed_minmax.h), and block-scaled fp8
// (kernels/quant_fp8.h, its bits 0 here) against
// an fp32 sum, as the sharded algorithm makes it without error feedback: each
// of R simulated ranks quantizes its tensor, the decoded values are summed in
// rank order, and the sum is quantized again (the owners' step) and decoded.
// Prints, per input and per codes, the largest and mean |error| against the
// plain fp32 sum in rank order, the mean |error| over the mean |sum|, and the
// bytes per value on the wire.
//   quant8_codes_error [n] [bucket] [ranks] [file of raw fp32 gradients]
// Inputs: (a) arange(n) * (rank + 1), (b) zero-centred normal gradients (a
// scale per 512 values varying over 2^-8..2^8), (c) with a file, its floats
// as rank 0's tensor and rank r's as the same scaled by 1 + r / 8.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"
#include "kernels/quant_fp8.h"
#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax.h"

namespace {

namespace k = slimreduce::kernels;
using Tensors = std::vector<std::vector<float>>;

// The codes measured: absmax and minmax at each width, and fp8 (bits 0).
struct Codes {
  const char* name;
  bool minmax;
  int bits;
};
constexpr Codes kCodes[] = {{"absmax8", false, 8}, {"minmax8", true, 8},  {"absmax4", false, 4},
                            {"minmax4", true, 4},  {"absmax2", false, 2}, {"minmax2", true, 2},
                            {"fp8", false, 0}};

std::size_t block_bytes(std::size_t n, std::size_t bucket, const Codes& codes) {
  if (codes.bits == 0) return k::quant_fp8_bytes(n, bucket);
  if (codes.bits != 8)
    return codes.minmax ? k::quant_packed_minmax_bytes(n, bucket, codes.bits)
                        : k::quant_packed_bytes(n, bucket, codes.bits);
  return codes.minmax ? k::quant8_minmax_bytes(n, bucket) : k::quant8_bytes(n, bucket);
}

std::vector<float> roundtrip(const std::vector<float>& x, std::size_t bucket, const Codes& codes) {
  const std::size_t n = x.size();
  std::vector<std::uint8_t> block(block_bytes(n, bucket, codes));
  std::vector<float> out(n);
  if (codes.bits == 0) {
    k::quant_fp8_compress(x.data(), nullptr, n, bucket, block.data());
    k::quant_fp8_decompress(block.data(), n, bucket, out.data());
  } else if (codes.bits != 8 && codes.minmax) {
    k::quant_packed_minmax_compress(x.data(), nullptr, n, bucket, codes.bits, block.data());
    k::quant_packed_minmax_decompress(block.data(), n, bucket, codes.bits, out.data());
  } else if (codes.bits != 8) {
    k::quant_packed_compress(x.data(), nullptr, n, bucket, codes.bits, block.data());
    k::quant_packed_decompress(block.data(), n, bucket, codes.bits, out.data());
  } else if (codes.minmax) {
    k::quant8_minmax_compress(x.data(), nullptr, n, bucket, block.data());
    k::quant8_minmax_decompress(block.data(), n, bucket, out.data());
  } else {
    k::quant8_compress(x.data(), nullptr, n, bucket, block.data());
    k::quant8_decompress(block.data(), n, bucket, out.data());
  }
  return out;
}

void report(const char* input, const Tensors& ranks, std::size_t bucket) {
  const std::size_t n = ranks[0].size();
  std::vector<float> exact(n, 0.0f);
  for (const auto& t : ranks)
    for (std::size_t i = 0; i < n; ++i) exact[i] += t[i];
  double magnitude = 0;
  for (float v : exact) magnitude += std::fabs(double{v});
  for (const Codes& codes : kCodes) {
    std::vector<float> sum(n, 0.0f);
    for (const auto& t : ranks) {
      const std::vector<float> sent = roundtrip(t, bucket, codes);
      for (std::size_t i = 0; i < n; ++i) sum[i] += sent[i];
    }
    const std::vector<float> result = roundtrip(sum, bucket, codes);
    double largest = 0, total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double e = std::fabs(double{result[i]} - exact[i]);
      largest = std::max(largest, e), total += e;
    }
    const double bytes = static_cast<double>(block_bytes(n, bucket, codes)) / n;
    std::printf(
        "%-28s %-7s max_abs_err %-12.5g mean_abs_err %-12.5g rel_mean_err %-10.4g "
        "bytes_per_value %.5f\n",
        input, codes.name, largest, total / n, magnitude > 0 ? total / magnitude : 0.0, bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1 << 20;
  const std::size_t bucket = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 512;
  const int ranks = argc > 3 ? std::atoi(argv[3]) : 4;
  Tensors offsets(ranks, std::vector<float>(n)), gradients = offsets;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int r = 0; r < ranks; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      offsets[r][i] = static_cast<float>(i) * static_cast<float>(r + 1);
      const int scale = static_cast<int>((i / 512 * 2654435761u) % 17) - 8;
      gradients[r][i] = std::ldexp(normal(rng), scale) * 1e-3f;
    }
  }
  report("(a) arange*(rank+1)", offsets, bucket);
  report("(b) normal gradients", gradients, bucket);
  if (argc > 4) {
    std::ifstream file(argv[4], std::ios::binary);
    std::vector<float> data;
    for (float x; file.read(reinterpret_cast<char*>(&x), sizeof x);) data.push_back(x);
    Tensors real(ranks, data);
    for (int r = 1; r < ranks; ++r)
      for (float& x : real[r]) x *= 1.0f + r / 8.0f;
    report("(c) file gradients", real, bucket);
  }
  return 0;
}
