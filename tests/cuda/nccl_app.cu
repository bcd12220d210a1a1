// A CUDA job of one rank that calls ncclAllReduce the ways frameworks do
// (out of place, in place, ncclAvg, nested groups, a split communicator,
// CUDA-graph capture, misaligned and ineligible buffers, and calls left to
// NCCL: a non-blocking communicator's, a PreMulSum op, a simulated group) and checks every
// result bit for bit against the CPU twins (kernels/cast.h, kernels/topk.h,
// kernels/low_rank.h, kernels/quant8.h) under SLIMREDUCE_COMPRESSOR from the environment. With
// one rank the sum is this rank's decoded payload, so nothing needs a
// tolerance, but for PowerSGD's products on a GPU (cuBLAS: within 1e-3).
// Exit 0: all passed; 1: a check failed; 77: no GPU (ctest reports "skipped").
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "interpose/slimreduce.h"
#include "kernels/cast.h"
#include "kernels/element_rules.h"
#include "kernels/low_rank.h"
#include "kernels/quant8.h"
#include "kernels/quant8_minmax.h"
#include "kernels/quant_fp8.h"
#include "kernels/quant_packed.h"
#include "kernels/quant_packed_minmax.h"
#include "kernels/topk.h"
#include "tests/cuda/relative_difference.h"

namespace {

namespace k = slimreduce::kernels;

#define CUDA_OK(x)                                                                         \
  do {                                                                                     \
    const cudaError_t rc_ = (x);                                                           \
    if (rc_ != cudaSuccess) {                                                              \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(rc_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)
#define NCCL_OK(x)                                                                         \
  do {                                                                                     \
    const ncclResult_t rc_ = (x);                                                          \
    if (rc_ != ncclSuccess) {                                                              \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(rc_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

std::string env(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value ? value : fallback;
}

// The settings this job runs under (the few it needs, read like the library does).
struct Mode {
  std::string compressor = env("SLIMREDUCE_COMPRESSOR", "none");
  bool topk = compressor == "topk";
  bool powersgd = compressor == "powersgd";
  bool int8 = compressor == "int8";
  // int4 and int2: the quantizer's packed widths, sharded as int8 is.
  int packed_bits = compressor == "int4" ? 4 : compressor == "int2" ? 2 : 0;
  bool fp8 = compressor == "fp8";  // block-scaled e4m3, sharded as int8 is
  bool quant = int8 || packed_bits != 0 || fp8;
  // SLIMREDUCE_QUANT_CODES: width (min-max at 4 and 2 bits, absmax at 8), absmax or minmax.
  std::string quant_codes = env("SLIMREDUCE_QUANT_CODES", "width");
  bool minmax = quant_codes == "minmax" || (quant_codes == "width" && packed_bits != 0);
  // Top-k forced sharded: one rank owns the one shard (its sum selected again).
  bool topk_sharded = topk && env("SLIMREDUCE_TOPK_ALGORITHM", "auto") == std::string("sharded");
  bool ef = env("SLIMREDUCE_ERROR_FEEDBACK", topk || powersgd || quant ? "1" : "0") == "1";
  std::size_t quant_bucket =
      static_cast<std::size_t>(std::atoi(env("SLIMREDUCE_QUANT_BUCKET", "512").c_str()));
  std::size_t powersgd_rank =
      static_cast<std::size_t>(std::atoi(env("SLIMREDUCE_POWERSGD_RANK", "4").c_str()));
  // PowerSGD's products are cuBLAS's on a GPU: its results within 1e-3 of the
  // CPU loops' (relative, over the tensor) there, and bit for bit where the
  // products are the CPU loops too (the host simulation says so).
  bool exact_products = !powersgd || std::getenv("NCCL_APP_EXACT_PRODUCTS");
  double ratio = std::atof(env("SLIMREDUCE_TOPK_RATIO", "0.01").c_str());
  bool fp16_values = env("SLIMREDUCE_TOPK_VALUES", "fp32") == "fp16";
  std::size_t min_bytes = 65536;  // tests run with SLIMREDUCE_MIN_BYTES=64K
  // SLIMREDUCE_QUANT_ROUNDING=stochastic: the quantizer's draws from its seed,
  // rank 0 and each shape's call number (check_stochastic alone runs then).
  bool stochastic = env("SLIMREDUCE_QUANT_ROUNDING", "nearest") == "stochastic";
  std::uint64_t quant_seed = std::strtoull(env("SLIMREDUCE_QUANT_SEED", "0").c_str(), nullptr, 10);
};

const Mode mode;
int failures = 0;
std::mt19937 rng(12345);

// Gradient-like values with ties and zeros, so selection ties are exercised.
std::vector<float> random_values(std::size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned pick = rng() % 100;
    v[i] = pick == 0 ? 0.0f : pick == 1 ? (rng() & 1 ? 2.5f : -2.5f) : normal(rng);
  }
  return v;
}

// What the library must produce for a compressed call on one rank, keeping
// each key's residual as the library does: keyed by (communicator, receive
// buffer), reset when the count or the datatype changes.
struct Residual {
  int datatype = -1;
  std::vector<float> values;
  std::vector<float> q;      // PowerSGD's Q, kept with the key
  std::vector<float> owner;  // int8: the owner-side residual (one rank: the whole tensor)
};

k::LowRankShape low_rank_shape(std::size_t n) {
  return k::low_rank_shape(n, mode.powersgd_rank, 2.0);
}

// PowerSGD at one rank, as the NCCL path runs it: the sums of one rank are
// the factors themselves; a P or Q not finite gives NaN, a zero residual and Q kept.
std::vector<float> low_rank_reference(const std::vector<float>& in, float* residual,
                                      std::vector<float>& q) {
  const k::LowRankShape s = low_rank_shape(in.size());
  if (q.size() != s.q_floats()) {
    q.assign(s.q_floats(), 0.0f);
    k::low_rank_seed(s, q.data());
  }
  std::vector<float> m = in, p(s.p_floats()), q_local(s.q_floats()), out(in.size());
  if (residual)
    for (std::size_t e = 0; e < m.size(); ++e) m[e] = k::add_nan_first(m[e], residual[e]);
  k::low_rank_project(m.data(), s, q.data(), p.data(), k::Isa::scalar);
  bool bad = !k::all_finite(p.data(), p.size());
  k::orthonormalise(p.data(), s.rows, s.rank);
  k::low_rank_back_project(m.data(), s, p.data(), q_local.data(), k::Isa::scalar);
  bad = bad || !k::all_finite(q_local.data(), q_local.size());
  k::low_rank_finish(m.data(), s, p.data(), q_local.data(), q_local.data(), out.data(), residual,
                     k::Isa::scalar);
  k::low_rank_settle(bad, out.data(), residual, in.size(), 1, q_local.data(), q.data(),
                     q_local.size());
  return out;
}
std::map<std::pair<const void*, const void*>, Residual> residuals;
std::map<std::tuple<const void*, std::size_t, int>, std::uint64_t> shape_calls;

// A destroyed communicator's residuals go with it (a later one may reuse its address).
void forget(ncclComm_t comm) {
  for (auto it = residuals.begin(); it != residuals.end();)
    it = it->first.first == comm ? residuals.erase(it) : std::next(it);
}

// The pieces a compressed flat call is cut into (SLIMREDUCE_PARTITION_BYTES,
// 4 MiB by default), written out again: the fewest near-equal pieces of at
// most that many bytes, the first count % pieces one element longer.
std::vector<std::pair<std::size_t, std::size_t>> pieces_of(std::size_t n, std::size_t element) {
  const std::string text = env("SLIMREDUCE_PARTITION_BYTES", "4M");
  std::size_t limit = std::strtoull(text.c_str(), nullptr, 10);
  if (text.find_first_of("Kk") != std::string::npos) limit <<= 10;
  if (text.find_first_of("Mm") != std::string::npos) limit <<= 20;
  const std::size_t per_piece = std::max<std::size_t>(1, limit / element);
  const std::size_t count = (n + per_piece - 1) / per_piece;
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t length = n / count + (i < n % count ? 1 : 0);
    pieces.push_back({begin, length});
    begin += length;
  }
  return pieces;
}

// One piece (or a whole call) of n values at one rank: residual and owner
// are its stretches of the key's (nullptr: none); a quantizer rounds its own
// values with `mine` and the owner's sum with `owners`.
void reference_piece(const float* in, std::size_t n, float* residual, float* owner, int datatype,
                     bool in_graph, float* out, const k::Rounding& mine,
                     const k::Rounding& owners) {
  const k::Isa scalar = k::Isa::scalar;
  if (mode.fp8) {  // as int8, in fp8 codes (nearest only)
    std::vector<std::uint8_t> block(k::quant_fp8_bytes(n, mode.quant_bucket));
    k::quant_fp8_compress(in, residual, n, mode.quant_bucket, block.data(), scalar);
    k::quant_fp8_accumulate(block.data(), n, mode.quant_bucket, out, scalar);
    k::quant_fp8_compress(out, owner, n, mode.quant_bucket, block.data(), scalar);
    k::quant_fp8_decompress(block.data(), n, mode.quant_bucket, out, scalar);
    return;
  }
  if (mode.int8 && mode.minmax) {  // as below, in min-max codes
    std::vector<std::uint8_t> block(k::quant8_minmax_bytes(n, mode.quant_bucket));
    k::quant8_minmax_compress(in, residual, n, mode.quant_bucket, block.data(), scalar, mine);
    k::quant8_minmax_accumulate(block.data(), n, mode.quant_bucket, out, k::Isa::scalar);
    k::quant8_minmax_compress(out, owner, n, mode.quant_bucket, block.data(), scalar, owners);
    k::quant8_minmax_decompress(block.data(), n, mode.quant_bucket, out, k::Isa::scalar);
    return;
  }
  if (mode.int8) {  // one rank owns the one shard: quantized, summed into zeros, quantized again
    std::vector<std::uint8_t> block(k::quant8_bytes(n, mode.quant_bucket));
    k::quant8_compress(in, residual, n, mode.quant_bucket, block.data(), scalar, mine);
    k::quant8_accumulate(block.data(), n, mode.quant_bucket, out, k::Isa::scalar);
    k::quant8_compress(out, owner, n, mode.quant_bucket, block.data(), scalar, owners);
    k::quant8_decompress(block.data(), n, mode.quant_bucket, out, k::Isa::scalar);
    return;
  }
  if (mode.packed_bits && mode.minmax) {  // as int8, at 4 or 2 bits, in min-max codes
    const int bits = mode.packed_bits;
    const std::size_t bucket = mode.quant_bucket;
    std::vector<std::uint8_t> block(k::quant_packed_minmax_bytes(n, bucket, bits));
    k::quant_packed_minmax_compress(in, residual, n, bucket, bits, block.data(), scalar, mine);
    k::quant_packed_minmax_accumulate(block.data(), n, bucket, bits, out, k::Isa::scalar);
    k::quant_packed_minmax_compress(out, owner, n, bucket, bits, block.data(), scalar, owners);
    k::quant_packed_minmax_decompress(block.data(), n, bucket, bits, out, k::Isa::scalar);
    return;
  }
  if (mode.packed_bits) {  // as int8, at 4 or 2 bits
    const int bits = mode.packed_bits;
    std::vector<std::uint8_t> block(k::quant_packed_bytes(n, mode.quant_bucket, bits));
    k::quant_packed_compress(in, residual, n, mode.quant_bucket, bits, block.data(), scalar, mine);
    k::quant_packed_accumulate(block.data(), n, mode.quant_bucket, bits, out, k::Isa::scalar);
    k::quant_packed_compress(out, owner, n, mode.quant_bucket, bits, block.data(), scalar, owners);
    k::quant_packed_decompress(block.data(), n, mode.quant_bucket, bits, out, k::Isa::scalar);
    return;
  }
  if (mode.topk) {
    const std::size_t kk = k::topk_count(n, mode.ratio);
    const auto values = mode.fp16_values ? k::TopkValues::fp16 : k::TopkValues::fp32;
    std::vector<std::uint8_t> payload(k::topk_payload_bytes(kk, values));
    k::TopkScratch scratch;
    k::topk_compress(in, residual, n, kk, values, payload.data(), scratch);
    k::topk_accumulate(payload.data(), kk, values, out);
    // Sharded (fp32, not in a graph): the owner selects k of the sum again,
    // with its own residual (these runs' ratios keep its result top-k).
    if (mode.topk_sharded && datatype == ncclFloat32 && !in_graph) {
      std::vector<float> sum(out, out + n);
      std::fill(out, out + n, 0.0f);
      k::topk_compress(sum.data(), owner, n, kk, values, payload.data(), scratch);
      k::topk_accumulate(payload.data(), kk, values, out);
    }
    return;
  }
  const auto format = mode.compressor == "bf16" ? k::HalfFormat::bf16 : k::HalfFormat::fp16;
  std::vector<std::uint16_t> wire(n);
  k::compress(format, in, residual, wire.data(), n);
  k::decompress(format, wire.data(), out, n);
}

std::vector<float> reference(const std::vector<float>& in, ncclComm_t comm, const void* recv,
                             int datatype = ncclFloat32, bool in_graph = false) {
  const std::size_t n = in.size();
  Residual& slot = residuals[{comm, recv}];
  if (slot.values.size() != n || slot.datatype != datatype)
    slot = {datatype, std::vector<float>(n), {}, std::vector<float>(n)};
  float* residual = mode.ef ? slot.values.data() : nullptr;
  if (mode.powersgd) return low_rank_reference(in, residual, slot.q);  // never cut
  // Cut as the library cuts: each piece a reduction of its own, over its
  // stretch of the residuals (one rank owns each piece's one shard whole).
  std::vector<float> out(n, 0.0f);
  float* owner = mode.ef ? slot.owner.data() : nullptr;
  const std::size_t element = datatype == ncclFloat32 ? 4 : 2;
  // The call's number among its shape's (communicator, count, datatype), as
  // the library numbers them: stochastic rounding draws from it.
  const std::uint64_t call = shape_calls[{comm, n, datatype}]++;
  for (const auto& [begin, count] : pieces_of(n, element)) {
    k::Rounding mine, owners;  // nearest
    if (mode.stochastic) {  // one rank: the owner of each piece's one shard, from its first value
      mine = k::rounding_key(mode.quant_seed, 0, call, 0, begin);
      owners = k::rounding_key(mode.quant_seed, 0, call, 1, begin);
    }
    reference_piece(in.data() + begin, count, residual ? residual + begin : nullptr,
                    owner ? owner + begin : nullptr, datatype, in_graph, out.data() + begin, mine,
                    owners);
  }
  return out;
}

bool compressible(std::size_t bytes, bool fp32) {
  if (mode.compressor == "none" || bytes < mode.min_bytes) return false;
  if (mode.powersgd) return fp32 && low_rank_shape(bytes / 4).rank > 0;
  if (mode.quant) return fp32;
  return fp32 || mode.topk;
}

void expect_bits(const char* what, const void* got, const void* want, std::size_t bytes) {
  const bool same = std::memcmp(got, want, bytes) == 0;
  if (!same && !mode.exact_products) {  // fp32 values through cuBLAS's products
    const double differ = test_compare::relative_difference(
        static_cast<const float*>(got), static_cast<const float*>(want), bytes / 4);
    std::printf("%s %s (within 1e-3 of the CPU loops' products: %.1e)\n",
                differ <= 1e-3 ? "ok  " : "FAIL", what, differ);
    failures += !(differ <= 1e-3);
    return;
  }
  std::printf("%s %s\n", same ? "ok  " : "FAIL", what);
  failures += !same;
}

struct Device {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// Reads n floats of `from` after the stream's work.
std::vector<float> read_back(Device& d, const float* from, std::size_t n) {
  std::vector<float> got(n);
  CUDA_OK(cudaMemcpyAsync(got.data(), from, n * 4, cudaMemcpyDeviceToHost, d.stream));
  CUDA_OK(cudaStreamSynchronize(d.stream));
  return got;
}

// Fills n floats at `at` with `values` (what a receive buffer held before a call).
void fill(Device& d, float* at, const std::vector<float>& values) {
  CUDA_OK(cudaMemcpyAsync(at, values.data(), values.size() * 4, cudaMemcpyHostToDevice, d.stream));
}

using AllReduce = ncclResult_t (*)(const void*, void*, std::size_t, ncclDataType_t, ncclRedOp_t,
                                   ncclComm_t, cudaStream_t);

int add_object_name(struct dl_phdr_info* info, std::size_t, void* names) {
  if (info->dlpi_name && info->dlpi_name[0])
    static_cast<std::vector<std::string>*>(names)->push_back(info->dlpi_name);
  return 0;
}

// NCCL's own ncclAllReduce: its pnccl* alias (NCCL 2.28 exports them), else
// the definition of the first loaded object that is not SlimReduce (the host
// simulation's NCCL has no aliases).
AllReduce real_all_reduce() {
  if (void* alias = dlsym(RTLD_DEFAULT, "pncclAllReduce"))
    return reinterpret_cast<AllReduce>(alias);
  Dl_info ours{};
  void* marker = dlsym(RTLD_DEFAULT, "slimreduce_nccl_get_counters");
  if (!marker || !dladdr(marker, &ours)) return nullptr;
  std::vector<std::string> names;
  dl_iterate_phdr(add_object_name, &names);
  for (const std::string& name : names) {
    void* handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    void* fn = handle ? dlsym(handle, "ncclAllReduce") : nullptr;
    Dl_info where{};
    const bool theirs = fn && dladdr(fn, &where) && where.dli_fbase != ours.dli_fbase;
    if (handle) dlclose(handle);  // NOLOAD took a reference; the object stays loaded
    if (theirs) return reinterpret_cast<AllReduce>(fn);
  }
  return nullptr;
}

// What NCCL itself writes for this call, SlimReduce bypassed (the real
// pncclAllReduce): a call passed through must give exactly these bits. recv
// is filled with `recv_before` first, as it was for the call checked, since
// NCCL before 2.29.7 leaves the last elements of a one-rank PreMulSum or
// ncclAvg out of place unwritten (NVIDIA/nccl#1950, seen with 2.28 on an
// H200): the plain arithmetic is not NCCL's answer there.
std::vector<float> nccl_itself(Device& d, const float* send, float* recv, std::size_t n,
                               ncclRedOp_t op, const std::vector<float>& recv_before) {
  const AllReduce real = real_all_reduce();
  if (!real) {
    std::printf("FAIL no NCCL ncclAllReduce but SlimReduce's found to compare with\n");
    std::exit(1);
  }
  fill(d, recv, recv_before);
  NCCL_OK(real(send, recv, n, ncclFloat32, op, d.comm, d.stream));
  return read_back(d, recv, n);
}

// How many of got differ from the plain arithmetic `want`: printed, not judged
// (NCCL's own bug, above, shows here; SlimReduce passed the call through).
void note_nccl_arithmetic(const char* what, const std::vector<float>& got,
                          const std::vector<float>& want) {
  std::size_t differ = 0;
  for (std::size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], 4) != 0;
  if (differ) {
    std::printf("note %s: NCCL's own result differs from the arithmetic in %zu of %zu elements\n",
                what, differ, got.size());
  }
}

// One fp32 allreduce of fresh values through `send` into `recv` (equal for
// in place); with_inf: one of them inf.
void fp32_case(const char* what, Device& d, float* send, float* recv, std::size_t n, ncclRedOp_t op,
               bool expect_compressed, bool with_inf = false) {
  std::vector<float> in = random_values(n);
  if (with_inf) in[5] = INFINITY;
  CUDA_OK(cudaMemcpyAsync(send, in.data(), n * 4, cudaMemcpyHostToDevice, d.stream));
  NCCL_OK(ncclAllReduce(send, recv, n, ncclFloat32, op, d.comm, d.stream));
  const std::vector<float> got = read_back(d, recv, n);
  const std::vector<float> want = expect_compressed ? reference(in, d.comm, recv) : in;
  expect_bits(what, got.data(), want.data(), n * 4);
}

void check_basic(Device& d, float* a, float* b, std::size_t n) {
  fp32_case("fp32 sum, out of place", d, a, b, n, ncclSum, compressible(n * 4, true));
  fp32_case("fp32 avg, in place", d, b, b, n, ncclAvg, compressible(n * 4, true));
  for (int step = 0; step < 3; ++step) {  // the residual carries over on the same key
    fp32_case("fp32 sum, same key again", d, a, b, n, ncclSum, compressible(n * 4, true));
  }
  fp32_case("fp32 sum, odd count, misaligned", d, a + 1, b + 3, n - 5, ncclSum,
            compressible((n - 5) * 4, true));
  // Where a plain sum keeps it; PowerSGD: NaN everywhere, and the key goes on.
  fp32_case("fp32 sum, an inf in the input", d, a, b, n, ncclSum, compressible(n * 4, true), true);
  fp32_case("fp32 sum, the same key after an inf", d, a, b, n, ncclSum, compressible(n * 4, true));
  fp32_case("fp32 below SLIMREDUCE_MIN_BYTES", d, a, b, 1000, ncclSum, false);
  fp32_case("fp32 max passes through", d, a, b, n, ncclMax, false);
}

void check_int_passes_through(Device& d, float* a, float* b, std::size_t n) {
  std::vector<std::int32_t> in(n);
  for (auto& v : in) v = static_cast<std::int32_t>(rng());
  CUDA_OK(cudaMemcpyAsync(a, in.data(), n * 4, cudaMemcpyHostToDevice, d.stream));
  NCCL_OK(ncclAllReduce(a, b, n, ncclInt32, ncclSum, d.comm, d.stream));
  std::vector<std::int32_t> got(n);
  CUDA_OK(cudaMemcpyAsync(got.data(), b, n * 4, cudaMemcpyDeviceToHost, d.stream));
  CUDA_OK(cudaStreamSynchronize(d.stream));
  expect_bits("int32 sum passes through", got.data(), in.data(), n * 4);
}

// A report key's value through the C API (-1 where it cannot be read).
double counter(const char* key) {
  using Get = int (*)(const char*, double*);
  auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "slimreduce_get_counter"));
  double value = -1;
  if (!get || get(key, &value) != 0) return -1;
  return value;
}

// Calls in nested groups: held until the outermost end, then all correct.
void check_group(Device& d, float* a, float* b, std::size_t n) {
  std::vector<float> in[3];
  float* recv[3] = {b, b + n, b + 2 * n};
  for (int i = 0; i < 3; ++i) {
    in[i] = random_values(n);
    CUDA_OK(cudaMemcpyAsync(a + i * n, in[i].data(), n * 4, cudaMemcpyHostToDevice, d.stream));
  }
  const std::vector<float> recv_before = random_values(n);  // the avg's receive buffer
  fill(d, recv[2], recv_before);
  const double fused_before = counter("calls.fused_batches");
  const double tensors_before = counter("calls.fused_tensors");
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(a, recv[0], n, ncclFloat32, ncclSum, d.comm, d.stream));
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(a + n, recv[1], n, ncclFloat32, ncclSum, d.comm, d.stream));
  NCCL_OK(ncclGroupEnd());
  NCCL_OK(ncclAllReduce(a + 2 * n, recv[2], n, ncclFloat32, ncclAvg, d.comm, d.stream));
  NCCL_OK(ncclGroupEnd());
  for (int i = 0; i < 3; ++i) {
    const std::vector<float> got = read_back(d, recv[i], n);
    std::vector<float> want = in[i];
    if (compressible(n * 4, true)) {
      want = reference(in[i], d.comm, recv[i]);
    } else if (i == 2) {  // an average NCCL computes itself: its bits
      want = nccl_itself(d, a + 2 * n, recv[2], n, ncclAvg, recv_before);
      note_nccl_arithmetic("grouped ncclAvg", want, in[2]);
    }
    expect_bits("grouped call", got.data(), want.data(), n * 4);
  }
  // Casts: the two sums share one 16-bit collective, the average (another op)
  // has its own. Top-k: all three share one allgather. Calls cut into
  // partitions (larger than SLIMREDUCE_PARTITION_BYTES) fuse with nothing.
  // PowerSGD, int8 and sharded top-k: each call its own step, none fused.
  // A call cut into partitions runs alone: nothing fuses.
  const bool fused = compressible(n * 4, true) && !mode.powersgd && !mode.quant &&
                     !mode.topk_sharded && pieces_of(n, 4).size() == 1;
  const double tensors = !fused ? 0 : mode.compressor == "topk" ? 3 : 2;
  const bool fused_counted = counter("calls.fused_batches") - fused_before == (fused ? 1 : 0) &&
                             counter("calls.fused_tensors") - tensors_before == tensors;
  std::printf("%s the group's fused batch counted\n", fused_counted ? "ok  " : "FAIL");
  failures += !fused_counted;
}

// 16-bit tensors: top-k takes them (widened, selected, summed, rounded back).
void check_half(Device& d, float* a, float* b, std::size_t n, ncclDataType_t type) {
  const bool bf16 = type == ncclBfloat16;
  std::vector<std::uint16_t> in(n);
  std::vector<float> widened(n);
  const std::vector<float> values = random_values(n);
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = bf16 ? k::float_to_bf16_bits(values[i]) : k::float_to_fp16_bits(values[i]);
    widened[i] = bf16 ? k::bf16_bits_to_float(in[i]) : k::fp16_bits_to_float(in[i]);
  }
  CUDA_OK(cudaMemcpyAsync(a, in.data(), n * 2, cudaMemcpyHostToDevice, d.stream));
  NCCL_OK(ncclAllReduce(a, b, n, type, ncclSum, d.comm, d.stream));
  std::vector<std::uint16_t> got(n), want = in;
  CUDA_OK(cudaMemcpyAsync(got.data(), b, n * 2, cudaMemcpyDeviceToHost, d.stream));
  CUDA_OK(cudaStreamSynchronize(d.stream));
  if (compressible(n * 2, false)) {
    const std::vector<float> sum = reference(widened, d.comm, b, type);
    for (std::size_t i = 0; i < n; ++i) {
      want[i] = bf16 ? k::float_to_bf16_bits(sum[i]) : k::float_to_fp16_bits(sum[i]);
    }
  }
  expect_bits(bf16 ? "bf16 tensor" : "fp16 tensor", got.data(), want.data(), n * 2);
}

// Graph capture: a call whose workspace and residual exist is captured
// compressed and replays correctly; a larger one passes through.
void check_graph(Device& d, float* a, float* b, std::size_t n) {
  fp32_case("warm-up before capture", d, a, b, n, ncclSum, compressible(n * 4, true));
  std::vector<float> in = random_values(n);
  CUDA_OK(cudaMemcpy(a, in.data(), n * 4, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the data lands, and
  // d.stream does not wait for the legacy stream.
  CUDA_OK(cudaDeviceSynchronize());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal));
  NCCL_OK(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, d.comm, d.stream));
  CUDA_OK(cudaStreamEndCapture(d.stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    CUDA_OK(cudaGraphLaunch(exec, d.stream));
    const std::vector<float> got = read_back(d, b, n);
    // PowerSGD passes through under capture (cuBLAS and its Q are made outside it).
    const bool compressed = compressible(n * 4, true) && !mode.powersgd;
    const std::vector<float> want =
        compressed ? reference(in, d.comm, b, ncclFloat32, /*in_graph=*/true) : in;
    expect_bits("graph replay (compressed when warm)", got.data(), want.data(), n * 4);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  // Eight times the size: the workspace is too small and capture allocates
  // nothing, so it passes through. (A new residual key with a workspace large
  // enough is captured compressed without error feedback: tests/hostsim.)
  const std::size_t big = 8 * n;
  in = random_values(big);
  CUDA_OK(cudaMemcpy(a, in.data(), big * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaStreamBeginCapture(d.stream, cudaStreamCaptureModeThreadLocal));
  NCCL_OK(ncclAllReduce(a, b + 8 * n, big, ncclFloat32, ncclSum, d.comm, d.stream));
  CUDA_OK(cudaStreamEndCapture(d.stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, d.stream));
  const std::vector<float> got = read_back(d, b + 8 * n, big);
  if (mode.topk_sharded && compressible(n * 4, true)) {
    // Sharded top-k's workspace (its owner's fp32 shard among it) holds this
    // call gathered, as a graph has it: compressed, without error feedback
    // (its key is new in the capture), each of its partitions on its own.
    const auto values = mode.fp16_values ? k::TopkValues::fp16 : k::TopkValues::fp32;
    k::TopkScratch scratch;
    std::vector<float> want(big, 0.0f);
    for (const auto& [begin, count] : pieces_of(big, 4)) {
      const std::size_t kk = k::topk_count(count, mode.ratio);
      std::vector<std::uint8_t> payload(k::topk_payload_bytes(kk, values));
      k::topk_compress(in.data() + begin, nullptr, count, kk, values, payload.data(), scratch);
      k::topk_accumulate(payload.data(), kk, values, want.data() + begin);
    }
    expect_bits("graph capture in a sharded call's workspace: gathered, no residual", got.data(),
                want.data(), big * 4);
  } else {
    expect_bits("graph capture without workspace passes through", got.data(), in.data(), big * 4);
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

// Polls a non-blocking communicator until its work is taken, as NCCL asks.
void wait_ready(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) NCCL_OK(ncclCommGetAsyncError(comm, &state));
  NCCL_OK(state);
}

// A call that may answer ncclInProgress (a non-blocking communicator's).
void may_progress(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  std::printf("FAIL %s: %s\n", what, ncclGetErrorString(rc));
  std::exit(1);
}

// Calls SlimReduce must leave to NCCL as they are: on a non-blocking
// communicator, with a PreMulSum op, and in a simulated group (nothing runs).
void check_left_to_nccl(Device& d, float* a, float* b, std::size_t n) {
  Device quick = d;
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  may_progress(ncclCommInitRankConfig(&quick.comm, 1, id, 0, &config), "non-blocking init");
  wait_ready(quick.comm);
  std::vector<float> in = random_values(n);
  CUDA_OK(cudaMemcpyAsync(a, in.data(), n * 4, cudaMemcpyHostToDevice, d.stream));
  may_progress(ncclAllReduce(a, b, n, ncclFloat32, ncclSum, quick.comm, d.stream), "allreduce");
  wait_ready(quick.comm);
  expect_bits("non-blocking communicator passes through", read_back(d, b, n).data(), in.data(),
              n * 4);
  may_progress(ncclCommFinalize(quick.comm), "non-blocking finalize");  // then poll, then destroy
  wait_ready(quick.comm);
  NCCL_OK(ncclCommDestroy(quick.comm));

  float half = 0.5f;
  ncclRedOp_t half_sum;
  NCCL_OK(ncclRedOpCreatePreMulSum(&half_sum, &half, ncclFloat32, ncclScalarHostImmediate, d.comm));
  const std::vector<float> b_before = random_values(n);
  fill(d, b, b_before);
  NCCL_OK(ncclAllReduce(a, b, n, ncclFloat32, half_sum, d.comm, d.stream));
  const std::vector<float> got = read_back(d, b, n);
  const std::vector<float> want = nccl_itself(d, a, b, n, half_sum, b_before);
  expect_bits("PreMulSum op passes through", got.data(), want.data(), n * 4);
  std::vector<float> halved(n);
  for (std::size_t i = 0; i < n; ++i) halved[i] = half * in[i];
  note_nccl_arithmetic("PreMulSum", want, halved);
  NCCL_OK(ncclRedOpDestroy(half_sum, d.comm));

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  // In place: NCCL at one rank runs a collective at once, even inside a group
  // (its one-rank path), and in place that changes nothing; a compression
  // SlimReduce wrongly ran would.
  NCCL_OK(ncclGroupStart());
  NCCL_OK(ncclAllReduce(a, a, n, ncclFloat32, ncclSum, d.comm, d.stream));  // eligible
  NCCL_OK(ncclGroupSimulateEnd(&info));
  expect_bits("a simulated group compresses nothing", read_back(d, a, n).data(), in.data(), n * 4);
#endif
}

// NCCL_APP_TIME=1: the median stream time of one ncclAllReduce of 8 Mi
// floats at one rank through SlimReduce (the compressor's kernels; NCCL
// itself only copies at one rank) and through NCCL alone, after two
// untimed calls each: what the compression costs on this GPU per call.
void time_one_rank(Device& d, float* a, float* b) {
  const std::size_t n = std::size_t{1} << 23;  // a holds 8 n floats, n a little over 1 Mi
  fill(d, a, random_values(n));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  auto median_ms = [&](AllReduce all_reduce) {
    std::vector<float> ms;
    for (int i = 0; i < 9; ++i) {
      CUDA_OK(cudaEventRecord(start, d.stream));
      NCCL_OK(all_reduce(a, b, n, ncclFloat32, ncclSum, d.comm, d.stream));
      CUDA_OK(cudaEventRecord(stop, d.stream));
      CUDA_OK(cudaEventSynchronize(stop));
      float elapsed = 0;
      CUDA_OK(cudaEventElapsedTime(&elapsed, start, stop));
      if (i >= 2) ms.push_back(elapsed);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const float ours = median_ms(&ncclAllReduce);
  const float nccl = median_ms(real_all_reduce());
  std::printf("time nccl_app %s one rank 8Mi floats: %.3f ms, NCCL alone %.3f ms\n",
              mode.compressor.c_str(), ours, nccl);
  CUDA_OK(cudaEventDestroy(start));
  CUDA_OK(cudaEventDestroy(stop));
}

void check_counters(int compressed_floor) {
  using Get = int (*)(slimreduce_counters*);
  auto get = reinterpret_cast<Get>(dlsym(RTLD_DEFAULT, "slimreduce_nccl_get_counters"));
  slimreduce_counters c{};
  const bool read = get && get(&c) == 0;
  std::printf("counters: intercepted %llu, compressed %llu, passed through %llu\n",
              static_cast<unsigned long long>(c.intercepted),
              static_cast<unsigned long long>(c.compressed),
              static_cast<unsigned long long>(c.passed_through));
  const bool ok = read && c.intercepted > 0 &&
                  (mode.compressor == "none" ? c.compressed == 0
                                             : c.compressed >= std::uint64_t(compressed_floor));
  std::printf("%s interception counted\n", ok ? "ok  " : "FAIL");
  failures += !ok;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  const std::size_t n = (std::size_t{1} << 20) + 12;
  Device d;
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  NCCL_OK(ncclCommInitRank(&d.comm, 1, id, 0));
  CUDA_OK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  float *a = nullptr, *b = nullptr;
  CUDA_OK(cudaMalloc(&a, 8 * n * 4));
  CUDA_OK(cudaMalloc(&b, 16 * n * 4));
  std::printf("compressor %s, error feedback %d\n", mode.compressor.c_str(), mode.ef);

  if (mode.stochastic) {  // the references above at each call's draws, on one key and another
    for (int call = 0; call < 3; ++call)
      fp32_case("fp32 sum, stochastic rounding, same key", d, a, b, n, ncclSum, mode.quant);
    fp32_case("fp32 avg, stochastic rounding, in place", d, b + n, b + n, n - 5, ncclAvg,
              mode.quant);
    std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
  }
  check_basic(d, a, b, n);
  check_int_passes_through(d, a, b, n);
  check_group(d, a, b, n);
  check_half(d, a, b, n, ncclFloat16);
  check_half(d, a, b, n, ncclBfloat16);
  Device split = d;
  NCCL_OK(ncclCommSplit(d.comm, 0, 0, &split.comm, nullptr));
  fp32_case("split communicator", split, a, b, n, ncclSum, compressible(n * 4, true));
  NCCL_OK(ncclCommDestroy(split.comm));
  forget(split.comm);
  // PyTorch's init past 128 ranks (here with one id): compressed like the others.
  Device scalable = d;
  ncclUniqueId scalable_id;
  NCCL_OK(ncclGetUniqueId(&scalable_id));
  NCCL_OK(ncclCommInitRankScalable(&scalable.comm, 1, 0, 1, &scalable_id, nullptr));
  fp32_case("scalable-init communicator", scalable, a, b, n, ncclSum, compressible(n * 4, true));
  NCCL_OK(ncclCommDestroy(scalable.comm));
  forget(scalable.comm);
  // ncclCommInitAll (one process driving its devices; here one): compressed too.
  Device all = d;
  const int devlist[1] = {0};
  NCCL_OK(ncclCommInitAll(&all.comm, 1, devlist));
  fp32_case("ncclCommInitAll communicator", all, a, b, n, ncclSum, compressible(n * 4, true));
  NCCL_OK(ncclCommDestroy(all.comm));
  forget(all.comm);
  check_graph(d, a, b, n);
  check_left_to_nccl(d, a, b, n);
  check_counters(11);
  if (std::getenv("NCCL_APP_TIME")) time_one_rank(d, a, b);

  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  NCCL_OK(ncclCommDestroy(d.comm));
  std::printf("%s: %d failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
