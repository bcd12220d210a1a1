// The packed 4- and 2-bit min-max kernels' host entry points
// (kernels/cuda/kernels.h) on the simulated runtime, as kernels_sim.cc carries
// out the others: run as kernels/cuda/quant_packed_minmax.cu runs them (one
// bucket after another, a whole byte of codes at a time, from
// quant_packed_minmax_rules.h) rather than through the CPU twin, so that
// hostsim_device_check holds that kernel's layout and order to the CPU's bits.
#include <algorithm>
#include <cstring>

#include "kernels/cuda/kernels.h"
#include "kernels/element_rules.h"
#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax.h"
#include "kernels/quant_packed_minmax_rules.h"
#include "tests/hostsim/sim.h"

namespace slimreduce::kernels::cuda {
namespace {

namespace sim = hostsim;

void packed_minmax_compress_sim(const float* in, float* res, std::size_t n, std::size_t bucket,
                                int bits, unsigned char* out, const Rounding& rounding) {
  const std::size_t buckets = quant_packed_buckets(n, bucket), stride = (bucket * bits + 7) / 8;
  const int per_byte = 8 / bits;
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, last = std::min(n, first + bucket);
    auto acc_at = [&](std::size_t i) { return res ? add_nan_first(in[i], res[i]) : in[i]; };
    std::int32_t lo = kMinmaxNoLo, hi = kMinmaxNoHi;
    bool marked = false;
    for (std::size_t i = first; i < last; ++i) {
      lo = std::min(lo, minmax_lo_key(acc_at(i)));
      hi = std::max(hi, minmax_hi_key(acc_at(i)));
      marked |= quant_packed_marks(acc_at(i));
    }
    const PackedMinmax p = packed_minmax_params(lo, hi, marked, bits);
    float pair[2];
    packed_minmax_store(p, &pair[0], &pair[1]);
    std::memcpy(out + 8 * j, pair, 8);
    unsigned char* codes = out + 8 * buckets + j * stride;
    for (std::size_t b = 0; b < ((last - first) * bits + 7) / 8; ++b) {
      unsigned byte = 0;
      for (int k = 0; k < per_byte && first + b * per_byte + k < last; ++k) {
        const std::size_t i = first + b * per_byte + k;
        const float acc = acc_at(i);
        const int c = packed_minmax_code(acc, p, bits, rounding, i);
        byte |= static_cast<unsigned>(c) << (k * bits);
        if (res) res[i] = residual_after(acc, packed_minmax_decode(c, p, bits));
      }
      codes[b] = static_cast<unsigned char>(byte);
    }
  }
}

template <class Fn>
void packed_minmax_decode_sim(const unsigned char* block, std::size_t n, std::size_t bucket,
                              int bits, Fn fn) {
  const std::size_t buckets = quant_packed_buckets(n, bucket), stride = (bucket * bits + 7) / 8;
  for (std::size_t j = 0; j < buckets; ++j) {
    float pair[2];
    std::memcpy(pair, block + 8 * j, 8);
    const PackedMinmax p = packed_minmax_load(pair[0], pair[1], bits);
    const unsigned char* codes = block + 8 * buckets + j * stride;
    const std::size_t first = j * bucket, last = std::min(n, first + bucket);
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t bit = (i - first) * bits;
      fn(i, packed_minmax_decode((codes[bit / 8] >> (bit % 8)) & ((1 << bits) - 1), p, bits));
    }
  }
}

}  // namespace

cudaError_t quant_packed_minmax_compress(const float* in, float* residual, std::size_t n,
                                         std::size_t bucket, int bits, void* out,
                                         cudaStream_t stream, const Rounding& rounding) {
  if (bucket == 0 || !(bits == 4 || bits == 2)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("quant_packed_minmax_compress in", in, n * 4);
    if (residual)
      residual = sim::on_device("quant_packed_minmax_compress residual", residual, n * 4);
    out = sim::on_device("quant_packed_minmax_compress out", out,
                         quant_packed_minmax_bytes(n, bucket, bits));
    packed_minmax_compress_sim(in, residual, n, bucket, bits, static_cast<unsigned char*>(out),
                               rounding);
  });
  return cudaSuccess;
}

cudaError_t quant_packed_minmax_decompress(const void* block, std::size_t n, std::size_t bucket,
                                           int bits, float* out, int divisor, cudaStream_t stream) {
  if (bucket == 0 || !(bits == 4 || bits == 2) || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block = sim::on_device("quant_packed_minmax_decompress block", block,
                           quant_packed_minmax_bytes(n, bucket, bits));
    out = sim::on_device("quant_packed_minmax_decompress out", out, n * 4);
    packed_minmax_decode_sim(
        static_cast<const unsigned char*>(block), n, bucket, bits,
        [&](std::size_t i, float v) { out[i] = divide_keeping_nan(v, divisor); });
  });
  return cudaSuccess;
}

cudaError_t quant_packed_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket,
                                           int bits, float* dense, cudaStream_t stream) {
  if (bucket == 0 || !(bits == 4 || bits == 2)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block = sim::on_device("quant_packed_minmax_accumulate block", block,
                           quant_packed_minmax_bytes(n, bucket, bits));
    dense = sim::on_device("quant_packed_minmax_accumulate dense", dense, n * 4);
    packed_minmax_decode_sim(
        static_cast<const unsigned char*>(block), n, bucket, bits,
        [&](std::size_t i, float v) { dense[i] = add_nan_first(dense[i], v); });
  });
  return cudaSuccess;
}

}  // namespace slimreduce::kernels::cuda
