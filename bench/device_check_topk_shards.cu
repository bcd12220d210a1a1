// Top-k's sharded steps on the GPU (kernels/cuda/topk_shards.cu) against
// their CPU twins, bit for bit: a payload cut into parts (kernels::
// topk_split_parts), a part added into a shard (kernels::topk_accumulate's
// adds), and an owner's dense 16-bit result (the overflow test, the cast with
// its residual, the tag) and its decoding.
#include "bench/device_check_util.cuh"

namespace slimreduce::device_check {
namespace {

constexpr std::uint32_t kFp16Tag = 1, kBf16Tag = 2;  // compressors/topk_shards.h's OwnerFormat

// A payload as topk_compress writes it, from values where `skew` puts every
// large magnitude into the first 1/ranks of the index space.
std::vector<std::uint8_t> payload_of(std::size_t n, std::size_t kk, k::TopkValues tv, int ranks,
                                     bool skew) {
  std::vector<float> in = values(n, true);
  if (skew) {
    const std::size_t first = k::topk_shard_begin(n, ranks, 1);
    for (std::size_t i = first; i < n; ++i) in[i] *= 1e-30f;
  }
  std::vector<std::uint8_t> payload(k::topk_payload_bytes(kk, tv));
  k::TopkScratch scratch;
  k::topk_compress(in.data(), nullptr, n, kk, tv, payload.data(), scratch);
  return payload;
}

void check_split(std::size_t n, double ratio, int ranks, bool fp16_values, bool skew) {
  const std::size_t kk = k::topk_count(n, ratio);
  const auto tv = fp16_values ? k::TopkValues::fp16 : k::TopkValues::fp32;
  const std::vector<std::uint8_t> payload = payload_of(n, kk, tv, ranks, skew);
  const std::size_t out_bytes = payload.size() + 3 * static_cast<std::size_t>(ranks);
  std::vector<std::uint8_t> want(out_bytes, 0);
  std::vector<std::uint64_t> want_sizes(ranks);
  k::topk_split_parts(payload.data(), kk, tv, n, ranks, want.data(), want_sizes.data());
  auto dpay = dev(payload.size()), dout = dev(out_bytes), dsizes = dev(ranks * 8),
       dscratch = dev(cu::topk_split_scratch_bytes(ranks));
  put(dpay.get(), payload);
  CK(cudaMemset(dout.get(), 0, out_bytes));  // past the parts: the twin's zeros
  poison(dsizes.get(), ranks * 8);
  CK(cu::topk_split_parts(dpay.get(), kk, fp16_values, n, ranks, dout.get(),
                          reinterpret_cast<std::uint64_t*>(dsizes.get()), dscratch.get(), nullptr));
  std::string where;
  bool ok = same_bits(get<std::uint64_t>(dsizes.get(), ranks), want_sizes, &where);
  if (ok) ok = same_bits(get<std::uint8_t>(dout.get(), out_bytes), want, &where);
  report("topk_split_parts n=" + std::to_string(n) + " k=" + std::to_string(kk) + " " +
             std::to_string(ranks) + " shards" + (fp16_values ? " fp16 values" : "") +
             (skew ? " all in shard 0" : ""),
         ok, where);
}

void check_add_parts(std::size_t n, int ranks, bool fp16_values) {
  const std::size_t kk = k::topk_count(n, 0.05);
  const auto tv = fp16_values ? k::TopkValues::fp16 : k::TopkValues::fp32;
  std::vector<float> shard = values(n, true), want = shard;
  auto dshard = dev(n * 4);
  put(dshard.get(), shard);
  for (int r = 0; r < ranks; ++r) {  // each rank's payload, added in rank order
    const std::vector<std::uint8_t> payload = payload_of(n, kk, tv, 1, false);
    k::topk_accumulate(payload.data(), kk, tv, want.data());
    auto dpart = dev(payload.size());
    put(dpart.get(), payload);
    CK(cu::topk_add_part(dpart.get(), kk, fp16_values, n, reinterpret_cast<float*>(dshard.get()),
                         nullptr));
    CK(cudaDeviceSynchronize());
  }
  std::string where;
  const bool ok = same_bits(get<float>(dshard.get(), n), want, &where);
  report("topk_add_part n=" + std::to_string(n) + " " + std::to_string(ranks) + " parts" +
             (fp16_values ? " fp16 values" : ""),
         ok, where);
}

// beyond: a finite value past fp16's range, so the result is bf16.
void check_owner_cast(std::size_t n, bool ef, bool beyond, int divisor) {
  std::vector<float> sum = values(n, false), res = values(n, false);
  for (auto& x : sum) x = std::max(-60000.0f, std::min(60000.0f, x));
  for (auto& x : res) x = std::max(-1000.0f, std::min(1000.0f, x)) * 1e-3f;
  if (beyond) sum[n / 2] = -70000.0f;
  const std::size_t bytes = 4 + n * 2;
  auto dsum = dev(n * 4), dres = dev(n * 4), dresult = dev(bytes), dwide = dev(sizeof(unsigned)),
       dout = dev(n * 4);
  put(dsum.get(), sum);
  put(dres.get(), res);
  poison(dresult.get(), bytes);
  float* gres = ef ? reinterpret_cast<float*>(dres.get()) : nullptr;
  CK(cu::owner_cast16(reinterpret_cast<float*>(dsum.get()), gres, n, dresult.get(),
                      reinterpret_cast<unsigned*>(dwide.get()), kFp16Tag, kBf16Tag, nullptr));
  std::vector<std::uint8_t> want(bytes);
  const k::HalfFormat format = beyond ? k::HalfFormat::bf16 : k::HalfFormat::fp16;
  const std::uint32_t tag = beyond ? kBf16Tag : kFp16Tag;
  std::memcpy(want.data(), &tag, 4);
  k::compress(format, sum.data(), ef ? res.data() : nullptr,
              reinterpret_cast<u16*>(want.data() + 4), n, k::Isa::scalar);
  std::string where;
  bool ok = same_bits(get<std::uint8_t>(dresult.get(), bytes), want, &where);
  if (ok && ef) ok = same_bits(get<float>(dres.get(), n), res, &where);
  CK(cu::owner_decode16(dresult.get(), n, reinterpret_cast<float*>(dout.get()), divisor, kBf16Tag,
                        nullptr));
  std::vector<float> decoded(n);
  k::decompress(format, reinterpret_cast<const u16*>(want.data() + 4), decoded.data(), n,
                k::Isa::scalar);
  for (auto& x : decoded) x = k::divide_keeping_nan(x, divisor);
  if (ok) ok = same_bits(get<float>(dout.get(), n), decoded, &where);
  report("owner_cast16 + owner_decode16 n=" + std::to_string(n) + (ef ? " +EF" : "") +
             (beyond ? " (bf16)" : " (fp16)") + " /" + std::to_string(divisor),
         ok, where);
}

}  // namespace

void check_topk_shards() {
  check_split(1'000'003, 0.01, 8, false, false);
  check_split(1'000'003, 0.01, 8, true, false);
  check_split(1'000'003, 0.01, 64, false, true);  // 63 empty parts
  check_split(100'000, 0.3, 3, true, false);
  check_split(4097, 1.0, 1, false, false);  // one shard, k = n
  check_split(17, 0.5, 32, true, false);    // shards of 0 and 1 values
  check_add_parts(250'001, 4, false);
  check_add_parts(70'001, 3, true);
  check_owner_cast(1'000'003, true, false, 1);
  check_owner_cast(1'000'003, true, true, 3);
  check_owner_cast(4099, false, true, 1);
  check_owner_cast(5, false, false, 2);
}

}  // namespace slimreduce::device_check
