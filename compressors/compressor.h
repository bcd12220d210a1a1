// A compressor turns fp32 values into what travels on the wire and back.
//
// Summable compressors (fp16, bf16) keep one wire element per value, so a ring
// can add compressed values as they pass. Gathered compressors (top-k) make a
// payload per rank that every rank receives and accumulates in rank order.
// Sharded compressors (int8) send each rank's shard of the index space to
// its owner, which sums the parts in rank order and compresses the sum again
// for an allgather (algorithms/sharded.h); a gathered compressor may offer
// the same (top-k: sharded_codec()), picked by a cost model.
// Low-rank compressors (PowerSGD) view a tensor as a matrix and send two
// small fp32 factors, each summed over the ranks, with local work between
// the two sums (algorithms/powersgd.h runs them).
//
// Error feedback is part of every compressor's contract, not of any one
// compressor: compress() takes an optional residual and must leave
// sent + residual == in + old_residual (in fp32, element by element), where
// sent is what the receivers will decode. core/ owns the residual memory
// (keys, caps, resets), so error feedback wraps any compressor.
//
// Host and device entry points: each compressor has both, in its one file.
// The device ones (device_*) have the host ones' semantics, bit for bit, on
// device memory: they only enqueue work on `stream` (a cudaStream_t), with no
// host wait and no allocation (so they are safe under CUDA-graph capture), and
// return the launch's CUDA error (0: enqueued). A compressor without device
// kernels keeps the defaults (device_kernels() none): its calls on device
// buffers are staged through the host entry points (MPI) or pass through (NCCL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/cast.h"
#include "kernels/device.h"
#include "kernels/low_rank.h"
#include "kernels/pack.h"

namespace slimreduce::compressors {

enum class Aggregation { summable, gathered, low_rank, sharded };

// Which device entry points a compressor has, and so what its device paths
// can take: none; 16-bit casts of fp32 inputs (a summable compressor's
// device_pack / device_unpack, device_compress / device_decompress); a
// selection that also reads fp16 and bf16 inputs (a gathered compressor's
// device_compress / device_finish), up to device_max_count() values; a
// low-rank compressor's steps (device_add ... device_finish, the products
// through cuBLAS, answered only where cuBLAS can be loaded); a sharded
// compressor's entry points (ShardedCodec's device_*). A gathered compressor
// with a sharded codec (top-k) has those too, for the NCCL path. The paths
// ask this, never a compressor's name: the registry is the only place that
// knows names.
enum class DeviceKernels { none, cast16, topk, low_rank, sharded };

using kernels::device::Elem;

// What a stochastic quantizer draws its rounding from (kernels/rounding.h,
// with SLIMREDUCE_QUANT_SEED): the call's number among calls of its shape
// (the same on every rank), the rank that quantizes (the communicator's), and
// `first`, the element number in the call's tensor of the values a step
// works on (a partition's or a hierarchical shard's offset); never an
// address or a clock, so that a rerun draws the same. Others ignore it.
struct CallDraw {
  std::uint64_t call = 0;
  int rank = 0;
  std::uint64_t first = 0;

  // The same draw for the values from `offset` on.
  CallDraw at(std::uint64_t offset) const { return {call, rank, first + offset}; }
};

// A compressor's side of the sharded algorithm (algorithms/sharded.h), for
// a tensor of n values over `ranks` ranks: rank s owns values [bounds[s],
// bounds[s+1]). Each rank compresses the whole tensor (with its residual)
// into one part per shard; each owner adds the parts of its shard from every
// rank, in rank order, into zeros, and compresses that sum again (with an
// owner-side residual: two-way compression) into a result of owner_bytes();
// every rank decodes every owner's result. Parts carry shard-relative
// positions. Host entry points, and the device's below them.
class ShardedCodec {
 public:
  virtual ~ShardedCodec() = default;
  // Parts travel back to back, each padded to 4 bytes, so that the next
  // part's 4-byte fields (top-k's indices, int8's scales) stay aligned.
  static std::size_t padded_part(std::size_t bytes) { return (bytes + 3) / 4 * 4; }
  // bounds[0..ranks]: bounds[0] == 0, bounds[ranks] == n, non-decreasing;
  // from n and ranks alone, so the same on every rank.
  virtual void shard_bounds(std::size_t n, int ranks, std::size_t* bounds) const = 0;
  // Whether a part's size depends on the values (top-k: how many selected
  // values fall in the shard), so that sizes are exchanged first; otherwise
  // it is part_capacity() exactly.
  virtual bool part_sizes_vary() const = 0;
  // The most bytes of one rank's part of a shard of `count` values, of n.
  virtual std::size_t part_capacity(std::size_t count, std::size_t n) const = 0;
  // The most bytes of all of one rank's parts of n values.
  virtual std::size_t parts_capacity(std::size_t n, int ranks) const = 0;
  // Compresses in (+ residual; nullptr: no error feedback) into the parts,
  // back to back in shard order at out; part_bytes[s]: the size of part s.
  // `draw`: this rank's, from in[0] (a stochastic quantizer's rounding).
  virtual void compress_parts(const float* in, float* residual, std::size_t n,
                              const std::size_t* bounds, int ranks, std::byte* out,
                              std::size_t* part_bytes, const CallDraw& draw) = 0;
  // Whether a part from another rank is one compress_parts could have written
  // for a shard of `count` values, of n, so that accumulate_part stays inside it.
  virtual bool part_valid(const std::byte* part, std::size_t bytes, std::size_t count,
                          std::size_t n) const = 0;
  // shard[i] = add_nan_first(shard[i], the part's value i), over count values.
  virtual void accumulate_part(const std::byte* part, std::size_t bytes, std::size_t count,
                               std::size_t n, float* shard) const = 0;
  // Bytes of an owner's result for a shard of `count` values, of n: the same
  // on every rank.
  virtual std::size_t owner_bytes(std::size_t count, std::size_t n) const = 0;
  // The owner's result of its summed shard (+ owner_residual, nullptr: none).
  // sum may be overwritten. `draw`: the owner's, from the shard's first value.
  virtual void owner_compress(float* sum, float* owner_residual, std::size_t count, std::size_t n,
                              std::byte* out, const CallDraw& draw) = 0;
  virtual bool owner_valid(const std::byte* result, std::size_t count, std::size_t n) const = 0;
  // out = the shard's values as the owner's result holds them.
  virtual void owner_decode(const std::byte* result, std::size_t count, std::size_t n,
                            float* out) const = 0;

  // The device entry points (a GPU path's, kNoDevice where there are none),
  // each only enqueued on `stream`, with `scratch` of device_scratch_bytes():
  // Each takes the host entry point's `draw`.
  //  - device_compress_parts: compress_parts() into device memory at out, the
  //    same bytes; each part's size (uint64) into part_bytes (device memory,
  //    ranks of them) where sizes vary, else each is part_capacity();
  //  - device_owner_step: the owner's step of a stream-ordered transport
  //    (NCCL): its shard's parts from every rank, back to back at parts,
  //    part_bytes[r] (host memory) from rank r, added into zeros at shard
  //    (owned floats) in rank order, as accumulate_part adds; that sum
  //    compressed with owner_residual (nullptr: none) into result, as
  //    owner_compress; the result's padding up to slot_bytes zeroed;
  //  - device_decode_results: owner_decode() of every owner's result
  //    (gathered, slot_bytes apart) into out (device memory), each shard at
  //    its bound, divided by `divisor` (divide_keeping_nan; 1: the sum).
  virtual std::size_t device_scratch_bytes(std::size_t n, int ranks) const {
    (void)n, (void)ranks;
    return 0;
  }
  virtual int device_compress_parts(const float* in, float* residual, std::size_t n,
                                    const std::size_t* bounds, int ranks, std::byte* out,
                                    std::uint64_t* part_bytes, void* scratch, void* stream,
                                    const CallDraw& draw) const;
  virtual int device_owner_step(const std::byte* parts, const std::size_t* part_bytes, int ranks,
                                std::size_t owned, std::size_t n, float* shard,
                                float* owner_residual, std::byte* result, std::size_t slot_bytes,
                                void* scratch, void* stream, const CallDraw& draw) const;
  virtual int device_decode_results(const std::byte* gathered, std::size_t slot_bytes,
                                    std::size_t n, const std::size_t* bounds, int ranks, float* out,
                                    int divisor, void* scratch, void* stream) const;
};

// Shards of whole buckets for a bucketed codec (a bucket's scale is one
// rank's), as even as buckets allow: bounds[0..ranks] over n values in
// `buckets` buckets of `bucket` values; from n and ranks alone.
void whole_bucket_bounds(std::size_t n, std::size_t bucket, std::size_t buckets, int ranks,
                         std::size_t* bounds);

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual std::string_view name() const = 0;
  virtual Aggregation aggregation() const = 0;
  // Whether SLIMREDUCE_ERROR_FEEDBACK defaults to on for this compressor.
  virtual bool default_error_feedback() const = 0;
  virtual DeviceKernels device_kernels() const { return DeviceKernels::none; }
  // The largest count the device entry points take; a larger call is staged
  // through the host entry points (MPI) or passes through (NCCL).
  virtual std::uint64_t device_max_count() const { return UINT64_MAX; }
  // Bytes that compress() writes for n values (the payload of one rank; a
  // low-rank compressor's: its two factors; a sharded one's: its parts).
  virtual std::size_t compressed_bytes(std::size_t n) const = 0;
  // The compressor's side of the sharded algorithm, nullptr: none.
  virtual ShardedCodec* sharded_codec() { return nullptr; }
  // The same, for a reader (the codec's sizes and device entry points are const).
  const ShardedCodec* sharded_codec() const {
    return const_cast<Compressor*>(this)->sharded_codec();
  }
  // Whether a call of n values over `ranks` ranks goes sharded rather than
  // by the compressor's own aggregation: the same answer on every rank.
  virtual bool prefers_sharded(std::size_t n, int ranks) const {
    (void)n, (void)ranks;
    return false;
  }
};

class SummableCompressor : public Compressor {
 public:
  static constexpr Aggregation kAggregation = Aggregation::summable;
  Aggregation aggregation() const final { return kAggregation; }
  // residual == nullptr: no error feedback.
  virtual void compress(const float* in, float* residual, std::size_t n, void* out) = 0;
  virtual std::size_t wire_element_bytes() const = 0;
  // inout[i] = encode(decode(in[i]) + decode(inout[i])) over n wire elements.
  virtual void accumulate(const void* in, void* inout, std::size_t n) const = 0;
  // out[i] = decode(in[i]) over n wire elements.
  virtual void decompress(const void* in, float* out, std::size_t n) const = 0;
  // The 16-bit format of the wire elements, when a backend can sum them
  // itself (NCCL's ncclFloat16, ncclBfloat16) with the same meaning as
  // accumulate(); none otherwise.
  virtual std::optional<kernels::HalfFormat> native_format() const { return std::nullopt; }
  // Whether n reduced wire elements are all finite. The default: a wire
  // whose range is fp32's never overflows where the fp32 sum would not.
  virtual bool wire_finite(const void* wire, std::size_t n) const {
    (void)wire, (void)n;
    return true;
  }
  // The compressor a call reruns with when its reduced wire is not finite:
  // one whose range is fp32's (bf16 for fp16). nullptr: none needed.
  virtual std::unique_ptr<SummableCompressor> overflow_rescue() const { return nullptr; }

  // Device: compress() of fp32 `in` into n wire elements.
  virtual int device_compress(const float* in, float* residual, std::size_t n, void* wire,
                              void* stream) const;
  // Device: decompress(), each value divided by divisor (>= 1; 1 divides nothing).
  virtual int device_decompress(const void* wire, float* out, std::size_t n, int divisor,
                                void* stream) const;
  // Device: compress() of many tensors into one fused wire buffer (kernels/pack.h's
  // items), and its decompress() back out, divided by divisor.
  virtual int device_pack(const kernels::PackItem* items, int count, void* fused,
                          void* stream) const;
  virtual int device_unpack(const void* fused, const kernels::UnpackItem* items, int count,
                            int divisor, void* stream) const;
};

class GatheredCompressor : public Compressor {
 public:
  static constexpr Aggregation kAggregation = Aggregation::gathered;
  Aggregation aggregation() const final { return kAggregation; }
  // residual == nullptr: no error feedback.
  virtual void compress(const float* in, float* residual, std::size_t n, void* out) = 0;
  // dense[i] += the value the payload holds for i (payload of n values).
  virtual void accumulate(const void* payload, std::size_t n, float* dense) const = 0;
  // Whether a payload of n values from another rank is well formed, so that
  // accumulate() stays inside dense; checked on every gathered payload.
  virtual bool payload_valid(const void* payload, std::size_t n) const = 0;

  // Device: where payloads sit in device memory, compressed_bytes(n) padded so
  // that gathered payloads stay aligned for device_finish. The bytes that go
  // on the wire are still compressed_bytes(n): the host's payload exactly.
  virtual std::size_t device_slot_bytes(std::size_t n) const { return compressed_bytes(n); }
  // Device: compress() of `in` (fp32, fp16 or bf16) into a slot, with scratch
  // of device_compress_scratch_bytes(n).
  virtual std::size_t device_compress_scratch_bytes(std::size_t n) const;
  virtual int device_compress(Elem in_type, const void* in, float* residual, std::size_t n,
                              void* slot, void* scratch, void* stream);
  // Device: out = the `ranks` gathered slots, `stride` bytes apart (at least
  // device_slot_bytes(n), a multiple of it for a lone call, the sum of a fused
  // batch's slots for one of its calls), added in rank order into zeros,
  // divided by divisor, written as out_type; scratch of device_finish_scratch_bytes.
  virtual std::size_t device_finish_scratch_bytes(std::size_t n, int ranks) const;
  virtual int device_finish(const void* gathered, std::size_t stride, int ranks, std::size_t n,
                            Elem out_type, void* out, int divisor, void* scratch,
                            void* stream) const;
};

// Whether calls of this compressor can share one fused collective
// (algorithms/fused_casts.h, fused_gathered.h, fused_powersgd.h): all but
// the sharded ones.
inline bool fusable(const Compressor& compressor) {
  return compressor.aggregation() != Aggregation::sharded;
}

// A compressor whose only algorithm is the sharded one (int8).
class ShardedCompressor : public Compressor, public ShardedCodec {
 public:
  static constexpr Aggregation kAggregation = Aggregation::sharded;
  Aggregation aggregation() const final { return kAggregation; }
  ShardedCodec* sharded_codec() final { return this; }
  bool prefers_sharded(std::size_t n, int ranks) const final {
    (void)n, (void)ranks;
    return true;
  }
};

// PowerSGD (Vogels et al., 2019): a tensor viewed as a matrix M (the shape
// from kernels/low_rank.h), one power-iteration step per call against a Q
// kept per residual key. The host entry points are the steps between the two
// sums; algorithms/powersgd.h orders them and does the sums. The device
// entry points are the same steps on device memory (DeviceKernels::low_rank:
// the MPI path's device buffers run them, core/mpi/device_low_rank.cc; NCCL
// calls still pass through).
class LowRankCompressor : public Compressor {
 public:
  static constexpr Aggregation kAggregation = Aggregation::low_rank;
  Aggregation aggregation() const final { return kAggregation; }
  // The matrix view of n values (rows: a tensor's real row count, from the
  // native API, or 0 to choose); rank 0: not worth compressing (the call is
  // summed exactly in fp32 instead).
  virtual kernels::LowRankShape shape(std::size_t n, std::size_t rows) const = 0;
  // q's first value, the same on every rank.
  virtual void seed(const kernels::LowRankShape& shape, float* q) const = 0;
  // p = M q.
  virtual void project(const float* m, const kernels::LowRankShape& shape, const float* q,
                       float* p) const = 0;
  // p's columns made orthonormal, the same bits on every rank.
  virtual void orthonormalise(float* p, const kernels::LowRankShape& shape) const = 0;
  // q = M^T p.
  virtual void back_project(const float* m, const kernels::LowRankShape& shape, const float* p,
                            float* q) const = 0;
  // out = p q_sum^T; residual (nullptr: none) = M - p q_local^T.
  virtual void finish(const float* m, const kernels::LowRankShape& shape, const float* p,
                      const float* q_sum, const float* q_local, float* out,
                      float* residual) const = 0;
  // What computes the two products, for the log: "cblas_sgemm of a private
  // OpenBLAS ..." or "our loops (...)"; may load the BLAS.
  virtual std::string products() const = 0;

  // Device: m = input + residual (residual nullptr: a copy of input), then
  // project(), orthonormalise(), back_project() and finish() on device
  // memory. The products (cuBLAS) are within fp32 rounding of the host ones,
  // not their bits (as the host's BLAS and loops differ: only summed factors
  // reach the result); the other steps give the host ones' bits.
  virtual int device_add(const float* input, const float* residual, float* m, std::size_t n,
                         void* stream) const;
  virtual int device_project(const float* m, const kernels::LowRankShape& shape, const float* q,
                             float* p, void* stream) const;
  virtual int device_orthonormalise(float* p, const kernels::LowRankShape& shape,
                                    void* stream) const;
  virtual int device_back_project(const float* m, const kernels::LowRankShape& shape,
                                  const float* p, float* q, void* stream) const;
  virtual int device_finish(const float* m, const kernels::LowRankShape& shape, const float* p,
                            const float* q_sum, const float* q_local, float* out, float* residual,
                            void* stream) const;
  // Device, for a stream-ordered path (NCCL), whose host cannot read a sum
  // before it enqueues what follows: *bad = 1 when one of v[0..n) is not
  // finite; then the call's end from *bad (kernels::low_rank_settle: NaN out
  // and the residual zeroed; else out divided by divisor and q_sum kept as
  // the key's Q in q_state).
  virtual int device_flag_not_finite(const float* v, std::size_t n, unsigned* bad,
                                     void* stream) const;
  virtual int device_settle(const unsigned* bad, float* out, float* residual, std::size_t n,
                            int divisor, const float* q_sum, float* q_state, std::size_t q_floats,
                            void* stream) const;
};

// What computes PowerSGD's two products P = M Q and Q = M^T P: a private
// copy of Debian's serial OpenBLAS where it is installed, else our loops
// (automatic); that BLAS or an error at start (openblas); our loops, whose
// bits do not depend on the CPU (builtin). docs/architecture.md, "Low rank".
enum class PowerSgdProducts { automatic, openblas, builtin };

// How top-k aggregates: allgathered payloads, sharded to owners, or picked
// per call by a cost model of n, k and the rank count.
enum class TopkAlgorithm { gather, sharded, automatic };

// What a compressor may be configured with (filled from the settings by core/).
// The quantizers' codes (SLIMREDUCE_QUANT_CODES): absmax, one scale per
// bucket, symmetric around 0 (kernels/quant8.h, quant_packed.h); minmax, codes
// over the bucket's [min, max] (kernels/quant8_minmax.h, quant_packed_minmax.h).
// by_width (the default) is each width's measured better one
// (docs/performance.md section 13): min-max at 4 and 2 bits, where the
// demo's final loss with error feedback came out nearer the uncompressed one
// on three seeds (at 2 bits: within 0.05%, absmax 0.11% to 0.43% above);
// absmax at 8 bits, where both were level with it and absmax is smaller.
enum class QuantCodes { absmax, minmax, by_width };

// How the quantizers round (SLIMREDUCE_QUANT_ROUNDING): to the nearest code,
// or stochastically, each code unbiased (kernels/rounding.h), so that a job
// can run without error feedback.
enum class QuantRounding { nearest, stochastic };

// The codes a quantizer of `bits` bits uses when asked for `asked`.
constexpr QuantCodes codes_at(QuantCodes asked, int bits) {
  if (asked != QuantCodes::by_width) return asked;
  return bits == 8 ? QuantCodes::absmax : QuantCodes::minmax;
}

struct CompressorOptions {
  double topk_ratio = 0.01;
  bool topk_values_fp16 = false;
  int powersgd_rank = 4;                                    // SLIMREDUCE_POWERSGD_RANK
  double powersgd_min_compression = 2.0;                    // SLIMREDUCE_POWERSGD_MIN_COMPRESSION
  TopkAlgorithm topk_algorithm = TopkAlgorithm::automatic;  // SLIMREDUCE_TOPK_ALGORITHM
  std::size_t quant_bucket = 512;                           // SLIMREDUCE_QUANT_BUCKET
  PowerSgdProducts powersgd_products = PowerSgdProducts::automatic;  // SLIMREDUCE_POWERSGD_BLAS
  QuantCodes quant_codes = QuantCodes::by_width;                     // SLIMREDUCE_QUANT_CODES
  int quant_bits = 8;  // SLIMREDUCE_QUANT_BITS: `quant`'s width (int4, int2 fix theirs)
  QuantRounding quant_rounding = QuantRounding::nearest;  // SLIMREDUCE_QUANT_ROUNDING
  std::uint64_t quant_seed = 0;                           // SLIMREDUCE_QUANT_SEED
};

}  // namespace slimreduce::compressors
