// Host entry points of the CUDA kernels: the GPU twins of kernels/cast.h,
// kernels/quant8.h, kernels/topk.h and kernels/low_rank.h, with the same element rules
// (kernels/element_rules.h, kernels/quant8_rules.h) and the same bits. Every
// function only enqueues work on `stream`: none allocates, synchronizes or
// reads device memory on the host, so each is safe
// inside CUDA-graph capture. Each returns the launch error (cudaSuccess when
// everything was enqueued).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/low_rank.h"
#include "kernels/pack.h"
#include "kernels/rounding.h"

namespace slimreduce::kernels::cuda {

// The element type of a tensor a kernel reads or writes.
enum class Elem { fp32, fp16, bf16 };

// ---- casts (twins of kernels::compress / decompress / accumulate) -----------

// out[i] = round16(in[i] [+ residual[i]]) with the error-feedback update of
// kernels::compress; format is Elem::fp16 or Elem::bf16.
cudaError_t cast_compress(Elem format, const float* in, float* residual, std::uint16_t* out,
                          std::size_t n, cudaStream_t stream);
// out[i] = widen(in[i]) / divisor; divisor 1 divides nothing (exact widen).
cudaError_t cast_decompress(Elem format, const std::uint16_t* in, float* out, std::size_t n,
                            int divisor, cudaStream_t stream);
// inout[i] = round16(widen(in[i]) + widen(inout[i])): one ring step.
cudaError_t cast_accumulate(Elem format, const std::uint16_t* in, std::uint16_t* inout,
                            std::size_t n, cudaStream_t stream);

// ---- batched pack / unpack of fusion buffers (one launch per 64 tensors) -----

// The items and the alignment rule are the CPU twin's (kernels/pack.h).
using kernels::fusion_align;
using kernels::PackItem;
using kernels::UnpackItem;

// Packs (and, for a 16-bit buffer, compresses) the tensors into `fused`.
cudaError_t pack_batch(Elem fused_type, const PackItem* items, int count, void* fused,
                       cudaStream_t stream);
// Unpacks (widens) the tensors from `fused`, each value divided by `divisor`
// (>= 1, else cudaErrorInvalidValue).
cudaError_t unpack_batch(Elem fused_type, const void* fused, const UnpackItem* items, int count,
                         int divisor, cudaStream_t stream);

// ---- 8-bit quantization (twins of kernels::quant8_compress / decompress / accumulate) ----

// Blocks as kernels/quant8.h lays them out, at any address; the same bits as
// the CPU twin. bucket 0 (or a divisor below 1) is cudaErrorInvalidValue, with
// nothing launched; n == 0 launches nothing.
cudaError_t quant8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                            void* out, cudaStream_t stream, const Rounding& rounding = {});
// out[i] = decoded[i] / divisor (divide_keeping_nan; divisor 1 divides nothing).
cudaError_t quant8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                              int divisor, cudaStream_t stream);
// dense[i] = add_nan_first(dense[i], decoded[i]).
cudaError_t quant8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                              cudaStream_t stream);

// ---- the fixed-order norm (twin of kernels::fixed_order_norm) ----

// *norm (device memory) = the norm of v[0..n) in kernels/norm.h's order;
// scratch: device::fixed_order_norm_scratch_bytes(n).
cudaError_t fixed_order_norm(const float* v, std::size_t n, double* norm, void* scratch,
                             cudaStream_t stream);
// The same of 16-bit floats, widened (kernels::fixed_order_norm's 16-bit twin).
cudaError_t fixed_order_norm(HalfFormat format, const std::uint16_t* v, std::size_t n, double* norm,
                             void* scratch, cudaStream_t stream);

// ---- 8-bit min-max codes (twins of kernels::quant8_minmax_*), as the three above ----

// Blocks as kernels/quant8_minmax.h lays them out, at any address; the same
// bits as the CPU twin; the same answers for bucket 0, a divisor below 1, n == 0.
cudaError_t quant8_minmax_compress(const float* in, float* residual, std::size_t n,
                                   std::size_t bucket, void* out, cudaStream_t stream,
                                   const Rounding& rounding = {});
cudaError_t quant8_minmax_decompress(const void* block, std::size_t n, std::size_t bucket,
                                     float* out, int divisor, cudaStream_t stream);
cudaError_t quant8_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket,
                                     float* dense, cudaStream_t stream);

// ---- 4- and 2-bit packed codes (twins of kernels::quant_packed_*) ----------

// Blocks as kernels/quant_packed.h lays them out, at any address, for bits 4
// or 2; the same bits as the CPU twin. decompress divides by divisor
// (divide_keeping_nan; 1 divides nothing). cudaErrorInvalidValue for bucket
// 0, another width or a divisor below 1; nothing enqueued for n == 0.
cudaError_t quant_packed_compress(const float* in, float* residual, std::size_t n,
                                  std::size_t bucket, int bits, void* out, cudaStream_t stream,
                                  const Rounding& rounding = {});
cudaError_t quant_packed_decompress(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* out, int divisor, cudaStream_t stream);
cudaError_t quant_packed_accumulate(const void* block, std::size_t n, std::size_t bucket, int bits,
                                    float* dense, cudaStream_t stream);

// ---- 4- and 2-bit min-max codes (twins of kernels::quant_packed_minmax_*), as the three above
// ----

cudaError_t quant_packed_minmax_compress(const float* in, float* residual, std::size_t n,
                                         std::size_t bucket, int bits, void* out,
                                         cudaStream_t stream, const Rounding& rounding = {});
cudaError_t quant_packed_minmax_decompress(const void* block, std::size_t n, std::size_t bucket,
                                           int bits, float* out, int divisor, cudaStream_t stream);
cudaError_t quant_packed_minmax_accumulate(const void* block, std::size_t n, std::size_t bucket,
                                           int bits, float* dense, cudaStream_t stream);

// ---- block-scaled fp8 (twins of kernels::quant_fp8_*), as the three above ---

// Blocks as kernels/quant_fp8.h lays them out, at any address; the same bits
// as the CPU twin; the same answers for bucket 0, a divisor below 1, n == 0.
cudaError_t quant_fp8_compress(const float* in, float* residual, std::size_t n, std::size_t bucket,
                               void* out, cudaStream_t stream);
cudaError_t quant_fp8_decompress(const void* block, std::size_t n, std::size_t bucket, float* out,
                                 int divisor, cudaStream_t stream);
cudaError_t quant_fp8_accumulate(const void* block, std::size_t n, std::size_t bucket, float* dense,
                                 cudaStream_t stream);

// ---- exact top-k by magnitude (twin of kernels::topk_compress) ---------------

// Payloads travel at this stride: kernels::topk_payload_stride (the top-k
// layout padded with zero bytes to 16, so gathered indices stay aligned).
std::size_t topk_payload_stride(std::size_t payload_bytes);

// Device scratch that topk_select needs for n elements (256-byte aligned).
std::size_t topk_select_scratch_bytes(std::size_t n);

// acc[i] = widen(in[i]) (+ residual[i] with add_nan_first when residual is
// given); selects the k entries with the largest bits(acc) & 0x7fffffff, equal
// keys by lower index; writes k uint32 indices ascending, then k values (fp32,
// or fp16 when fp16_values), then zeros up to payload_stride bytes. With
// residual: residual[i] = acc - sent for selected entries (0 when sent is not
// finite), acc for the rest. Needs 0 < k <= n < 2^32.
cudaError_t topk_select(Elem in_type, const void* in, float* residual, std::size_t n, std::size_t k,
                        bool fp16_values, void* payload, std::size_t payload_stride, void* scratch,
                        cudaStream_t stream);

// Device scratch that topk_accumulate needs.
std::size_t topk_accumulate_scratch_bytes(std::size_t n, int ranks);

// out = 0, then out[index] += value for every entry of rank 0's payload, then
// rank 1's, ... (rank order: every rank computes the same bits); each sum then
// divided by divisor and written as out_type. gathered holds `ranks` payloads
// at payload_stride bytes each. cudaErrorInvalidValue, with nothing launched,
// for ranks or divisor < 1, k > n, n >= 2^32, or a stride shorter than a payload.
cudaError_t topk_accumulate(const void* gathered, std::size_t payload_stride, int ranks,
                            std::size_t k, bool fp16_values, std::size_t n, Elem out_type,
                            void* out, int divisor, void* scratch, cudaStream_t stream);

// ---- top-k's sharded algorithm (twins of compressors/topk_shards.h's steps) --

// Device scratch that topk_split_parts needs for `ranks` shards.
std::size_t topk_split_scratch_bytes(int ranks);
// A payload of k entries (topk_select's layout, indices ascending) cut by
// the even shards of n over `ranks` (TopkShards::shard_bounds): part s holds
// the m entries in shard s, m shard-relative uint32 indices then m values,
// zero-padded to a multiple of 4; the parts back to back at out, part s's
// size (uint64) at part_bytes[s]. cudaErrorInvalidValue for ranks < 1, k > n
// or n >= 2^32.
cudaError_t topk_split_parts(const void* payload, std::size_t k, bool fp16_values, std::size_t n,
                             int ranks, void* out, std::uint64_t* part_bytes, void* scratch,
                             cudaStream_t stream);
// dense[index] = add_nan_first(dense[index], value) for a part's m entries
// (kernels::topk_accumulate's adds); an index at or past count is skipped.
cudaError_t topk_add_part(const void* part, std::size_t m, bool fp16_values, std::size_t count,
                          float* dense, cudaStream_t stream);
// An owner's dense result: a uint32 tag, bf16_tag when a finite sum (+
// residual) is beyond fp16's range, else fp16_tag; then the n values cast to
// that format with cast_compress's rule and residual update. *wide (device
// memory) is the kernels' own flag.
cudaError_t owner_cast16(const float* sum, float* residual, std::size_t n, void* result,
                         unsigned* wide, std::uint32_t fp16_tag, std::uint32_t bf16_tag,
                         cudaStream_t stream);
// out[i] = widen(result's value i, in the format its tag names) / divisor.
cudaError_t owner_decode16(const void* result, std::size_t n, float* out, int divisor,
                           std::uint32_t bf16_tag, cudaStream_t stream);

// ---- low rank (PowerSGD) (twins of kernels/low_rank.h) ---------------------

using kernels::LowRankShape;

// m[e] = input[e] + residual[e] (add_nan_first: an x86 CPU's `+`), the
// compressor's first step (algorithms/powersgd.cc); the same bits. m may be
// input; residual nullptr: m = input (a copy).
cudaError_t low_rank_add(const float* input, const float* residual, float* m, std::size_t n,
                         cudaStream_t stream);

// out[e] = sum over k ascending of p[i][k] q_sum[j][k]; with residual,
// residual[e] = m[e] - sum over k of p[i][k] q_local[j][k]: the same bits as
// kernels::low_rank_finish. out may be m; residual may not. Needs
// 0 < rank <= 64, else cudaErrorInvalidValue.
cudaError_t low_rank_finish(const float* m, const LowRankShape& shape, const float* p,
                            const float* q_sum, const float* q_local, float* out, float* residual,
                            cudaStream_t stream);

// kernels::orthonormalise on p (rows x rank, row-major) in place, the same
// bits: one block whose threads are the CPU twin's dot-product lanes.
cudaError_t orthonormalise(float* p, std::size_t rows, std::size_t rank, cudaStream_t stream);

// *bad (device memory, zeroed by the caller) becomes 1 when one of v[0..n)
// is not finite; left as it is otherwise. For a stream-ordered path, whose
// host cannot read the sums before it enqueues what follows them.
cudaError_t flag_not_finite(const float* v, std::size_t n, unsigned* bad, cudaStream_t stream);
// kernels::low_rank_settle with `bad` read from device memory (*bad != 0),
// the same bits. cudaErrorInvalidValue for divisor < 1.
cudaError_t low_rank_settle(const unsigned* bad, float* out, float* residual, std::size_t n,
                            int divisor, const float* q_sum, float* q_state, std::size_t q_floats,
                            cudaStream_t stream);

// Whether cuBLAS could be loaded (at run time, never linked:
// kernels/cuda/cublas_loader.h) and a handle made on the current device for
// this thread; why: the reason when not. The first call on a (device, thread)
// creates that handle, which allocates device memory (its workspace
// included): call this once before capturing a graph that runs the products.
bool cublas_available(std::string* why);
// Whether the cuBLAS library itself could be loaded (no handle made, no
// device touched): what a path asks before it takes the products' route.
bool cublas_loadable(std::string* why);

// p (rows x rank) = M q and q (cols x rank) = M^T p through cuBLAS's sgemm
// (loaded at run time: kernels/cuda/cublas_loader.h, cublas_available) for
// the full rows, a small kernel for a short last row: fp32 without TF32, in
// an order of cuBLAS's own, so within fp32 rounding of the CPU twins, not
// their bits. cudaErrorNotSupported when cuBLAS is unavailable,
// cudaErrorUnknown when it fails, cudaErrorInvalidValue for rank 0 or sizes
// past int. The first call on a (device, thread) creates a cuBLAS handle,
// which allocates: make it (cublas_available) before graph capture.
cudaError_t low_rank_project(const float* m, const LowRankShape& shape, const float* q, float* p,
                             cudaStream_t stream);
cudaError_t low_rank_back_project(const float* m, const LowRankShape& shape, const float* p,
                                  float* q, cudaStream_t stream);

}  // namespace slimreduce::kernels::cuda
