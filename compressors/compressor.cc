// The defaults of the device entry points: a compressor without device
// kernels (DeviceKernels::none) is never asked for them; if it were, it
// answers kNoDevice and enqueues nothing.
#include "compressors/compressor.h"

#include <algorithm>

namespace slimreduce::compressors {

using kernels::device::kNoDevice;

int SummableCompressor::device_compress(const float*, float*, std::size_t, void*, void*) const {
  return kNoDevice;
}
int SummableCompressor::device_decompress(const void*, float*, std::size_t, int, void*) const {
  return kNoDevice;
}
int SummableCompressor::device_pack(const kernels::PackItem*, int, void*, void*) const {
  return kNoDevice;
}
int SummableCompressor::device_unpack(const void*, const kernels::UnpackItem*, int, int,
                                      void*) const {
  return kNoDevice;
}
std::size_t GatheredCompressor::device_compress_scratch_bytes(std::size_t) const { return 0; }
int GatheredCompressor::device_compress(Elem, const void*, float*, std::size_t, void*, void*,
                                        void*) {
  return kNoDevice;
}
std::size_t GatheredCompressor::device_finish_scratch_bytes(std::size_t, int) const { return 0; }
int GatheredCompressor::device_finish(const void*, std::size_t, int, std::size_t, Elem, void*, int,
                                      void*, void*) const {
  return kNoDevice;
}

int LowRankCompressor::device_add(const float*, const float*, float*, std::size_t, void*) const {
  return kNoDevice;
}
int LowRankCompressor::device_project(const float*, const kernels::LowRankShape&, const float*,
                                      float*, void*) const {
  return kNoDevice;
}
int LowRankCompressor::device_orthonormalise(float*, const kernels::LowRankShape&, void*) const {
  return kNoDevice;
}
int LowRankCompressor::device_back_project(const float*, const kernels::LowRankShape&, const float*,
                                           float*, void*) const {
  return kNoDevice;
}
int LowRankCompressor::device_finish(const float*, const kernels::LowRankShape&, const float*,
                                     const float*, const float*, float*, float*, void*) const {
  return kNoDevice;
}

int LowRankCompressor::device_flag_not_finite(const float*, std::size_t, unsigned*, void*) const {
  return kNoDevice;
}
int LowRankCompressor::device_settle(const unsigned*, float*, float*, std::size_t, int,
                                     const float*, float*, std::size_t, void*) const {
  return kNoDevice;
}

int ShardedCodec::device_compress_parts(const float*, float*, std::size_t, const std::size_t*, int,
                                        std::byte*, std::uint64_t*, void*, void*,
                                        const CallDraw&) const {
  return kNoDevice;
}
int ShardedCodec::device_owner_step(const std::byte*, const std::size_t*, int, std::size_t,
                                    std::size_t, float*, float*, std::byte*, std::size_t, void*,
                                    void*, const CallDraw&) const {
  return kNoDevice;
}
int ShardedCodec::device_decode_results(const std::byte*, std::size_t, std::size_t,
                                        const std::size_t*, int, float*, int, void*, void*) const {
  return kNoDevice;
}

void whole_bucket_bounds(std::size_t n, std::size_t bucket, std::size_t buckets, int ranks,
                         std::size_t* bounds) {
  const auto shards = static_cast<std::size_t>(ranks);
  for (std::size_t s = 0; s <= shards; ++s) {
    const std::size_t first = buckets / shards * s + buckets % shards * s / shards;
    bounds[s] = std::min(first * bucket, n);
  }
}

}  // namespace slimreduce::compressors
