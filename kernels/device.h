// The GPU kernels (kernels/cuda/kernels.h) as the compressors' device entry
// points call them, declared in every build: streams as void* (a
// cudaStream_t), results as int (a cudaError_t; 0 when all was enqueued). A
// CUDA build implements them over the kernels (kernels/cuda/device.cc); a
// CPU-only build links kernels/no_device.cc, whose entry points enqueue
// nothing and answer kNoDevice (never reached there: no pointer is a device
// pointer and there is no NCCL). So each compressor keeps its host and device
// entry points in one file, with no CUDA header and no build switch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cast.h"
#include "kernels/low_rank.h"
#include "kernels/norm.h"
#include "kernels/pack.h"
#include "kernels/rounding.h"

namespace slimreduce::kernels::device {

// Bytes rounded up to 256: where the regions of one device block start (as
// cudaMalloc aligns its blocks), and how kernels' scratch is carved.
constexpr std::size_t round256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// What a CPU-only build answers (cudaErrorNoDevice's value).
inline constexpr int kNoDevice = 100;

// The element type of a tensor a kernel reads or writes.
enum class Elem { fp32, fp16, bf16 };

// Twins of kernels::compress and of decompress with a divisor (kernels/cast.h).
int cast_compress(HalfFormat format, const float* in, float* residual, std::uint16_t* out,
                  std::size_t n, void* stream);
int cast_decompress(HalfFormat format, const std::uint16_t* in, float* out, std::size_t n,
                    int divisor, void* stream);
// Twins of kernels::pack_batch / unpack_batch (kernels/pack.h) on a 16-bit buffer.
int pack_batch(HalfFormat format, const PackItem* items, int count, void* fused, void* stream);
int unpack_batch(HalfFormat format, const void* fused, const UnpackItem* items, int count,
                 int divisor, void* stream);

// 8-bit quantization, twins of kernels::quant8_compress, of quant8_decompress
// with a divisor (divide_keeping_nan; 1 divides nothing) and of
// quant8_accumulate (kernels/quant8.h): blocks at any address, the same bits.
int quant8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket, void* out,
                    void* stream, const Rounding& rounding = {});
int quant8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out, int divisor,
                      void* stream);
int quant8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                      void* stream);

// The twin of kernels::fixed_order_norm (kernels/norm.h), the same bits, into
// *norm (device memory), with `scratch` (device memory) of
// fixed_order_norm_scratch_bytes(n): per block of values, its lanes' sums and its sum.
constexpr std::size_t fixed_order_norm_scratch_bytes(std::size_t n) {
  const std::size_t blocks = (n + kNormBlock - 1) / kNormBlock;
  return round256(blocks * kNormLanes * sizeof(double)) + round256(blocks * sizeof(double));
}
int fixed_order_norm(const float* v, std::size_t n, double* norm, void* scratch, void* stream);
// The same of 16-bit floats (NCCL's fp16 and bf16 calls), the same scratch.
int fixed_order_norm(HalfFormat format, const std::uint16_t* v, std::size_t n, double* norm,
                     void* scratch, void* stream);

// 8-bit min-max codes, twins of kernels::quant8_minmax_compress, of
// quant8_minmax_decompress with a divisor and of quant8_minmax_accumulate
// (kernels/quant8_minmax.h): as the three above.
int quant8_minmax_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                           void* out, void* stream, const Rounding& rounding = {});
int quant8_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                             int divisor, void* stream);
int quant8_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                             void* stream);

// 4- and 2-bit packed codes (bits 4 or 2), twins of
// kernels::quant_packed_compress, of quant_packed_decompress with a divisor
// and of quant_packed_accumulate (kernels/quant_packed.h): as the three above.
int quant_packed_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                          int bits, void* out, void* stream, const Rounding& rounding = {});
int quant_packed_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                            float* out, int divisor, void* stream);
int quant_packed_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                            float* dense, void* stream);

// 4- and 2-bit min-max codes, twins of kernels::quant_packed_minmax_compress,
// of quant_packed_minmax_decompress with a divisor and of
// quant_packed_minmax_accumulate (kernels/quant_packed_minmax.h): as the three above.
int quant_packed_minmax_compress(const float* in, float* residual, std::size_t n,
                                 std::size_t bucket, int bits, void* out, void* stream,
                                 const Rounding& rounding = {});
int quant_packed_minmax_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                                   float* out, int divisor, void* stream);
int quant_packed_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                                   float* dense, void* stream);

// Block-scaled fp8, twins of kernels::quant_fp8_compress, of
// quant_fp8_decompress with a divisor and of quant_fp8_accumulate
// (kernels/quant_fp8.h): as the three above.
int quant_fp8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                       void* out, void* stream);
int quant_fp8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                         int divisor, void* stream);
int quant_fp8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                         void* stream);

// Exact top-k, twin of kernels::topk_compress / topk_accumulate (kernels/cuda/kernels.h
// says more: payloads padded to kernels::topk_payload_stride, fp16 or bf16 inputs).
std::size_t topk_select_scratch_bytes(std::size_t n);
int topk_select(Elem in_type, const void* in, float* residual, std::size_t n, std::size_t k,
                bool fp16_values, void* payload, std::size_t payload_stride, void* scratch,
                void* stream);
std::size_t topk_accumulate_scratch_bytes(std::size_t n, int ranks);
int topk_accumulate(const void* gathered, std::size_t payload_stride, int ranks, std::size_t k,
                    bool fp16_values, std::size_t n, Elem out_type, void* out, int divisor,
                    void* scratch, void* stream);

// Top-k's sharded steps (kernels/cuda/kernels.h says what each does).
std::size_t topk_split_scratch_bytes(int ranks);
int topk_split_parts(const void* payload, std::size_t k, bool fp16_values, std::size_t n, int ranks,
                     void* out, std::uint64_t* part_bytes, void* scratch, void* stream);
int topk_add_part(const void* part, std::size_t m, bool fp16_values, std::size_t count,
                  float* dense, void* stream);
int owner_cast16(const float* sum, float* residual, std::size_t n, void* result, unsigned* wide,
                 std::uint32_t fp16_tag, std::uint32_t bf16_tag, void* stream);
int owner_decode16(const void* result, std::size_t n, float* out, int divisor,
                   std::uint32_t bf16_tag, void* stream);

// PowerSGD's steps (kernels/low_rank.h's twins: kernels/cuda/kernels.h says
// more). low_rank_available: whether cuBLAS, which the two products need, can
// be loaded (at run time, privately); why: the reason when not. Cheap after
// the first call. The products are within fp32 rounding of the CPU twins,
// not their bits; the other steps give the twins' bits.
bool low_rank_available(std::string* why);
int low_rank_add(const float* input, const float* residual, float* m, std::size_t n, void* stream);
int low_rank_project(const float* m, const LowRankShape& shape, const float* q, float* p,
                     void* stream);
int low_rank_back_project(const float* m, const LowRankShape& shape, const float* p, float* q,
                          void* stream);
int orthonormalise(float* p, std::size_t rows, std::size_t rank, void* stream);
int low_rank_finish(const float* m, const LowRankShape& shape, const float* p, const float* q_sum,
                    const float* q_local, float* out, float* residual, void* stream);
// Zeroes `bytes` of device memory (a part's padding), in stream order.
int zero_bytes(void* at, std::size_t bytes, void* stream);
// A stream-ordered path's guard: *bad = 1 when a sum is not finite, and the
// call's end from it (kernels::low_rank_settle).
int flag_not_finite(const float* v, std::size_t n, unsigned* bad, void* stream);
int low_rank_settle(const unsigned* bad, float* out, float* residual, std::size_t n, int divisor,
                    const float* q_sum, float* q_state, std::size_t q_floats, void* stream);

}  // namespace slimreduce::kernels::device
