// The device entry points of a CPU-only build (kernels/device.h): there is no
// stream to enqueue on, so each answers kNoDevice. Never reached: without
// CUDA no pointer is a device pointer, and there is no NCCL to intercept.
// kernels/CMakeLists.txt builds it only when the GPU path is off.
#include "kernels/device.h"

namespace slimreduce::kernels::device {

int cast_compress(HalfFormat, const float*, float*, std::uint16_t*, std::size_t, void*) {
  return kNoDevice;
}
int cast_decompress(HalfFormat, const std::uint16_t*, float*, std::size_t, int, void*) {
  return kNoDevice;
}
int pack_batch(HalfFormat, const PackItem*, int, void*, void*) { return kNoDevice; }
int unpack_batch(HalfFormat, const void*, const UnpackItem*, int, int, void*) { return kNoDevice; }
int quant8_compress(const float*, float*, std::size_t, std::size_t, void*, void*, const Rounding&) {
  return kNoDevice;
}
int quant8_decompress(const void*, std::size_t, std::size_t, float*, int, void*) {
  return kNoDevice;
}
int quant8_accumulate(const void*, std::size_t, std::size_t, float*, void*) { return kNoDevice; }
int fixed_order_norm(const float*, std::size_t, double*, void*, void*) { return kNoDevice; }
int fixed_order_norm(HalfFormat, const std::uint16_t*, std::size_t, double*, void*, void*) {
  return kNoDevice;
}
int quant8_minmax_compress(const float*, float*, std::size_t, std::size_t, void*, void*,
                           const Rounding&) {
  return kNoDevice;
}
int quant8_minmax_decompress(const void*, std::size_t, std::size_t, float*, int, void*) {
  return kNoDevice;
}
int quant8_minmax_accumulate(const void*, std::size_t, std::size_t, float*, void*) {
  return kNoDevice;
}
int quant_packed_compress(const float*, float*, std::size_t, std::size_t, int, void*, void*,
                          const Rounding&) {
  return kNoDevice;
}
int quant_packed_decompress(const void*, std::size_t, std::size_t, int, float*, int, void*) {
  return kNoDevice;
}
int quant_packed_accumulate(const void*, std::size_t, std::size_t, int, float*, void*) {
  return kNoDevice;
}
int quant_packed_minmax_compress(const float*, float*, std::size_t, std::size_t, int, void*, void*,
                                 const Rounding&) {
  return kNoDevice;
}
int quant_packed_minmax_decompress(const void*, std::size_t, std::size_t, int, float*, int, void*) {
  return kNoDevice;
}
int quant_packed_minmax_accumulate(const void*, std::size_t, std::size_t, int, float*, void*) {
  return kNoDevice;
}
int quant_fp8_compress(const float*, float*, std::size_t, std::size_t, void*, void*) {
  return kNoDevice;
}
int quant_fp8_decompress(const void*, std::size_t, std::size_t, float*, int, void*) {
  return kNoDevice;
}
int quant_fp8_accumulate(const void*, std::size_t, std::size_t, float*, void*) { return kNoDevice; }
std::size_t topk_select_scratch_bytes(std::size_t) { return 0; }
int topk_select(Elem, const void*, float*, std::size_t, std::size_t, bool, void*, std::size_t,
                void*, void*) {
  return kNoDevice;
}
std::size_t topk_accumulate_scratch_bytes(std::size_t, int) { return 0; }
int topk_accumulate(const void*, std::size_t, int, std::size_t, bool, std::size_t, Elem, void*, int,
                    void*, void*) {
  return kNoDevice;
}

bool low_rank_available(std::string* why) {
  if (why) *why = "a build without CUDA";
  return false;
}
int low_rank_add(const float*, const float*, float*, std::size_t, void*) { return kNoDevice; }
int low_rank_project(const float*, const LowRankShape&, const float*, float*, void*) {
  return kNoDevice;
}
int low_rank_back_project(const float*, const LowRankShape&, const float*, float*, void*) {
  return kNoDevice;
}
int orthonormalise(float*, std::size_t, std::size_t, void*) { return kNoDevice; }
int low_rank_finish(const float*, const LowRankShape&, const float*, const float*, const float*,
                    float*, float*, void*) {
  return kNoDevice;
}

std::size_t topk_split_scratch_bytes(int) { return 0; }
int topk_split_parts(const void*, std::size_t, bool, std::size_t, int, void*, std::uint64_t*, void*,
                     void*) {
  return kNoDevice;
}
int topk_add_part(const void*, std::size_t, bool, std::size_t, float*, void*) { return kNoDevice; }
int owner_cast16(const float*, float*, std::size_t, void*, unsigned*, std::uint32_t, std::uint32_t,
                 void*) {
  return kNoDevice;
}
int owner_decode16(const void*, std::size_t, float*, int, std::uint32_t, void*) {
  return kNoDevice;
}
int zero_bytes(void*, std::size_t, void*) { return kNoDevice; }
int flag_not_finite(const float*, std::size_t, unsigned*, void*) { return kNoDevice; }
int low_rank_settle(const unsigned*, float*, float*, std::size_t, int, const float*, float*,
                    std::size_t, void*) {
  return kNoDevice;
}

}  // namespace slimreduce::kernels::device
