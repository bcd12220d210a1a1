// fp16 and bf16: round each value to 16 bits; summable.
#include <cstdint>
#include <memory>

#include "compressors/registry.h"
#include "kernels/cast.h"
#include "kernels/device.h"

namespace slimreduce::compressors {
namespace {

using kernels::HalfFormat;

class CastCompressor final : public SummableCompressor {
 public:
  explicit CastCompressor(HalfFormat format) : format_(format) {}

  std::string_view name() const override { return format_ == HalfFormat::fp16 ? "fp16" : "bf16"; }
  // A cast loses little, and carrying the rounding error costs a residual as
  // large as the tensor: off unless asked for.
  bool default_error_feedback() const override { return false; }
  DeviceKernels device_kernels() const override { return DeviceKernels::cast16; }
  std::size_t compressed_bytes(std::size_t n) const override { return n * sizeof(std::uint16_t); }
  std::size_t wire_element_bytes() const override { return sizeof(std::uint16_t); }

  void compress(const float* in, float* residual, std::size_t n, void* out) override {
    kernels::compress(format_, in, residual, static_cast<std::uint16_t*>(out), n);
  }
  void accumulate(const void* in, void* inout, std::size_t n) const override {
    kernels::accumulate(format_, static_cast<const std::uint16_t*>(in),
                        static_cast<std::uint16_t*>(inout), n);
  }
  void decompress(const void* in, float* out, std::size_t n) const override {
    kernels::decompress(format_, static_cast<const std::uint16_t*>(in), out, n);
  }
  std::optional<HalfFormat> native_format() const override { return format_; }
  // fp16's range ends at 65504: a sum of finite fp32 values may overflow it.
  // bf16 has fp32's exponent: it holds any sum fp32 holds.
  bool wire_finite(const void* wire, std::size_t n) const override {
    return format_ != HalfFormat::fp16 ||
           kernels::all_finite(format_, static_cast<const std::uint16_t*>(wire), n);
  }
  std::unique_ptr<SummableCompressor> overflow_rescue() const override {
    if (format_ != HalfFormat::fp16) return nullptr;
    return std::make_unique<CastCompressor>(HalfFormat::bf16);
  }

  int device_compress(const float* in, float* residual, std::size_t n, void* wire,
                      void* stream) const override {
    return kernels::device::cast_compress(format_, in, residual, static_cast<std::uint16_t*>(wire),
                                          n, stream);
  }
  int device_decompress(const void* wire, float* out, std::size_t n, int divisor,
                        void* stream) const override {
    return kernels::device::cast_decompress(format_, static_cast<const std::uint16_t*>(wire), out,
                                            n, divisor, stream);
  }
  int device_pack(const kernels::PackItem* items, int count, void* fused,
                  void* stream) const override {
    return kernels::device::pack_batch(format_, items, count, fused, stream);
  }
  int device_unpack(const void* fused, const kernels::UnpackItem* items, int count, int divisor,
                    void* stream) const override {
    return kernels::device::unpack_batch(format_, fused, items, count, divisor, stream);
  }

 private:
  HalfFormat format_;
};

}  // namespace

std::unique_ptr<Compressor> make_fp16_compressor(const CompressorOptions&) {
  return std::make_unique<CastCompressor>(HalfFormat::fp16);
}
std::unique_ptr<Compressor> make_bf16_compressor(const CompressorOptions&) {
  return std::make_unique<CastCompressor>(HalfFormat::bf16);
}

}  // namespace slimreduce::compressors
