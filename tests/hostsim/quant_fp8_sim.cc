// The host simulation's block-scaled fp8 kernels (kernels/cuda/quant_fp8.cu's
// entry points): each enqueued on its stream and carried out by the CPU
// twin's scalar path (kernels/quant_fp8.h), whose rules the CUDA kernels
// share value by value, after the simulation checks that every buffer is
// device memory.
#include <cstddef>

#include "kernels/cuda/kernels.h"
#include "kernels/element_rules.h"
#include "kernels/quant_fp8.h"
#include "tests/hostsim/sim.h"

namespace slimreduce::kernels::cuda {

namespace sim = hostsim;

cudaError_t quant_fp8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                               void* out, cudaStream_t stream) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("quant_fp8_compress in", in, n * 4);
    if (residual) residual = sim::on_device("quant_fp8_compress residual", residual, n * 4);
    out = sim::on_device("quant_fp8_compress out", out, kernels::quant_fp8_bytes(n, bucket));
    kernels::quant_fp8_compress(in, residual, n, bucket, out, Isa::scalar);
  });
  return cudaSuccess;
}

cudaError_t quant_fp8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                                 int divisor, cudaStream_t stream) {
  if (bucket == 0 || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block =
        sim::on_device("quant_fp8_decompress block", block, kernels::quant_fp8_bytes(n, bucket));
    out = sim::on_device("quant_fp8_decompress out", out, n * 4);
    kernels::quant_fp8_decompress(block, n, bucket, out, Isa::scalar);
    for (std::size_t i = 0; divisor > 1 && i < n; ++i) out[i] = divide_keeping_nan(out[i], divisor);
  });
  return cudaSuccess;
}

cudaError_t quant_fp8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                                 cudaStream_t stream) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block =
        sim::on_device("quant_fp8_accumulate block", block, kernels::quant_fp8_bytes(n, bucket));
    dense = sim::on_device("quant_fp8_accumulate dense", dense, n * 4);
    kernels::quant_fp8_accumulate(block, n, bucket, dense, Isa::scalar);
  });
  return cudaSuccess;
}

}  // namespace slimreduce::kernels::cuda
