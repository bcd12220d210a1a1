// top-k: the k = ceil(ratio x n) values of largest magnitude, as (index,
// value) pairs; gathered, since payloads from different ranks hold different
// indices and cannot be added on the wire, or sharded (compressors/topk_shards.h),
// whichever SLIMREDUCE_TOPK_ALGORITHM and its cost model pick.
#include <memory>
#include <mutex>
#include <vector>

#include "compressors/registry.h"
#include "compressors/topk_shards.h"
#include "kernels/device.h"
#include "kernels/topk.h"

namespace slimreduce::compressors {
namespace {

class TopkCompressor final : public GatheredCompressor, public ShardedCodec {
 public:
  explicit TopkCompressor(const CompressorOptions& options)
      : ratio_(options.topk_ratio),
        values_(options.topk_values_fp16 ? kernels::TopkValues::fp16 : kernels::TopkValues::fp32),
        algorithm_(options.topk_algorithm),
        shards_(ratio_, values_) {}

  std::string_view name() const override { return "topk"; }
  // Without it, what is not sent is lost for good (Deep Gradient Compression).
  bool default_error_feedback() const override { return true; }
  DeviceKernels device_kernels() const override { return DeviceKernels::topk; }
  // Payload indices are uint32.
  std::uint64_t device_max_count() const override { return 0xffffffffull; }
  std::size_t compressed_bytes(std::size_t n) const override {
    return kernels::topk_payload_bytes(kernels::topk_count(n, ratio_), values_);
  }
  void compress(const float* in, float* residual, std::size_t n, void* out) override {
    ScratchLease scratch(*this);
    kernels::topk_compress(in, residual, n, kernels::topk_count(n, ratio_), values_, out,
                           scratch.get());
  }
  void accumulate(const void* payload, std::size_t n, float* dense) const override {
    kernels::topk_accumulate(payload, kernels::topk_count(n, ratio_), values_, dense);
  }
  bool payload_valid(const void* payload, std::size_t n) const override {
    return kernels::topk_payload_valid(payload, kernels::topk_count(n, ratio_), n);
  }

  ShardedCodec* sharded_codec() override { return this; }
  // auto: sharded when it sends at most half the gathered bytes (it pays two
  // more collectives and a second selection on the owner for them), and only
  // where the owners send top-k too: their dense 16-bit shards (ratios above
  // about 1/4) would round what the gathered algorithm sends exactly.
  bool prefers_sharded(std::size_t n, int ranks) const override {
    if (algorithm_ != TopkAlgorithm::automatic) return algorithm_ == TopkAlgorithm::sharded;
    const std::size_t largest_shard = (n + static_cast<std::size_t>(ranks) - 1) / ranks;
    return ranks > 2 && !shards_.owner_dense(largest_shard) &&
           2 * shards_.sharded_wire_bytes(n, ranks) <= shards_.gathered_wire_bytes(n, ranks);
  }

  void shard_bounds(std::size_t n, int ranks, std::size_t* bounds) const override {
    TopkShards::shard_bounds(n, ranks, bounds);
  }
  bool part_sizes_vary() const override { return true; }
  std::size_t part_capacity(std::size_t count, std::size_t n) const override {
    return shards_.part_capacity(count, n);
  }
  std::size_t parts_capacity(std::size_t n, int ranks) const override {
    return shards_.parts_capacity(n, ranks);
  }
  void compress_parts(const float* in, float* residual, std::size_t n, const std::size_t*,
                      int ranks, std::byte* out, std::size_t* part_bytes,
                      const CallDraw&) override {
    ScratchLease scratch(*this);
    shards_.compress_parts(in, residual, n, ranks, out, part_bytes, scratch.get());
  }
  bool part_valid(const std::byte* part, std::size_t bytes, std::size_t count,
                  std::size_t n) const override {
    return shards_.part_valid(part, bytes, count, n);
  }
  void accumulate_part(const std::byte* part, std::size_t bytes, std::size_t, std::size_t,
                       float* shard) const override {
    shards_.accumulate_part(part, bytes, shard);
  }
  std::size_t owner_bytes(std::size_t count, std::size_t) const override {
    return shards_.owner_bytes(count);
  }
  void owner_compress(float* sum, float* owner_residual, std::size_t count, std::size_t,
                      std::byte* out, const CallDraw&) override {
    ScratchLease scratch(*this);
    shards_.owner_compress(sum, owner_residual, count, out, scratch.get());
  }
  bool owner_valid(const std::byte* result, std::size_t count, std::size_t) const override {
    return shards_.owner_valid(result, count);
  }
  void owner_decode(const std::byte* result, std::size_t count, std::size_t,
                    float* out) const override {
    shards_.owner_decode(result, count, out);
  }

  // The sharded algorithm on the device (the NCCL path's).
  std::size_t device_scratch_bytes(std::size_t n, int ranks) const override {
    return shards_.device_scratch_bytes(n, ranks);
  }
  int device_compress_parts(const float* in, float* residual, std::size_t n, const std::size_t*,
                            int ranks, std::byte* out, std::uint64_t* part_bytes, void* scratch,
                            void* stream, const CallDraw&) const override {
    return shards_.device_compress_parts(in, residual, n, ranks, out, part_bytes, scratch, stream);
  }
  int device_owner_step(const std::byte* parts, const std::size_t* part_bytes, int ranks,
                        std::size_t owned, std::size_t, float* shard, float* owner_residual,
                        std::byte* result, std::size_t slot_bytes, void* scratch, void* stream,
                        const CallDraw&) const override {
    return shards_.device_owner_step(parts, part_bytes, ranks, owned, shard, owner_residual, result,
                                     slot_bytes, scratch, stream);
  }
  int device_decode_results(const std::byte* gathered, std::size_t slot_bytes, std::size_t,
                            const std::size_t* bounds, int ranks, float* out, int divisor,
                            void* scratch, void* stream) const override {
    return shards_.device_decode_results(gathered, slot_bytes, bounds, ranks, out, divisor, scratch,
                                         stream);
  }

  // The payload padded to 16 bytes: every rank's uint32 indices stay aligned.
  std::size_t device_slot_bytes(std::size_t n) const override {
    return kernels::topk_payload_stride(compressed_bytes(n));
  }
  std::size_t device_compress_scratch_bytes(std::size_t n) const override {
    return kernels::device::topk_select_scratch_bytes(n);
  }
  int device_compress(Elem in_type, const void* in, float* residual, std::size_t n, void* slot,
                      void* scratch, void* stream) override {
    return kernels::device::topk_select(in_type, in, residual, n, kernels::topk_count(n, ratio_),
                                        fp16_values(), slot, device_slot_bytes(n), scratch, stream);
  }
  std::size_t device_finish_scratch_bytes(std::size_t n, int ranks) const override {
    return kernels::device::topk_accumulate_scratch_bytes(n, ranks);
  }
  int device_finish(const void* gathered, std::size_t stride, int ranks, std::size_t n,
                    Elem out_type, void* out, int divisor, void* scratch,
                    void* stream) const override {
    return kernels::device::topk_accumulate(gathered, stride, ranks, kernels::topk_count(n, ratio_),
                                            fp16_values(), n, out_type, out, divisor, scratch,
                                            stream);
  }

 private:
  bool fp16_values() const { return values_ == kernels::TopkValues::fp16; }

  // Scratch for one call at a time: threads compressing at once (each on its
  // own communicator, under MPI_THREAD_MULTIPLE) each lease their own, and
  // the lock is held only to take or give one back, never while selecting.
  class ScratchLease {
   public:
    explicit ScratchLease(TopkCompressor& owner) : owner_(owner) {
      std::lock_guard lock(owner_.idle_mutex_);
      if (!owner_.idle_.empty()) {
        scratch_ = std::move(owner_.idle_.back());
        owner_.idle_.pop_back();
      }
      if (!scratch_) {
        // Room for every scratch made, so that giving one back never allocates.
        owner_.idle_.reserve(owner_.made_ + 1);
        scratch_ = std::make_unique<kernels::TopkScratch>();
        ++owner_.made_;
      }
    }
    ScratchLease(const ScratchLease&) = delete;
    ScratchLease& operator=(const ScratchLease&) = delete;
    ~ScratchLease() {
      std::lock_guard lock(owner_.idle_mutex_);
      owner_.idle_.push_back(std::move(scratch_));
    }
    kernels::TopkScratch& get() { return *scratch_; }

   private:
    TopkCompressor& owner_;
    std::unique_ptr<kernels::TopkScratch> scratch_;
  };

  double ratio_;
  kernels::TopkValues values_;
  TopkAlgorithm algorithm_;
  TopkShards shards_;
  std::mutex idle_mutex_;
  std::vector<std::unique_ptr<kernels::TopkScratch>> idle_;  // grown, kept for the next calls
  std::size_t made_ = 0;
};

}  // namespace

std::unique_ptr<Compressor> make_topk_compressor(const CompressorOptions& options) {
  return std::make_unique<TopkCompressor>(options);
}

}  // namespace slimreduce::compressors
