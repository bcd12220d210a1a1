// A compressor turns fp32 values into what travels on the wire and back.
//
// Summable compressors (fp16, bf16) keep one wire element per value, so a ring
// can add compressed values as they pass. Gathered compressors (top-k) make a
// payload per rank that every rank receives and accumulates in rank order.
//
// Error feedback is part of every compressor's contract, not of any one
// compressor: compress() takes an optional residual and must leave
// sent + residual == in + old_residual (in fp32, element by element), where
// sent is what the receivers will decode. core/ owns the residual memory
// (keys, caps, resets), so error feedback wraps any compressor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/cast.h"

namespace slimreduce::compressors {

enum class Aggregation { summable, gathered };

// The GPU kernels (kernels/cuda/) that can carry a compressor's wire on device
// buffers: the 16-bit casts (the format is native_format()), or exact top-k
// (its parameters from topk_form()). none: the device paths stage the call
// through the host entry points, or pass it through (NCCL). The paths ask this,
// never a compressor's name: the registry is the only place that knows names.
enum class DeviceKernels { none, cast16, topk };

// Top-k's kernel parameters for n values: k entries, values as fp16 or fp32.
struct TopkForm {
  std::size_t k = 0;
  bool fp16_values = false;
};

class Compressor {
 public:
  virtual ~Compressor() = default;
  virtual std::string_view name() const = 0;
  virtual Aggregation aggregation() const = 0;
  // Whether SLIMREDUCE_ERROR_FEEDBACK defaults to on for this compressor.
  virtual bool default_error_feedback() const = 0;
  virtual DeviceKernels device_kernels() const { return DeviceKernels::none; }
  // Bytes that compress() writes for n values (the payload of one rank).
  virtual std::size_t compressed_bytes(std::size_t n) const = 0;
  // residual == nullptr: no error feedback.
  virtual void compress(const float* in, float* residual, std::size_t n, void* out) = 0;
};

class SummableCompressor : public Compressor {
 public:
  Aggregation aggregation() const final { return Aggregation::summable; }
  virtual std::size_t wire_element_bytes() const = 0;
  // inout[i] = encode(decode(in[i]) + decode(inout[i])) over n wire elements.
  virtual void accumulate(const void* in, void* inout, std::size_t n) const = 0;
  // out[i] = decode(in[i]) over n wire elements.
  virtual void decompress(const void* in, float* out, std::size_t n) const = 0;
  // The 16-bit format of the wire elements, when a backend can sum them
  // itself (NCCL's ncclFloat16, ncclBfloat16) with the same meaning as
  // accumulate(); none otherwise.
  virtual std::optional<kernels::HalfFormat> native_format() const { return std::nullopt; }
};

class GatheredCompressor : public Compressor {
 public:
  Aggregation aggregation() const final { return Aggregation::gathered; }
  // dense[i] += the value the payload holds for i (payload of n values).
  virtual void accumulate(const void* payload, std::size_t n, float* dense) const = 0;
  // With DeviceKernels::topk: the kernels' parameters for n values.
  virtual TopkForm topk_form(std::size_t n) const {
    (void)n;
    return {};
  }
};

// What a compressor may be configured with (filled from the settings by core/).
struct CompressorOptions {
  double topk_ratio = 0.01;
  bool topk_values_fp16 = false;
};

}  // namespace slimreduce::compressors
