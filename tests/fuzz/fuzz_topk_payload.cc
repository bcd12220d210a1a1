// libFuzzer target: a top-k payload as it may arrive from another rank
// (docs/reliability.md). The first 8 bytes choose n (the tensor's values,
// at most 4096) and k; the rest is the payload, padded with zeros to its
// size. A payload that kernels::topk_payload_valid accepts is accumulated
// into n values (AddressSanitizer sees any write out of bounds); one it
// refuses must hold an index out of range or out of order, which is checked
// here independently.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/topk.h"

namespace {

bool well_formed(const std::vector<std::uint8_t>& payload, std::size_t k, std::size_t n) {
  if (k > n) return false;
  std::uint64_t next = 0;
  for (std::size_t j = 0; j < k; ++j) {
    std::uint32_t i;
    std::memcpy(&i, payload.data() + 4 * j, 4);
    if (i < next || i >= n) return false;
    next = std::uint64_t{i} + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace slimreduce::kernels;
  if (size < 8) return 0;
  std::uint32_t n_bits, k_bits;
  std::memcpy(&n_bits, data, 4);
  std::memcpy(&k_bits, data + 4, 4);
  const std::size_t n = n_bits % 4097;
  const std::size_t k = (k_bits & 0x7fffffffu) % 4097;
  const TopkValues values = (k_bits >> 31) ? TopkValues::fp16 : TopkValues::fp32;
  std::vector<std::uint8_t> payload(topk_payload_bytes(k, values), 0);
  if (!payload.empty()) std::memcpy(payload.data(), data + 8, std::min(payload.size(), size - 8));
  const bool valid = topk_payload_valid(payload.data(), k, n);
  if (valid != well_formed(payload, k, n)) std::abort();
  if (!valid) return 0;
  std::vector<float> dense(n, 0.0f);
  topk_accumulate(payload.data(), k, values, dense.data());
  return 0;
}
