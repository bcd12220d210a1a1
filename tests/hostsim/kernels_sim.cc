// The CUDA kernels' host entry points (kernels/cuda/kernels.h), carried out by
// their CPU twins on the simulated runtime's streams: the host simulation
// checks what the GPU path does around its kernels (plans, layouts, groups,
// residuals, capture), while bench/device_check.sh checks on a GPU that each
// kernel gives its twin's bits. Each entry point validates its arguments as
// the kernel's does, and at run time insists that every buffer it touches is
// device memory and fills its scratch with 0xff bytes first, so a plan whose
// regions overlap, or that hands a kernel host memory, fails here.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cast.h"
#include "kernels/cuda/kernels.h"
#include "kernels/device.h"
#include "kernels/element_rules.h"
#include "kernels/norm.h"
#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"
#include "kernels/quant_packed.h"
#include "kernels/quant_packed_rules.h"
#include "kernels/topk.h"
#include "tests/hostsim/sim.h"

namespace slimreduce::kernels::cuda {
namespace {

namespace sim = hostsim;

HalfFormat half_of(Elem e) { return e == Elem::bf16 ? HalfFormat::bf16 : HalfFormat::fp16; }

FusedType fused_of(Elem e) {
  return e == Elem::fp32 ? FusedType::fp32 : e == Elem::fp16 ? FusedType::fp16 : FusedType::bf16;
}

std::size_t elem_bytes(Elem e) { return e == Elem::fp32 ? 4 : 2; }

float load(Elem e, const void* base, std::size_t i) {
  if (e == Elem::fp32) return static_cast<const float*>(base)[i];
  const std::uint16_t h = static_cast<const std::uint16_t*>(base)[i];
  return e == Elem::fp16 ? fp16_bits_to_float(h) : bf16_bits_to_float(h);
}

void store(Elem e, void* base, std::size_t i, float v) {
  if (e == Elem::fp32) {
    static_cast<float*>(base)[i] = v;
    return;
  }
  static_cast<std::uint16_t*>(base)[i] =
      e == Elem::fp16 ? float_to_fp16_bits(v) : float_to_bf16_bits(v);
}

using device::round256;

std::size_t payload_bytes(std::size_t k, bool fp16_values) {
  return topk_payload_bytes(k, fp16_values ? TopkValues::fp16 : TopkValues::fp32);
}

}  // namespace

cudaError_t cast_compress(Elem format, const float* in, float* residual, std::uint16_t* out,
                          std::size_t n, cudaStream_t stream) {
  if (format == Elem::fp32) return cudaErrorInvalidValue;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("cast_compress in", in, n * 4);
    if (residual) residual = sim::on_device("cast_compress residual", residual, n * 4);
    out = sim::on_device("cast_compress out", out, n * 2);
    compress(half_of(format), in, residual, out, n, Isa::scalar);
  });
  return cudaSuccess;
}

cudaError_t cast_decompress(Elem format, const std::uint16_t* in, float* out, std::size_t n,
                            int divisor, cudaStream_t stream) {
  if (format == Elem::fp32 || divisor < 1) return cudaErrorInvalidValue;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("cast_decompress in", in, n * 2);
    out = sim::on_device("cast_decompress out", out, n * 4);
    decompress(half_of(format), in, out, n, Isa::scalar);
    for (std::size_t i = 0; divisor > 1 && i < n; ++i) out[i] = divide_keeping_nan(out[i], divisor);
  });
  return cudaSuccess;
}

cudaError_t cast_accumulate(Elem format, const std::uint16_t* in, std::uint16_t* inout,
                            std::size_t n, cudaStream_t stream) {
  if (format == Elem::fp32) return cudaErrorInvalidValue;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("cast_accumulate in", in, n * 2);
    inout = sim::on_device("cast_accumulate inout", inout, n * 2);
    accumulate(half_of(format), in, inout, n, Isa::scalar);
  });
  return cudaSuccess;
}

cudaError_t quant8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                            void* out, cudaStream_t stream, const Rounding& rounding) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("quant8_compress in", in, n * 4);
    if (residual) residual = sim::on_device("quant8_compress residual", residual, n * 4);
    out = sim::on_device("quant8_compress out", out, kernels::quant8_bytes(n, bucket));
    kernels::quant8_compress(in, residual, n, bucket, out, Isa::scalar, rounding);
  });
  return cudaSuccess;
}

cudaError_t quant8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                              int divisor, cudaStream_t stream) {
  if (bucket == 0 || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block = sim::on_device("quant8_decompress block", block, kernels::quant8_bytes(n, bucket));
    out = sim::on_device("quant8_decompress out", out, n * 4);
    kernels::quant8_decompress(block, n, bucket, out, Isa::scalar);
    for (std::size_t i = 0; divisor > 1 && i < n; ++i) out[i] = divide_keeping_nan(out[i], divisor);
  });
  return cudaSuccess;
}

cudaError_t quant8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                              cudaStream_t stream) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block = sim::on_device("quant8_accumulate block", block, kernels::quant8_bytes(n, bucket));
    dense = sim::on_device("quant8_accumulate dense", dense, n * 4);
    kernels::quant8_accumulate(block, n, bucket, dense, Isa::scalar);
  });
  return cudaSuccess;
}

// The norm kernels' three steps as kernels/cuda/norm.cu runs them (each
// (block, lane) its squares; each block its lanes; the blocks, then the
// root), on their scratch: not a call of the CPU twin, so the host twins
// that compare with kernels::fixed_order_norm check that this order is its.
// `width`: the values' bytes (4, or 2 for 16-bit floats); load(values, i): value i as fp32.
template <class Load>
cudaError_t norm_steps(const void* v, std::size_t width, Load load, std::size_t n, double* norm,
                       void* scratch, cudaStream_t stream) {
  sim::launch_kernel(stream, [=]() mutable {
    const std::size_t blocks = (n + kNormBlock - 1) / kNormBlock;
    if (n) v = sim::on_device("fixed_order_norm v", v, n * width);
    norm = sim::on_device("fixed_order_norm norm", norm, sizeof(double));
    scratch = sim::on_device("fixed_order_norm scratch", scratch,
                             device::fixed_order_norm_scratch_bytes(n));
    auto* lanes = static_cast<double*>(scratch);
    double* sums = lanes + round256(blocks * kNormLanes * sizeof(double)) / sizeof(double);
    for (std::size_t t = 0; t < blocks * kNormLanes; ++t) {
      const std::size_t begin = t / kNormLanes * kNormBlock;
      const std::size_t end = std::min(n, begin + kNormBlock);
      double sum = 0.0;
      for (std::size_t i = begin + t % kNormLanes; i < end; i += kNormLanes)
        sum += static_cast<double>(load(v, i)) * static_cast<double>(load(v, i));
      lanes[t] = sum;
    }
    for (std::size_t b = 0; b < blocks; ++b) {
      double sum = 0.0;
      for (std::size_t lane = 0; lane < kNormLanes; ++lane) sum += lanes[b * kNormLanes + lane];
      sums[b] = sum;
    }
    double total = 0.0;
    for (std::size_t b = 0; b < blocks; ++b) total += sums[b];
    *norm = std::sqrt(total);
  });
  return cudaSuccess;
}

cudaError_t fixed_order_norm(const float* v, std::size_t n, double* norm, void* scratch,
                             cudaStream_t stream) {
  return norm_steps(
      v, 4, [](const void* at, std::size_t i) { return static_cast<const float*>(at)[i]; }, n, norm,
      scratch, stream);
}

cudaError_t fixed_order_norm(HalfFormat format, const std::uint16_t* v, std::size_t n, double* norm,
                             void* scratch, cudaStream_t stream) {
  if (format == HalfFormat::fp16)
    return norm_steps(
        v, 2,
        [](const void* at, std::size_t i) {
          return fp16_bits_to_float(static_cast<const std::uint16_t*>(at)[i]);
        },
        n, norm, scratch, stream);
  return norm_steps(
      v, 2,
      [](const void* at, std::size_t i) {
        return bf16_bits_to_float(static_cast<const std::uint16_t*>(at)[i]);
      },
      n, norm, scratch, stream);
}

cudaError_t quant8_minmax_compress(const float* in, float* residual, std::size_t n,
                                   std::size_t bucket, void* out, cudaStream_t stream,
                                   const Rounding& rounding) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("quant8_minmax_compress in", in, n * 4);
    if (residual) residual = sim::on_device("quant8_minmax_compress residual", residual, n * 4);
    out =
        sim::on_device("quant8_minmax_compress out", out, kernels::quant8_minmax_bytes(n, bucket));
    kernels::quant8_minmax_compress(in, residual, n, bucket, out, Isa::scalar, rounding);
  });
  return cudaSuccess;
}

cudaError_t quant8_minmax_decompress(const void* block, std::size_t n, std::size_t bucket,
                                     float* out, int divisor, cudaStream_t stream) {
  if (bucket == 0 || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block = sim::on_device("quant8_minmax_decompress block", block,
                           kernels::quant8_minmax_bytes(n, bucket));
    out = sim::on_device("quant8_minmax_decompress out", out, n * 4);
    kernels::quant8_minmax_decompress(block, n, bucket, out, Isa::scalar);
    for (std::size_t i = 0; divisor > 1 && i < n; ++i) out[i] = divide_keeping_nan(out[i], divisor);
  });
  return cudaSuccess;
}

cudaError_t quant8_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket,
                                     float* dense, cudaStream_t stream) {
  if (bucket == 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block = sim::on_device("quant8_minmax_accumulate block", block,
                           kernels::quant8_minmax_bytes(n, bucket));
    dense = sim::on_device("quant8_minmax_accumulate dense", dense, n * 4);
    kernels::quant8_minmax_accumulate(block, n, bucket, dense, Isa::scalar);
  });
  return cudaSuccess;
}

// The packed 4- and 2-bit kernels as kernels/cuda/quant_packed.cu runs them
// (one bucket after another, its codes a whole byte at a time, from
// quant_packed_rules.h) rather than through the CPU twin, so that
// hostsim_device_check holds that kernel's layout and order to the CPU's bits.
namespace {

bool packed_width(int bits) { return bits == 4 || bits == 2; }

void packed_compress_sim(const float* in, float* res, std::size_t n, std::size_t bucket, int bits,
                         unsigned char* out, const Rounding& rounding) {
  const std::size_t buckets = quant_packed_buckets(n, bucket), stride = (bucket * bits + 7) / 8;
  const int per_byte = 8 / bits;
  for (std::size_t j = 0; j < buckets; ++j) {
    const std::size_t first = j * bucket, last = std::min(n, first + bucket);
    auto acc_at = [&](std::size_t i) { return res ? add_nan_first(in[i], res[i]) : in[i]; };
    std::uint32_t max_bits = 0;
    bool marked = false;
    for (std::size_t i = first; i < last; ++i) {
      max_bits = std::max(max_bits, quant8_finite_abs_bits(acc_at(i)));
      marked |= quant_packed_marks(acc_at(i));
    }
    const int top = quant_packed_top(bits, marked);
    const float m = quant_packed_max(max_bits, top), step = quant_packed_step(m, top);
    const float stored = quant_packed_stored(m, marked);
    std::memcpy(out + 4 * j, &stored, 4);
    unsigned char* codes = out + 4 * buckets + j * stride;
    for (std::size_t b = 0; b < ((last - first) * bits + 7) / 8; ++b) {
      unsigned byte = 0;
      for (int k = 0; k < per_byte && first + b * per_byte + k < last; ++k) {
        const std::size_t i = first + b * per_byte + k;
        const float acc = acc_at(i);
        const int q = quant_packed_code(acc, step, top, bits, rounding, i);
        byte |= quant_packed_field(q, bits) << (k * bits);
        if (res) res[i] = residual_after(acc, quant_packed_decode(q, m, step, top, marked, bits));
      }
      codes[b] = static_cast<unsigned char>(byte);
    }
  }
}

// decoded value i of a packed block, as quant_packed.cu's decode_kernel finds it.
template <class Fn>
void packed_decode_sim(const unsigned char* block, std::size_t n, std::size_t bucket, int bits,
                       Fn fn) {
  const std::size_t buckets = quant_packed_buckets(n, bucket), stride = (bucket * bits + 7) / 8;
  for (std::size_t j = 0; j < buckets; ++j) {
    float stored;
    std::memcpy(&stored, block + 4 * j, 4);
    const bool marked = quant_packed_marked(stored);
    const int top = quant_packed_top(bits, marked);
    const float m = quant_packed_unsigned(stored), step = quant_packed_step(m, top);
    const unsigned char* codes = block + 4 * buckets + j * stride;
    const std::size_t first = j * bucket, last = std::min(n, first + bucket);
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t bit = (i - first) * bits;
      const int q =
          quant_packed_from_field((codes[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u), bits);
      fn(i, quant_packed_decode(q, m, step, top, marked, bits));
    }
  }
}

}  // namespace

cudaError_t quant_packed_compress(const float* in, float* residual, std::size_t n,
                                  std::size_t bucket, int bits, void* out, cudaStream_t stream,
                                  const Rounding& rounding) {
  if (bucket == 0 || !packed_width(bits)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("quant_packed_compress in", in, n * 4);
    if (residual) residual = sim::on_device("quant_packed_compress residual", residual, n * 4);
    out = sim::on_device("quant_packed_compress out", out, quant_packed_bytes(n, bucket, bits));
    packed_compress_sim(in, residual, n, bucket, bits, static_cast<unsigned char*>(out), rounding);
  });
  return cudaSuccess;
}

cudaError_t quant_packed_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* out, int divisor, cudaStream_t stream) {
  if (bucket == 0 || !packed_width(bits) || divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block =
        sim::on_device("quant_packed_decompress block", block, quant_packed_bytes(n, bucket, bits));
    out = sim::on_device("quant_packed_decompress out", out, n * 4);
    packed_decode_sim(static_cast<const unsigned char*>(block), n, bucket, bits,
                      [&](std::size_t i, float v) { out[i] = divide_keeping_nan(v, divisor); });
  });
  return cudaSuccess;
}

cudaError_t quant_packed_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* dense, cudaStream_t stream) {
  if (bucket == 0 || !packed_width(bits)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    block =
        sim::on_device("quant_packed_accumulate block", block, quant_packed_bytes(n, bucket, bits));
    dense = sim::on_device("quant_packed_accumulate dense", dense, n * 4);
    packed_decode_sim(static_cast<const unsigned char*>(block), n, bucket, bits,
                      [&](std::size_t i, float v) { dense[i] = add_nan_first(dense[i], v); });
  });
  return cudaSuccess;
}

cudaError_t pack_batch(Elem fused_type, const PackItem* items, int count, void* fused,
                       cudaStream_t stream) {
  if (count < 0) return cudaErrorInvalidValue;
  std::vector<PackItem> copied(items, items + count);  // kernel parameters: copied at launch
  sim::launch_kernel(stream, [=]() mutable {
    for (PackItem& item : copied) {
      item.in = sim::on_device("pack_batch in", item.in, item.count * 4);
      if (item.residual)
        item.residual = sim::on_device("pack_batch residual", item.residual, item.count * 4);
      sim::require_device("pack_batch fused", fused,
                          (item.offset + item.count + item.pad) * elem_bytes(fused_type));
    }
    kernels::pack_batch(fused_of(fused_type), copied.data(), copied.size(), sim::device_view(fused),
                        Isa::scalar);
  });
  return cudaSuccess;
}

cudaError_t unpack_batch(Elem fused_type, const void* fused, const UnpackItem* items, int count,
                         int divisor, cudaStream_t stream) {
  if (count < 0 || divisor < 1) return cudaErrorInvalidValue;
  std::vector<UnpackItem> copied(items, items + count);
  sim::launch_kernel(stream, [=]() mutable {
    for (UnpackItem& item : copied) {
      item.out = sim::on_device("unpack_batch out", item.out, item.count * 4);
      sim::require_device("unpack_batch fused", fused,
                          (item.offset + item.count) * elem_bytes(fused_type));
    }
    kernels::unpack_batch(fused_of(fused_type), sim::device_view(fused), copied.data(),
                          copied.size(), divisor, Isa::scalar);
  });
  return cudaSuccess;
}

std::size_t topk_payload_stride(std::size_t payload_bytes) {
  return kernels::topk_payload_stride(payload_bytes);
}

// Sizes of our own (the GPU's differ): what matters here is that the plan
// gives each kernel the bytes it asked for, which the poisoning checks.
std::size_t topk_select_scratch_bytes(std::size_t n) { return round256(1024 + n / 64); }
std::size_t topk_accumulate_scratch_bytes(std::size_t n, int ranks) {
  return round256(static_cast<std::size_t>(ranks) * (n / 2048 + 2) * 4);
}

cudaError_t topk_select(Elem in_type, const void* in, float* residual, std::size_t n, std::size_t k,
                        bool fp16_values, void* payload, std::size_t payload_stride, void* scratch,
                        cudaStream_t stream) {
  const std::size_t bytes = payload_bytes(k, fp16_values);
  if (k == 0 || k > n || n > 0xffffffffull || payload_stride < bytes) return cudaErrorInvalidValue;
  sim::launch_kernel(stream, [=]() mutable {
    in = sim::on_device("topk_select in", in, n * elem_bytes(in_type));
    if (residual) residual = sim::on_device("topk_select residual", residual, n * 4);
    payload = sim::on_device("topk_select payload", payload, payload_stride);
    const std::size_t scratch_bytes = topk_select_scratch_bytes(n);
    scratch = sim::on_device("topk_select scratch", scratch, scratch_bytes);
    std::memset(scratch, 0xff, scratch_bytes);
    std::vector<float> widened(n);
    for (std::size_t i = 0; i < n; ++i) widened[i] = load(in_type, in, i);
    TopkScratch cpu_scratch;
    topk_compress(widened.data(), residual, n, k, fp16_values ? TopkValues::fp16 : TopkValues::fp32,
                  payload, cpu_scratch);
    std::memset(static_cast<std::byte*>(payload) + bytes, 0, payload_stride - bytes);
  });
  return cudaSuccess;
}

cudaError_t topk_accumulate(const void* gathered, std::size_t payload_stride, int ranks,
                            std::size_t k, bool fp16_values, std::size_t n, Elem out_type,
                            void* out, int divisor, void* scratch, cudaStream_t stream) {
  if (ranks < 1 || divisor < 1 || k > n || n > 0xffffffffull) return cudaErrorInvalidValue;
  if (payload_stride < payload_bytes(k, fp16_values)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    gathered = sim::on_device("topk_accumulate gathered", gathered, payload_stride * ranks);
    out = sim::on_device("topk_accumulate out", out, n * elem_bytes(out_type));
    const std::size_t scratch_bytes = topk_accumulate_scratch_bytes(n, ranks);
    scratch = sim::on_device("topk_accumulate scratch", scratch, scratch_bytes);
    std::memset(scratch, 0xff, scratch_bytes);
    // The device's own payload check and sum (a corrupt payload: every value NaN).
    std::vector<float> dense(n);
    kernels::topk_accumulate_gathered(gathered, payload_stride, ranks, k,
                                      fp16_values ? TopkValues::fp16 : TopkValues::fp32, n,
                                      dense.data());
    for (std::size_t i = 0; i < n; ++i)
      store(out_type, out, i, divide_keeping_nan(dense[i], divisor));
  });
  return cudaSuccess;
}

std::size_t topk_split_scratch_bytes(int ranks) {
  return round256((static_cast<std::size_t>(ranks) + 1) * 12);
}

cudaError_t topk_split_parts(const void* payload, std::size_t k, bool fp16_values, std::size_t n,
                             int ranks, void* out, std::uint64_t* part_bytes, void* scratch,
                             cudaStream_t stream) {
  if (ranks < 1 || k > n || n > 0xffffffffull) return cudaErrorInvalidValue;
  sim::launch_kernel(stream, [=]() mutable {
    payload = sim::on_device("topk_split_parts payload", payload, payload_bytes(k, fp16_values));
    part_bytes =
        sim::on_device("topk_split_parts part_bytes", part_bytes, ranks * sizeof(std::uint64_t));
    const std::size_t scratch_bytes = topk_split_scratch_bytes(ranks);
    scratch = sim::on_device("topk_split_parts scratch", scratch, scratch_bytes);
    std::memset(scratch, 0xff, scratch_bytes);
    const TopkValues values = fp16_values ? TopkValues::fp16 : TopkValues::fp32;
    // The parts are never longer than the payload plus 3 bytes a part.
    out = sim::on_device("topk_split_parts out", out, payload_bytes(k, fp16_values) + 3 * ranks);
    kernels::topk_split_parts(payload, k, values, n, ranks, out, part_bytes);
  });
  return cudaSuccess;
}

cudaError_t topk_add_part(const void* part, std::size_t m, bool fp16_values, std::size_t count,
                          float* dense, cudaStream_t stream) {
  if (m == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    part = sim::on_device("topk_add_part part", part, payload_bytes(m, fp16_values));
    dense = sim::on_device("topk_add_part dense", dense, count * 4);
    const auto* index = static_cast<const std::uint32_t*>(part);
    for (std::size_t e = 0; e < m; ++e) {
      if (index[e] >= count) {
        std::fprintf(stderr, "topk_add_part: index %u past a shard of %zu\n", index[e], count);
        std::abort();
      }
    }
    topk_accumulate(part, m, fp16_values ? TopkValues::fp16 : TopkValues::fp32, dense);
  });
  return cudaSuccess;
}

cudaError_t owner_cast16(const float* sum, float* residual, std::size_t n, void* result,
                         unsigned* wide, std::uint32_t fp16_tag, std::uint32_t bf16_tag,
                         cudaStream_t stream) {
  sim::launch_kernel(stream, [=]() mutable {
    if (n > 0) sum = sim::on_device("owner_cast16 sum", sum, n * 4);
    if (residual && n > 0) residual = sim::on_device("owner_cast16 residual", residual, n * 4);
    result = sim::on_device("owner_cast16 result", result, 4 + n * 2);
    wide = sim::on_device("owner_cast16 wide", wide, sizeof(unsigned));
    const bool beyond = any_beyond_fp16(sum, residual, n);
    *wide = beyond ? 1u : 0u;
    const std::uint32_t tag = beyond ? bf16_tag : fp16_tag;
    std::memcpy(result, &tag, sizeof tag);
    auto* out = reinterpret_cast<std::uint16_t*>(static_cast<std::byte*>(result) + 4);
    compress(beyond ? HalfFormat::bf16 : HalfFormat::fp16, sum, residual, out, n, Isa::scalar);
  });
  return cudaSuccess;
}

cudaError_t owner_decode16(const void* result, std::size_t n, float* out, int divisor,
                           std::uint32_t bf16_tag, cudaStream_t stream) {
  if (divisor < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  sim::launch_kernel(stream, [=]() mutable {
    result = sim::on_device("owner_decode16 result", result, 4 + n * 2);
    out = sim::on_device("owner_decode16 out", out, n * 4);
    std::uint32_t tag;
    std::memcpy(&tag, result, sizeof tag);
    const auto* in =
        reinterpret_cast<const std::uint16_t*>(static_cast<const std::byte*>(result) + 4);
    decompress(tag == bf16_tag ? HalfFormat::bf16 : HalfFormat::fp16, in, out, n, Isa::scalar);
    for (std::size_t i = 0; divisor > 1 && i < n; ++i) out[i] = divide_keeping_nan(out[i], divisor);
  });
  return cudaSuccess;
}

}  // namespace slimreduce::kernels::cuda
