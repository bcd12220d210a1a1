// Checks every CUDA kernel against its CPU twin on fresh random inputs, then
// times them with CUDA events against a device-to-device copy of the same
// run. Casts, selection and ordered accumulation must match bit for bit;
// the simulated multi-rank ring sum is also held to a stated tolerance
// against an fp64 sum. Outputs are poisoned (0xA5 bytes) before every kernel,
// so an element never written shows. Run by bench/device_check.sh on a GPU;
// prints "check ..." and "time ..." lines, then "device_check: N passed, M failed".
#include "bench/device_check_util.cuh"

namespace slimreduce::device_check {
namespace {

// ---- casts --------------------------------------------------------------------

// in_offset/out_offset/res_offset: elements past a 16-byte boundary (the
// vector path needs every pointer aligned; any other mix runs the scalar path
// for all of it).
void check_compress(cu::Elem f, bool ef, std::size_t n, std::size_t in_offset,
                    std::size_t out_offset, std::size_t res_offset = 0) {
  const std::vector<float> in = values(n, true);
  std::vector<float> res = values(n, false);
  auto din = dev(n * 4 + in_offset * 4), dres = dev(n * 4 + res_offset * 4),
       dout = dev(n * 2 + out_offset * 2);
  float* gin = reinterpret_cast<float*>(din.get()) + in_offset;
  u16* gout = reinterpret_cast<u16*>(dout.get()) + out_offset;
  float* gres_at = reinterpret_cast<float*>(dres.get()) + res_offset;
  put(gin, in);
  put(gres_at, res);
  poison(gout, n * 2);
  float* gres = ef ? gres_at : nullptr;
  CK(cu::cast_compress(f, gin, gres, gout, n, nullptr));
  std::vector<u16> want(n);
  k::compress(host_format(f), in.data(), ef ? res.data() : nullptr, want.data(), n, k::Isa::scalar);
  std::string where;
  bool ok = same_bits(get<u16>(gout, n), want, &where);
  if (ok && ef) ok = same_bits(get<float>(gres_at, n), res, &where);
  report(std::string("cast_compress ") + name_of(f) + (ef ? " +EF" : "") +
             " n=" + std::to_string(n) + (in_offset ? " in+" + std::to_string(in_offset) : "") +
             (out_offset ? " out+" + std::to_string(out_offset) : "") +
             (res_offset ? " res+" + std::to_string(res_offset) : ""),
         ok, where);
}

// offset: input and output start one element past a 16-byte boundary, and
// the count leaves a tail (the scalar path).
void check_decompress(cu::Elem f, int divisor, std::size_t offset = 0) {
  std::vector<u16> in(65536 * 4 - 3 * offset);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<u16>(i < 65536 ? i : rng());
  auto din = dev(in.size() * 2 + offset * 2), dout = dev(in.size() * 4 + offset * 4);
  u16* gin = reinterpret_cast<u16*>(din.get()) + offset;
  float* gout = reinterpret_cast<float*>(dout.get()) + offset;
  put(gin, in);
  poison(gout, in.size() * 4);
  CK(cu::cast_decompress(f, gin, gout, in.size(), divisor, nullptr));
  std::vector<float> want(in.size());
  k::decompress(host_format(f), in.data(), want.data(), in.size(), k::Isa::scalar);
  std::vector<float> got = get<float>(gout, in.size());
  bool ok = true;
  std::string where;
  for (std::size_t i = 0; ok && i < in.size(); ++i) {
    // Divided NaNs keep their payload (divide_keeping_nan): bit for bit.
    const float w = k::divide_keeping_nan(want[i], divisor);
    ok = k::float_bits(got[i]) == k::float_bits(w);
    if (!ok) where = "pattern " + std::to_string(in[i]);
  }
  report(std::string("cast_decompress ") + name_of(f) + " /" + std::to_string(divisor) +
             " (all patterns)" + (offset ? " misaligned" : ""),
         ok, where);
}

void check_accumulate(cu::Elem f) {
  const std::size_t n = 2'000'003;
  std::vector<u16> a = halves(n);
  std::vector<u16> b = halves(n);
  // Opposite infinities, which random halves meet too rarely: the GPU's own
  // NaN would differ from the CPU's (add_nan_first fixes it).
  const u16 plus_inf = f == cu::Elem::bf16 ? 0x7f80 : 0x7c00;
  for (std::size_t i = 0; i < n; i += 997) {
    a[i] = plus_inf;
    b[i] = plus_inf | 0x8000;
  }
  auto da = dev(n * 2), db = dev(n * 2);
  put(da.get(), a);
  put(db.get(), b);
  CK(cu::cast_accumulate(f, reinterpret_cast<u16*>(da.get()), reinterpret_cast<u16*>(db.get()), n,
                         nullptr));
  k::accumulate(host_format(f), a.data(), b.data(), n, k::Isa::scalar);
  std::string where;
  report(std::string("cast_accumulate ") + name_of(f), same_bits(get<u16>(db.get(), n), b, &where),
         where);
}

// Four ranks through the ring rule (fp32 add, one rounding per hop) on the GPU:
// bit-exact against the CPU chain, and within a stated tolerance of fp64.
void check_ring_sum(cu::Elem f, double tolerance) {
  const std::size_t n = 1 << 20;
  const int ranks = 4;
  std::vector<std::vector<u16>> wire(ranks, std::vector<u16>(n));
  std::vector<double> exact(n, 0.0);
  auto dacc = dev(n * 2), dwire = dev(n * 2), dout = dev(n * 4), din = dev(n * 4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> x(n);  // within fp16's range: the tolerance is about rounding
    for (auto& v : x) v = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 16) - 10);
    for (std::size_t i = 0; i < n; ++i) exact[i] += x[i];
    k::compress(host_format(f), x.data(), nullptr, wire[r].data(), n, k::Isa::scalar);
    put(din.get(), x);
    u16* target = reinterpret_cast<u16*>(r == 0 ? dacc.get() : dwire.get());
    CK(cu::cast_compress(f, reinterpret_cast<float*>(din.get()), nullptr, target, n, nullptr));
    if (r > 0) {
      CK(cu::cast_accumulate(f, reinterpret_cast<u16*>(dwire.get()),
                             reinterpret_cast<u16*>(dacc.get()), n, nullptr));
      k::accumulate(host_format(f), wire[r].data(), wire[0].data(), n, k::Isa::scalar);
    }
  }
  poison(dout.get(), n * 4);
  CK(cu::cast_decompress(f, reinterpret_cast<u16*>(dacc.get()),
                         reinterpret_cast<float*>(dout.get()), n, 1, nullptr));
  const std::vector<float> got = get<float>(dout.get(), n);
  double num = 0, den = 0;
  bool bits = true;
  for (std::size_t i = 0; i < n; ++i) {
    num += (got[i] - exact[i]) * (got[i] - exact[i]);
    den += exact[i] * exact[i];
    bits = bits && k::float_bits(got[i]) == k::float_bits(widen(f, wire[0][i]));
  }
  const double rel = std::sqrt(num / den);
  char detail[96];
  std::snprintf(detail, sizeof detail, "|out-ref|/|ref| = %.2e (limit %.0e), CPU chain %s", rel,
                tolerance, bits ? "bit-exact" : "DIFFERS");
  report(std::string("ring sum of 4 ranks ") + name_of(f), bits && rel <= tolerance, detail);
}

// Many tensors into one fusion buffer and back, against the CPU twin
// (kernels/pack.h) bit for bit, pads included: sizes from 0 up, at offsets
// that leave some tensors 16-byte aligned (the vector path) and most not
// (the scalar path), error feedback on every other one.
void check_pack(cu::Elem f, int divisor) {
  const int count = 100;
  const std::size_t width = f == cu::Elem::fp32 ? 4 : 2;
  std::vector<cu::PackItem> items, host_items;
  std::vector<cu::UnpackItem> outs, host_outs;
  std::vector<std::vector<float>> in(count), res(count), host_out(count);
  std::size_t total = 0, in_total = 0;
  for (int t = 0; t < count; ++t) {
    const std::size_t n = t == 0 ? 0 : rng() % 50'000;
    in[t] = values(n, true);
    res[t] = values(n, false);
    host_out[t].assign(n, 0.0f);
    const std::size_t pad = cu::fusion_align(n) - n;
    items.push_back({nullptr, nullptr, n, total, pad});
    host_items.push_back({in[t].data(), t % 2 ? res[t].data() : nullptr, n, total, pad});
    outs.push_back({nullptr, n, total});
    host_outs.push_back({host_out[t].data(), n, total});
    total += cu::fusion_align(n);
    in_total += n + 1;
  }
  auto din = dev(in_total * 4), dres = dev(in_total * 4), dout = dev(in_total * 4);
  auto dfused = dev(total * width);
  std::size_t at = 0;
  for (int t = 0; t < count; ++t) {
    at += t % 3 == 0;  // with the random sizes: about one tensor in four is 16-byte aligned
    float* p = reinterpret_cast<float*>(din.get()) + at;
    float* r = reinterpret_cast<float*>(dres.get()) + at;
    put(p, in[t]);
    put(r, res[t]);
    items[t].in = p;
    items[t].residual = t % 2 ? r : nullptr;
    outs[t].out = reinterpret_cast<float*>(dout.get()) + at;
    at += in[t].size();
  }
  const k::FusedType host_type = f == cu::Elem::fp32   ? k::FusedType::fp32
                                 : f == cu::Elem::fp16 ? k::FusedType::fp16
                                                       : k::FusedType::bf16;
  std::vector<std::uint8_t> want(total * width, 0xA5);  // poisoned like the device buffer
  k::pack_batch(host_type, host_items.data(), count, want.data(), k::Isa::scalar);
  poison(dfused.get(), total * width);
  CK(cu::pack_batch(f, items.data(), count, dfused.get(), nullptr));
  std::string where;
  bool ok = same_bits(get<std::uint8_t>(dfused.get(), total * width), want, &where);
  for (int t = 1; ok && f != cu::Elem::fp32 && t < count; t += 2) {
    ok = same_bits(get<float>(items[t].residual, in[t].size()), res[t], &where);
  }
  report(std::string("pack_batch ") + name_of(f) + " 100 tensors" +
             (f == cu::Elem::fp32 ? "" : " +EF"),
         ok, where);
  poison(dout.get(), in_total * 4);
  CK(cu::unpack_batch(f, dfused.get(), outs.data(), count, divisor, nullptr));
  k::unpack_batch(host_type, want.data(), host_outs.data(), count, divisor, k::Isa::scalar);
  ok = true;
  for (int t = 0; ok && t < count; ++t) {
    const std::vector<float> got = get<float>(outs[t].out, host_out[t].size());
    for (std::size_t i = 0; ok && i < got.size(); ++i) {
      ok = k::float_bits(got[i]) == k::float_bits(host_out[t][i]);
      if (!ok) where = "tensor " + std::to_string(t) + " element " + std::to_string(i);
    }
  }
  report(std::string("unpack_batch ") + name_of(f) + " 100 tensors /" + std::to_string(divisor), ok,
         where);
}

// ---- top-k ------------------------------------------------------------------------

struct TopkCase {
  const char* name;
  std::size_t n;
  double ratio;
  bool ef, fp16_values, specials, ties;
  cu::Elem in_type;
  std::size_t offset;
};

void check_topk(const TopkCase& c) {
  const std::size_t n = c.n, kk = k::topk_count(n, c.ratio);
  const auto tv = c.fp16_values ? k::TopkValues::fp16 : k::TopkValues::fp32;
  std::vector<float> in = values(n, c.specials);
  if (c.ties) {
    for (auto& x : in) x = static_cast<float>(static_cast<int>(rng() % 5) - 2);
  }
  std::vector<u16> in16(n);
  if (c.in_type != cu::Elem::fp32) {  // the CPU twin selects from the widened values
    for (std::size_t i = 0; i < n; ++i) {
      in16[i] = narrow(c.in_type, in[i]);
      in[i] = widen(c.in_type, in16[i]);
    }
  }
  std::vector<float> res = values(n, false);
  // A residual would break the ties (acc = in + residual); a zero one keeps
  // them, and the residual's path is still taken.
  if (c.ties) std::fill(res.begin(), res.end(), 0.0f);
  const std::size_t bytes = k::topk_payload_bytes(kk, tv), stride = cu::topk_payload_stride(bytes);
  auto din = dev(n * 4 + 64), dres = dev(n * 4), dpay = dev(stride),
       dscratch = dev(cu::topk_select_scratch_bytes(n));
  std::byte* gin = din.get() + c.offset * (c.in_type == cu::Elem::fp32 ? 4 : 2);
  if (c.in_type == cu::Elem::fp32)
    put(gin, in);
  else
    put(gin, in16);
  put(dres.get(), res);
  poison(dpay.get(), stride);
  float* gres = c.ef ? reinterpret_cast<float*>(dres.get()) : nullptr;
  CK(cu::topk_select(c.in_type, gin, gres, n, kk, c.fp16_values, dpay.get(), stride, dscratch.get(),
                     nullptr));
  std::vector<std::uint8_t> want(stride, 0);
  k::TopkScratch scratch;
  k::topk_compress(in.data(), c.ef ? res.data() : nullptr, n, kk, tv, want.data(), scratch);
  std::string where;
  bool ok = same_bits(get<std::uint8_t>(dpay.get(), stride), want, &where);
  if (ok && c.ef) ok = same_bits(get<float>(dres.get(), n), res, &where);
  report(std::string("topk_select ") + c.name + " k=" + std::to_string(kk), ok, where);
}

// corrupt: one index of rank 1's payload past n, which the kernel's own
// check must catch (every value NaN: kernels::topk_accumulate_gathered).
void check_topk_accumulate(cu::Elem out_type, int divisor, bool fp16_values,
                           std::size_t n = 1'000'003, int ranks = 5, double ratio = 0.02,
                           bool corrupt = false) {
  const std::size_t kk = k::topk_count(n, ratio);
  const auto tv = fp16_values ? k::TopkValues::fp16 : k::TopkValues::fp32;
  const std::size_t bytes = k::topk_payload_bytes(kk, tv), stride = cu::topk_payload_stride(bytes);
  std::vector<std::uint8_t> gathered(stride * ranks, 0);
  std::vector<float> sum(n, 0.0f);
  k::TopkScratch scratch;
  for (int r = 0; r < ranks; ++r) {
    std::vector<float> in = values(n, false);
    // Ranks 0 and 1 send opposite infinities and different NaNs at the same
    // indices: the sums must follow add_nan_first, not the GPU's own NaN.
    const float inf = std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; r < 2 && i < n; i += 4099) in[i] = r == 0 ? inf : -inf;
    for (std::size_t i = 2048; r < 2 && i < n; i += 4099) in[i] = k::bits_float(0x7fc00010u + r);
    k::topk_compress(in.data(), nullptr, n, kk, tv, gathered.data() + r * stride, scratch);
    k::topk_accumulate(gathered.data() + r * stride, kk, tv, sum.data());
  }
  if (corrupt) {
    const auto past = static_cast<std::uint32_t>(n);
    std::memcpy(gathered.data() + stride + 3 * sizeof past, &past, sizeof past);
    k::topk_accumulate_gathered(gathered.data(), stride, ranks, kk, tv, n, sum.data());
  }
  auto dg = dev(gathered.size()), dout = dev(n * 4),
       dscratch = dev(cu::topk_accumulate_scratch_bytes(n, ranks));
  put(dg.get(), gathered);
  poison(dout.get(), n * 4);
  CK(cu::topk_accumulate(dg.get(), stride, ranks, kk, fp16_values, n, out_type, dout.get(), divisor,
                         dscratch.get(), nullptr));
  std::string where;
  bool ok;
  for (auto& x : sum) x = k::divide_keeping_nan(x, divisor);
  if (out_type == cu::Elem::fp32) {
    ok = same_bits(get<float>(dout.get(), n), sum, &where);
  } else {
    std::vector<u16> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = narrow(out_type, sum[i]);
    ok = same_bits(get<u16>(dout.get(), n), want, &where);
  }
  report(std::string("topk_accumulate ") + std::to_string(ranks) + " ranks n=" + std::to_string(n) +
             " k=" + std::to_string(kk) + " -> " + name_of(out_type) + " /" +
             std::to_string(divisor) + (fp16_values ? " fp16 values" : "") +
             (corrupt ? ", a corrupt payload: NaN" : ""),
         ok, where);
}

// ---- 8-bit quantization -------------------------------------------------------------

// A block's bytes at `offset` past a 16-byte boundary (1: every scale misaligned).
struct Quant8Case {
  const char* name;
  std::size_t n, bucket;
  bool ef;
  std::size_t offset;
};

std::string quant8_name(const char* what, const Quant8Case& c, bool with_ef = false) {
  return std::string(what) + (*c.name ? " " : "") + c.name + " n=" + std::to_string(c.n) +
         " bucket=" + std::to_string(c.bucket) + (with_ef && c.ef ? " +EF" : "") +
         (c.offset ? " block+" + std::to_string(c.offset) : "");
}

void check_quant8_compress(const Quant8Case& c, const k::Rounding& rounding = {}) {
  const std::vector<float> in = values(c.n, true);
  std::vector<float> res = values(c.n, false);
  const std::size_t bytes = k::quant8_bytes(c.n, c.bucket);
  auto din = dev(c.n * 4), dres = dev(c.n * 4), dout = dev(bytes + c.offset);
  put(din.get(), in);
  put(dres.get(), res);
  std::byte* gout = dout.get() + c.offset;
  poison(gout, bytes);
  float* gres = c.ef ? reinterpret_cast<float*>(dres.get()) : nullptr;
  CK(cu::quant8_compress(reinterpret_cast<float*>(din.get()), gres, c.n, c.bucket, gout, nullptr,
                         rounding));
  std::vector<std::uint8_t> want(bytes);
  k::quant8_compress(in.data(), c.ef ? res.data() : nullptr, c.n, c.bucket, want.data(),
                     k::Isa::scalar, rounding);
  std::string where;
  bool ok = same_bits(get<std::uint8_t>(gout, bytes), want, &where);
  if (ok && c.ef) ok = same_bits(get<float>(dres.get(), c.n), res, &where);
  report(quant8_name("quant8_compress", c, true) + rounding_suffix(rounding), ok, where);
}

// A block no compress wrote: every code byte, scales of many magnitudes (and 0).
std::vector<std::uint8_t> quant8_block(std::size_t n, std::size_t bucket) {
  std::vector<std::uint8_t> block(k::quant8_bytes(n, bucket));
  for (auto& b : block) b = static_cast<std::uint8_t>(rng());
  for (std::size_t j = 0; j < k::quant8_buckets(n, bucket); ++j) {
    const float scale = j % 7 == 0 ? 0.0f
                                   : std::ldexp(1.0f + (rng() % 4096) / 4096.0f,
                                                static_cast<int>(rng() % 200) - 100);
    std::memcpy(&block[4 * j], &scale, 4);
  }
  return block;
}

// Decompress with a divisor (c.ef unused), then `ranks` blocks accumulated in
// order into values with NaNs and infinities of their own.
void check_quant8_decode(const Quant8Case& c, int divisor, int ranks) {
  const std::size_t bytes = k::quant8_bytes(c.n, c.bucket);
  auto dblock = dev(bytes + c.offset), dout = dev(c.n * 4);
  std::byte* gblock = dblock.get() + c.offset;
  auto* gout = reinterpret_cast<float*>(dout.get());
  std::vector<std::uint8_t> block = quant8_block(c.n, c.bucket);
  put(gblock, block);
  poison(gout, c.n * 4);
  CK(cu::quant8_decompress(gblock, c.n, c.bucket, gout, divisor, nullptr));
  std::vector<float> want(c.n);
  k::quant8_decompress(block.data(), c.n, c.bucket, want.data(), k::Isa::scalar);
  for (auto& x : want) x = k::divide_keeping_nan(x, divisor);
  std::string where;
  report(quant8_name("quant8_decompress", c) + " /" + std::to_string(divisor),
         same_bits(get<float>(gout, c.n), want, &where), where);

  std::vector<float> sum = values(c.n, true);
  put(gout, sum);
  for (int r = 0; r < ranks; ++r) {
    if (r > 0) block = quant8_block(c.n, c.bucket);
    put(gblock, block);
    CK(cu::quant8_accumulate(gblock, c.n, c.bucket, gout, nullptr));
    k::quant8_accumulate(block.data(), c.n, c.bucket, sum.data(), k::Isa::scalar);
  }
  report(quant8_name("quant8_accumulate", c) + " " + std::to_string(ranks) + " ranks",
         same_bits(get<float>(gout, c.n), sum, &where), where);
}

}  // namespace
}  // namespace slimreduce::device_check

using namespace slimreduce::device_check;

int main(int argc, char** argv) {
  // --no-timing: the checks only; --timing-elements=N: time on N floats
  // (default 64 Mi: 256 MiB, far past the L2), as the host simulation does on few.
  bool timing = true;
  std::size_t timing_elements = std::size_t{64} << 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-timing") == 0) timing = false;
    if (std::strncmp(argv[i], "--timing-elements=", 18) == 0)
      timing_elements = std::strtoull(argv[i] + 18, nullptr, 10);
  }
  int device = 0, devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 77;  // as nccl_app and mpi_device_app: device_check.sh's row says SKIP
  }
  cudaDeviceProp prop{};
  CK(cudaGetDevice(&device));
  CK(cudaGetDeviceProperties(&prop, device));
  std::printf("device %s, sm_%d%d, %d SMs, SLIMREDUCE_CHECK_SEED=%llu\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount, static_cast<unsigned long long>(seed));
  for (cu::Elem f : {cu::Elem::fp16, cu::Elem::bf16}) {
    check_compress(f, false, 3'000'001, 0, 0);
    check_compress(f, true, 3'000'001, 0, 0);
    check_compress(f, true, 3'000'001, 1, 1);
    check_compress(f, true, 3'000'001, 0, 3);     // aligned input, misaligned output
    check_compress(f, true, 3'000'001, 2, 0);     // the other way round
    check_compress(f, true, 3'000'001, 0, 0, 1);  // only the residual misaligned
    for (const std::size_t small : {1, 7, 8, 9, 17}) check_compress(f, true, small, 0, 0);
    check_decompress(f, 1);
    check_decompress(f, 3);
    check_decompress(f, 1, 1);
    check_accumulate(f);
    check_ring_sum(f, f == cu::Elem::fp16 ? 2e-3 : 1.6e-2);
    check_pack(f, 1);
    check_pack(f, 3);
  }
  check_pack(cu::Elem::fp32, 1);
  check_pack(cu::Elem::fp32, 4);
  const TopkCase cases[] = {
      {"fp32 1% +EF", 4'000'000, 0.01, true, false, false, false, cu::Elem::fp32, 0},
      {"fp32 0.1% +EF fp16 values", 4'000'000, 0.001, true, true, false, false, cu::Elem::fp32, 0},
      {"fp32 ties (5 values) +EF", 3'000'017, 0.01, true, false, false, true, cu::Elem::fp32, 0},
      {"fp32 ties (5 values) no EF", 3'000'017, 0.01, false, false, false, true, cu::Elem::fp32, 0},
      {"fp32 no EF misaligned", 1'000'003, 0.01, false, false, true, false, cu::Elem::fp32, 1},
      {"fp32 NaN/inf/subnormal +EF", 2'000'000, 0.05, true, false, true, false, cu::Elem::fp32, 0},
      {"fp32 50% misaligned", 1'000'007, 0.5, true, false, false, false, cu::Elem::fp32, 1},
      {"fp32 k=n", 100'003, 1.0, true, false, false, false, cu::Elem::fp32, 0},
      {"fp32 k=1", 5'000'000, 1e-9, true, false, false, false, cu::Elem::fp32, 0},
      {"fp16 input +EF", 2'000'001, 0.01, true, false, false, false, cu::Elem::fp16, 0},
      {"fp16 input no EF", 2'000'001, 0.01, false, false, false, false, cu::Elem::fp16, 1},
      {"bf16 input no EF", 2'000'001, 0.01, false, true, true, false, cu::Elem::bf16, 3},
      {"bf16 input +EF", 2'000'001, 0.01, true, true, true, false, cu::Elem::bf16, 0},
      // Past 2 x 1056 tiles of 4096: blocks take several tiles each.
      {"fp32 several tiles a block", 9'000'001, 0.001, true, false, false, false, cu::Elem::fp32,
       0},
      {"fp32 n=1", 1, 0.01, true, false, false, false, cu::Elem::fp32, 0},
      {"fp32 n=7 ties", 7, 0.5, true, true, false, true, cu::Elem::fp32, 1},
      {"fp32 one tile + 1", 4097, 0.3, true, false, true, false, cu::Elem::fp32, 0},
  };
  for (const TopkCase& c : cases) check_topk(c);
  check_topk_accumulate(cu::Elem::fp32, 1, false);
  check_topk_accumulate(cu::Elem::fp32, 5, true);
  check_topk_accumulate(cu::Elem::fp16, 1, false);
  check_topk_accumulate(cu::Elem::bf16, 5, false);
  check_topk_accumulate(cu::Elem::fp32, 1, false, 5, 1, 1.0);  // n < 8, one rank, k = n
  check_topk_accumulate(cu::Elem::fp32, 1, false, 1'000'003, 3, 0.02, true);
  check_topk_accumulate(cu::Elem::bf16, 3, true, 100'000, 3, 0.01, true);
  check_topk_accumulate(cu::Elem::fp32, 3, true, 2049, 3, 0.5);  // one segment + 1
  check_topk_accumulate(cu::Elem::fp16, 1, false, 100'000, 64, 0.01);
  check_topk_accumulate(cu::Elem::fp32, 1, false, 4'500'001, 2, 0.01);  // several segments a block
  const Quant8Case quant8_cases[] = {
      {"", 3'000'017, 512, false, 0},
      {"", 3'000'017, 512, true, 0},
      {"misaligned", 3'000'017, 512, true, 1},
      {"", 1'000'003, 4096, true, 3},
      {"block per bucket", 1'000'003, 4097, true, 2},
      {"few buckets", 2'000'000, 1 << 20, true, 0},
      {"", 100'003, 7, true, 1},
      {"", 10'007, 1, false, 0},
      {"one value", 1, 512, true, 0},
      {"", 511, 512, true, 0},
  };
  for (const Quant8Case& c : quant8_cases) check_quant8_compress(c);
  for (const int i : {1, 2, 6}) check_quant8_compress(quant8_cases[i], stochastic_key());
  check_quant8_decode(quant8_cases[0], 1, 4);
  check_quant8_decode(quant8_cases[2], 3, 2);
  check_quant8_decode(quant8_cases[4], 5, 3);
  check_quant8_decode(quant8_cases[6], 1, 2);
  check_quant8_minmax();
  check_quant_fp8();
  check_fixed_order_norm();
  check_quant_packed();
  check_low_rank();
  check_topk_shards();
  if (timing && timing_elements >= 64) time_all(timing_elements);
  std::printf("device_check: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
