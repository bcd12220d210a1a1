// Timings of every CUDA kernel with CUDA events (median of many runs), next
// to a device-to-device copy of the same run: the GB/s and the share of the
// copy's bandwidth that bench/device_check.sh prints as "time ..." lines.
#include "bench/device_check_util.cuh"

namespace slimreduce::device_check {
void time_all(std::size_t n) {
  auto a = dev(n * 4), b = dev(n * 4), r = dev(n * 4), h = dev(n * 2);
  put(a.get(), values(n, false));
  put(r.get(), values(n, false));
  auto* fa = reinterpret_cast<float*>(a.get());
  auto* fb = reinterpret_cast<float*>(b.get());
  auto* fr = reinterpret_cast<float*>(r.get());
  auto* hh = reinterpret_cast<u16*>(h.get());
  const float copy =
      median_ms([&] { CK(cudaMemcpyAsync(fb, fa, n * 4, cudaMemcpyDeviceToDevice)); });
  const double copy_gbs = 8.0 * n / copy / 1e6;
  auto line = [&](const char* what, double bytes, float ms) {
    const double gbs = bytes / ms / 1e6;
    std::printf("time %-34s %9.3f ms %8.0f GB/s %5.0f%% of copy\n", what, ms, gbs,
                100.0 * gbs / copy_gbs);
  };
  const std::string copy_what = "d2d copy " + std::to_string(n * 4 >> 20) + " MiB (read+write)";
  line(copy_what.c_str(), 8.0 * n, copy);
  // The write side alone: kernels that write more than they read (widening
  // fp16, int8 decoding) stay below the copy's rate; is that the writes' ceiling?
  const std::string memset_what = "memset " + std::to_string(n * 4 >> 20) + " MiB (write only)";
  line(memset_what.c_str(), 4.0 * n, median_ms([&] { CK(cudaMemsetAsync(fb, 0x3c, n * 4)); }));
  line("cast_compress fp16", 6.0 * n,
       median_ms([&] { CK(cu::cast_compress(cu::Elem::fp16, fa, nullptr, hh, n, nullptr)); }));
  line("cast_compress bf16 +EF", 14.0 * n,
       median_ms([&] { CK(cu::cast_compress(cu::Elem::bf16, fa, fr, hh, n, nullptr)); }));
  line("cast_decompress fp16", 6.0 * n,
       median_ms([&] { CK(cu::cast_decompress(cu::Elem::fp16, hh, fb, n, 1, nullptr)); }));
  line("cast_accumulate bf16", 6.0 * n, median_ms([&] {
         CK(cu::cast_accumulate(cu::Elem::bf16, hh, reinterpret_cast<u16*>(fb), n, nullptr));
       }));
  std::vector<cu::PackItem> items;
  for (int t = 0; t < 64; ++t)
    items.push_back({fa + t * (n / 64), fr + t * (n / 64), n / 64, t * (n / 64), 0});
  line("pack_batch 64 tensors fp16 +EF", 14.0 * n,
       median_ms([&] { CK(cu::pack_batch(cu::Elem::fp16, items.data(), 64, hh, nullptr)); }));
  auto q8 = dev(k::quant8_bytes(n, 512));
  line("quant8_compress b512 (in r, block w)", 5.0 * n,
       median_ms([&] { CK(cu::quant8_compress(fa, nullptr, n, 512, q8.get(), nullptr)); }));
  line("quant8_compress b512 +EF (res r/w)", 13.0 * n,
       median_ms([&] { CK(cu::quant8_compress(fa, fr, n, 512, q8.get(), nullptr)); }));
  line("quant8_decompress b512 /4", 5.0 * n,
       median_ms([&] { CK(cu::quant8_decompress(q8.get(), n, 512, fb, 4, nullptr)); }));
  line("quant8_accumulate b512 (dense r/w)", 9.0 * n,
       median_ms([&] { CK(cu::quant8_accumulate(q8.get(), n, 512, fb, nullptr)); }));
  const std::size_t kk = k::topk_count(n, 0.01);
  const std::size_t stride =
      cu::topk_payload_stride(k::topk_payload_bytes(kk, k::TopkValues::fp32));
  auto pay = dev(stride * 8), scratch = dev(cu::topk_select_scratch_bytes(n));
  line("topk_select 1% +EF (in, res r/w)", 12.0 * n,
       median_ms(
           [&] {
             CK(cu::topk_select(cu::Elem::fp32, fa, fr, n, kk, false, pay.get(), stride,
                                scratch.get(), nullptr));
           },
           10));
  line("topk_select 1% no EF (in)", 4.0 * n,
       median_ms(
           [&] {
             CK(cu::topk_select(cu::Elem::fp32, fa, nullptr, n, kk, false, pay.get(), stride,
                                scratch.get(), nullptr));
           },
           10));
  for (int rank = 1; rank < 8; ++rank) {  // eight ranks sending the same payload
    CK(cudaMemcpy(pay.get() + rank * stride, pay.get(), stride, cudaMemcpyDeviceToDevice));
  }
  auto acc_scratch = dev(cu::topk_accumulate_scratch_bytes(n, 8));
  line("topk_accumulate 8 ranks (out write)", 4.0 * n + 8.0 * stride, median_ms([&] {
         CK(cu::topk_accumulate(pay.get(), stride, 8, kk, false, n, cu::Elem::fp32, fb, 1,
                                acc_scratch.get(), nullptr));
       }));
  time_low_rank(n, copy_gbs);
}

}  // namespace slimreduce::device_check
