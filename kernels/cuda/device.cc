// The compressors' device entry points (kernels/device.h) over the CUDA
// kernels (kernels/cuda/kernels.h): the types translated, nothing else.
#include "kernels/device.h"

#include "kernels/cuda/kernels.h"

namespace slimreduce::kernels::device {
namespace {

cuda::Elem elem(Elem e) {
  switch (e) {
    case Elem::fp16:
      return cuda::Elem::fp16;
    case Elem::bf16:
      return cuda::Elem::bf16;
    case Elem::fp32:
      break;
  }
  return cuda::Elem::fp32;
}
cuda::Elem half(HalfFormat format) {
  return format == HalfFormat::bf16 ? cuda::Elem::bf16 : cuda::Elem::fp16;
}
cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

int cast_compress(HalfFormat format, const float* in, float* residual, std::uint16_t* out,
                  std::size_t n, void* stream) {
  return cuda::cast_compress(half(format), in, residual, out, n, as_stream(stream));
}
int cast_decompress(HalfFormat format, const std::uint16_t* in, float* out, std::size_t n,
                    int divisor, void* stream) {
  return cuda::cast_decompress(half(format), in, out, n, divisor, as_stream(stream));
}
int pack_batch(HalfFormat format, const PackItem* items, int count, void* fused, void* stream) {
  return cuda::pack_batch(half(format), items, count, fused, as_stream(stream));
}
int unpack_batch(HalfFormat format, const void* fused, const UnpackItem* items, int count,
                 int divisor, void* stream) {
  return cuda::unpack_batch(half(format), fused, items, count, divisor, as_stream(stream));
}
int quant8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket, void* out,
                    void* stream, const Rounding& rounding) {
  return cuda::quant8_compress(in, residual, n, bucket, out, as_stream(stream), rounding);
}
int quant8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out, int divisor,
                      void* stream) {
  return cuda::quant8_decompress(block, n, bucket, out, divisor, as_stream(stream));
}
int quant8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                      void* stream) {
  return cuda::quant8_accumulate(block, n, bucket, dense, as_stream(stream));
}
int fixed_order_norm(const float* v, std::size_t n, double* norm, void* scratch, void* stream) {
  return cuda::fixed_order_norm(v, n, norm, scratch, as_stream(stream));
}
int fixed_order_norm(HalfFormat format, const std::uint16_t* v, std::size_t n, double* norm,
                     void* scratch, void* stream) {
  return cuda::fixed_order_norm(format, v, n, norm, scratch, as_stream(stream));
}
int quant8_minmax_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                           void* out, void* stream, const Rounding& rounding) {
  return cuda::quant8_minmax_compress(in, residual, n, bucket, out, as_stream(stream), rounding);
}
int quant8_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                             int divisor, void* stream) {
  return cuda::quant8_minmax_decompress(block, n, bucket, out, divisor, as_stream(stream));
}
int quant8_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                             void* stream) {
  return cuda::quant8_minmax_accumulate(block, n, bucket, dense, as_stream(stream));
}
int quant_packed_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                          int bits, void* out, void* stream, const Rounding& rounding) {
  return cuda::quant_packed_compress(in, residual, n, bucket, bits, out, as_stream(stream),
                                     rounding);
}
int quant_packed_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                            float* out, int divisor, void* stream) {
  return cuda::quant_packed_decompress(block, n, bucket, bits, out, divisor, as_stream(stream));
}
int quant_packed_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                            float* dense, void* stream) {
  return cuda::quant_packed_accumulate(block, n, bucket, bits, dense, as_stream(stream));
}
int quant_packed_minmax_compress(const float* in, float* residual, std::size_t n,
                                 std::size_t bucket, int bits, void* out, void* stream,
                                 const Rounding& rounding) {
  return cuda::quant_packed_minmax_compress(in, residual, n, bucket, bits, out, as_stream(stream),
                                            rounding);
}
int quant_packed_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                                   float* out, int divisor, void* stream) {
  return cuda::quant_packed_minmax_decompress(block, n, bucket, bits, out, divisor,
                                              as_stream(stream));
}
int quant_packed_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                                   float* dense, void* stream) {
  return cuda::quant_packed_minmax_accumulate(block, n, bucket, bits, dense, as_stream(stream));
}
int quant_fp8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                       void* out, void* stream) {
  return cuda::quant_fp8_compress(in, residual, n, bucket, out, as_stream(stream));
}
int quant_fp8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                         int divisor, void* stream) {
  return cuda::quant_fp8_decompress(block, n, bucket, out, divisor, as_stream(stream));
}
int quant_fp8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                         void* stream) {
  return cuda::quant_fp8_accumulate(block, n, bucket, dense, as_stream(stream));
}
std::size_t topk_select_scratch_bytes(std::size_t n) { return cuda::topk_select_scratch_bytes(n); }
int topk_select(Elem in_type, const void* in, float* residual, std::size_t n, std::size_t k,
                bool fp16_values, void* payload, std::size_t payload_stride, void* scratch,
                void* stream) {
  return cuda::topk_select(elem(in_type), in, residual, n, k, fp16_values, payload, payload_stride,
                           scratch, as_stream(stream));
}
std::size_t topk_accumulate_scratch_bytes(std::size_t n, int ranks) {
  return cuda::topk_accumulate_scratch_bytes(n, ranks);
}
int topk_accumulate(const void* gathered, std::size_t payload_stride, int ranks, std::size_t k,
                    bool fp16_values, std::size_t n, Elem out_type, void* out, int divisor,
                    void* scratch, void* stream) {
  return cuda::topk_accumulate(gathered, payload_stride, ranks, k, fp16_values, n, elem(out_type),
                               out, divisor, scratch, as_stream(stream));
}

bool low_rank_available(std::string* why) { return cuda::cublas_loadable(why); }
int low_rank_add(const float* input, const float* residual, float* m, std::size_t n, void* stream) {
  return cuda::low_rank_add(input, residual, m, n, as_stream(stream));
}
int low_rank_project(const float* m, const LowRankShape& shape, const float* q, float* p,
                     void* stream) {
  return cuda::low_rank_project(m, shape, q, p, as_stream(stream));
}
int low_rank_back_project(const float* m, const LowRankShape& shape, const float* p, float* q,
                          void* stream) {
  return cuda::low_rank_back_project(m, shape, p, q, as_stream(stream));
}
int orthonormalise(float* p, std::size_t rows, std::size_t rank, void* stream) {
  return cuda::orthonormalise(p, rows, rank, as_stream(stream));
}
int low_rank_finish(const float* m, const LowRankShape& shape, const float* p, const float* q_sum,
                    const float* q_local, float* out, float* residual, void* stream) {
  return cuda::low_rank_finish(m, shape, p, q_sum, q_local, out, residual, as_stream(stream));
}

std::size_t topk_split_scratch_bytes(int ranks) { return cuda::topk_split_scratch_bytes(ranks); }
int topk_split_parts(const void* payload, std::size_t k, bool fp16_values, std::size_t n, int ranks,
                     void* out, std::uint64_t* part_bytes, void* scratch, void* stream) {
  return cuda::topk_split_parts(payload, k, fp16_values, n, ranks, out, part_bytes, scratch,
                                as_stream(stream));
}
int topk_add_part(const void* part, std::size_t m, bool fp16_values, std::size_t count,
                  float* dense, void* stream) {
  return cuda::topk_add_part(part, m, fp16_values, count, dense, as_stream(stream));
}
int owner_cast16(const float* sum, float* residual, std::size_t n, void* result, unsigned* wide,
                 std::uint32_t fp16_tag, std::uint32_t bf16_tag, void* stream) {
  return cuda::owner_cast16(sum, residual, n, result, wide, fp16_tag, bf16_tag, as_stream(stream));
}
int owner_decode16(const void* result, std::size_t n, float* out, int divisor,
                   std::uint32_t bf16_tag, void* stream) {
  return cuda::owner_decode16(result, n, out, divisor, bf16_tag, as_stream(stream));
}

int zero_bytes(void* at, std::size_t bytes, void* stream) {
  return cudaMemsetAsync(at, 0, bytes, as_stream(stream));
}
int flag_not_finite(const float* v, std::size_t n, unsigned* bad, void* stream) {
  return cuda::flag_not_finite(v, n, bad, as_stream(stream));
}
int low_rank_settle(const unsigned* bad, float* out, float* residual, std::size_t n, int divisor,
                    const float* q_sum, float* q_state, std::size_t q_floats, void* stream) {
  return cuda::low_rank_settle(bad, out, residual, n, divisor, q_sum, q_state, q_floats,
                               as_stream(stream));
}

}  // namespace slimreduce::kernels::device
