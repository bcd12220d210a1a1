// The fixed-order norm on the GPU (kernels/cuda/norm.cu) against its CPU
// twin (kernels/norm.h), bit for bit: adaptive levels decide from it, and a
// rank whose buffers are on the GPU must decide as one whose are on the host.
// Values over many magnitudes (so that a different order of the additions
// shows in the last bits), at block edges, at an odd address, and with a
// NaN and an infinity (not finite either way).
#include <cmath>

#include "bench/device_check_util.cuh"
#include "kernels/device.h"
#include "kernels/element_rules.h"
#include "kernels/norm.h"

namespace slimreduce::device_check {
namespace {

void check_norm(std::size_t n, std::size_t offset, bool specials) {
  const std::vector<float> in = values(n, specials);
  const std::size_t scratch_bytes = kernels::device::fixed_order_norm_scratch_bytes(n);
  auto din = dev(n * 4 + offset * 4), dscratch = dev(scratch_bytes), dnorm = dev(sizeof(double));
  auto* gin = reinterpret_cast<float*>(din.get()) + offset;
  put(gin, in);
  poison(dscratch.get(), scratch_bytes);
  poison(dnorm.get(), sizeof(double));
  CK(cu::fixed_order_norm(gin, n, reinterpret_cast<double*>(dnorm.get()), dscratch.get(), nullptr));
  const double want = k::fixed_order_norm(in.data(), n);
  const double got = get<double>(dnorm.get(), 1)[0];
  const bool ok =
      std::memcmp(&got, &want, sizeof(double)) == 0 || (std::isnan(got) && std::isnan(want));
  char detail[96];
  std::snprintf(detail, sizeof detail, "GPU %.17g, CPU %.17g", got, want);
  report("fixed_order_norm n=" + std::to_string(n) + (offset ? " +" + std::to_string(offset) : "") +
             (specials ? " specials" : ""),
         ok, detail);
}

// The 16-bit twin: fp16 and bf16 values (finite ones, over their range), widened.
void check_norm16(kernels::HalfFormat format, std::size_t n) {
  const std::vector<float> wide = values(n, false);
  std::vector<std::uint16_t> in(n);
  for (std::size_t i = 0; i < n; ++i)
    in[i] = format == kernels::HalfFormat::fp16 ? k::float_to_fp16_bits(wide[i] * 1e-3f)
                                                : k::float_to_bf16_bits(wide[i]);
  const std::size_t scratch_bytes = kernels::device::fixed_order_norm_scratch_bytes(n);
  auto din = dev(n * 2 + 2), dscratch = dev(scratch_bytes), dnorm = dev(sizeof(double));
  put(din.get(), in);
  poison(dscratch.get(), scratch_bytes);
  CK(cu::fixed_order_norm(format, reinterpret_cast<const std::uint16_t*>(din.get()), n,
                          reinterpret_cast<double*>(dnorm.get()), dscratch.get(), nullptr));
  const double want = k::fixed_order_norm(format, in.data(), n);
  const double got = get<double>(dnorm.get(), 1)[0];
  const bool ok =
      std::memcmp(&got, &want, sizeof(double)) == 0 || (std::isnan(got) && std::isnan(want));
  char detail[96];
  std::snprintf(detail, sizeof detail, "GPU %.17g, CPU %.17g", got, want);
  report(std::string("fixed_order_norm ") +
             (format == kernels::HalfFormat::fp16 ? "fp16" : "bf16") + " n=" + std::to_string(n),
         ok, detail);
}

}  // namespace

void check_fixed_order_norm() {
  for (const std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4095}, std::size_t{4096},
        std::size_t{4097}, std::size_t{1'000'003}, std::size_t{16'777'216}})
    check_norm(n, 0, false);
  check_norm(1'000'003, 1, false);
  check_norm(100'003, 0, true);
  for (const std::size_t n : {std::size_t{4097}, std::size_t{1'000'003}}) {
    check_norm16(kernels::HalfFormat::fp16, n);
    check_norm16(kernels::HalfFormat::bf16, n);
  }
}

}  // namespace slimreduce::device_check
