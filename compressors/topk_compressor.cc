// top-k: the k = ceil(ratio x n) values of largest magnitude, as (index,
// value) pairs; gathered, since payloads from different ranks hold different
// indices and cannot be added on the wire.
#include <memory>

#include "compressors/registry.h"
#include "kernels/topk.h"

namespace slimreduce::compressors {
namespace {

class TopkCompressor final : public GatheredCompressor {
 public:
  explicit TopkCompressor(const CompressorOptions& options)
      : ratio_(options.topk_ratio),
        values_(options.topk_values_fp16 ? kernels::TopkValues::fp16 : kernels::TopkValues::fp32) {}

  std::string_view name() const override { return "topk"; }
  // Without it, what is not sent is lost for good (Deep Gradient Compression).
  bool default_error_feedback() const override { return true; }
  std::size_t compressed_bytes(std::size_t n) const override {
    return kernels::topk_payload_bytes(kernels::topk_count(n, ratio_), values_);
  }
  void compress(const float* in, float* residual, std::size_t n, void* out) override {
    kernels::topk_compress(in, residual, n, kernels::topk_count(n, ratio_), values_, out, scratch_);
  }
  void accumulate(const void* payload, std::size_t n, float* dense) const override {
    kernels::topk_accumulate(payload, kernels::topk_count(n, ratio_), values_, dense);
  }

 private:
  double ratio_;
  kernels::TopkValues values_;
  kernels::TopkScratch scratch_;
};

}  // namespace

std::unique_ptr<Compressor> make_topk_compressor(const CompressorOptions& options) {
  return std::make_unique<TopkCompressor>(options);
}

}  // namespace slimreduce::compressors
