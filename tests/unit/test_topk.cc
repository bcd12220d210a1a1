// Top-k selection checked against an independent reference: keys ordered with
// std::sort / std::nth_element on (key desc, index asc), payloads and residuals
// built element by element from element_rules.h, never by the code under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/element_rules.h"
#include "kernels/topk.h"

namespace sk = slimreduce::kernels;
using sk::TopkValues;

namespace {

std::uint32_t magnitude_key(float f) { return sk::float_bits(f) & 0x7fffffffu; }

struct Rng {  // splitmix64: fast enough for millions of elements per test.
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint32_t below(std::uint32_t m) { return static_cast<std::uint32_t>(next() % m); }
  // Uniform in (-1, 1) times 2^[-8, 8]: many exponents, so many radix bins.
  float spread() {
    const float u = static_cast<float>(next() >> 40) / 16777216.0f * 2.0f - 1.0f;
    return std::ldexp(u, static_cast<int>(below(17)) - 8);
  }
};

enum class Data { random, ties, all_equal, nan_inf };

const char* data_name(Data d) {
  switch (d) {
    case Data::random:
      return "random";
    case Data::ties:
      return "ties";
    case Data::all_equal:
      return "all_equal";
    default:
      return "nan_inf";
  }
}

struct Input {
  std::vector<float> in, residual;
};

Input make_input(Data kind, std::size_t n, std::uint64_t seed) {
  Rng rng{seed};
  Input x{std::vector<float>(n), std::vector<float>(n)};
  const float handful[] = {0.0f, 0.5f, 1.0f, 3.0f, 1e-30f};
  for (std::size_t i = 0; i < n; ++i) {
    switch (kind) {
      case Data::random:
        x.in[i] = rng.spread();
        x.residual[i] = rng.spread() * 0.125f;
        break;
      case Data::ties:  // A handful of magnitudes, both signs; residual 0 keeps them tied.
        x.in[i] = handful[rng.below(5)] * (rng.below(2) ? -1.0f : 1.0f);
        x.residual[i] = rng.below(4) ? 0.0f : -0.0f;
        break;
      case Data::all_equal:
        x.in[i] = -2.5f;
        x.residual[i] = 0.0f;
        break;
      case Data::nan_inf: {
        x.in[i] = rng.spread() * 1e5f;  // Some overflow fp16.
        x.residual[i] = rng.spread();
        const std::uint32_t r = rng.below(100);
        const std::uint32_t sign = rng.below(2) << 31;
        // NaNs of any sign and payload (quiet and signalling), and infinities.
        if (r < 2) x.in[i] = sk::bits_float(sign | 0x7f800000u | (1u + rng.below(0x7fffffu)));
        if (r == 2) x.in[i] = sk::bits_float(sign | 0x7f800000u);
        if (r == 3 || r == 4)
          x.residual[i] = sk::bits_float(sign | 0x7fc00000u | rng.below(0x3fffffu));
        if (r == 4)
          x.in[i] = sk::bits_float(0x7f800000u | (1u + rng.below(0x7fffffu)));  // in's wins.
        break;
      }
    }
  }
  return x;
}

std::vector<float> reference_acc(const Input& x, bool with_residual) {
  if (!with_residual) return x.in;
  std::vector<float> acc(x.in.size());
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = sk::add_nan_first(x.in[i], x.residual[i]);
  return acc;
}

// Indices of the k largest (key desc, index asc), returned ascending.
std::vector<std::uint32_t> reference_topk(const std::vector<float>& acc, std::size_t k) {
  std::vector<std::uint64_t> order(acc.size());  // Larger = earlier: key high, index low.
  for (std::size_t i = 0; i < acc.size(); ++i) {
    order[i] = (std::uint64_t{magnitude_key(acc[i])} << 32) | (0xffffffffu - i);
  }
  if (order.size() <= 65536) {
    std::sort(order.begin(), order.end(), std::greater<>());
  } else {
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), std::greater<>());
  }
  std::vector<std::uint32_t> index(k);
  for (std::size_t j = 0; j < k; ++j) index[j] = 0xffffffffu - (order[j] & 0xffffffffu);
  std::sort(index.begin(), index.end());
  return index;
}

float sent_of(float acc, TopkValues values) {
  return values == TopkValues::fp16 ? sk::fp16_bits_to_float(sk::float_to_fp16_bits(acc)) : acc;
}

struct Result {
  std::vector<std::uint8_t> payload;
  std::vector<float> residual;
};

// The payload and residual the contract asks for, built entry by entry.
Result expected(const std::vector<float>& acc, const std::vector<std::uint32_t>& index,
                TopkValues values, bool residual) {
  const std::size_t k = index.size();
  Result r{std::vector<std::uint8_t>(sk::topk_payload_bytes(k, values)), {}};
  if (residual) r.residual = acc;
  std::uint8_t* value = r.payload.data() + 4 * k;
  for (std::size_t j = 0; j < k; ++j) {
    const float a = acc[index[j]];
    std::memcpy(r.payload.data() + 4 * j, &index[j], 4);
    if (values == TopkValues::fp16) {
      const std::uint16_t h = sk::float_to_fp16_bits(a);
      std::memcpy(value + 2 * j, &h, 2);
    } else {
      std::memcpy(value + 4 * j, &a, 4);
    }
    const float sent = sent_of(a, values);
    if (residual) r.residual[index[j]] = std::isfinite(sent) ? a - sent : 0.0f;
  }
  return r;
}

Result run(const Input& x, bool with_residual, std::size_t k, TopkValues values,
           sk::TopkScratch& scratch, const sk::TopkTuning& tuning = {}) {
  Result r{std::vector<std::uint8_t>(sk::topk_payload_bytes(k, values) + 16, 0xab), {}};
  if (with_residual) r.residual = x.residual;
  sk::topk_compress(x.in.data(), with_residual ? r.residual.data() : nullptr, x.in.size(), k,
                    values, r.payload.data(), scratch, tuning);
  // The 16 guard bytes past the payload must be untouched.
  for (std::size_t j = r.payload.size() - 16; j < r.payload.size(); ++j) {
    EXPECT_EQ(r.payload[j], 0xab) << "write past the payload at byte " << j;
  }
  r.payload.resize(r.payload.size() - 16);
  return r;
}

// First differing element of two equally long arrays, or -1.
template <class T>
long first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<long>(i);
  }
  return -1;
}

std::uint32_t payload_index(const std::vector<std::uint8_t>& p, std::size_t j) {
  std::uint32_t i;
  std::memcpy(&i, p.data() + 4 * j, 4);
  return i;
}

float payload_value(const std::vector<std::uint8_t>& p, std::size_t k, std::size_t j,
                    TopkValues values) {
  if (values == TopkValues::fp32) {
    float v;
    std::memcpy(&v, p.data() + 4 * k + 4 * j, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, p.data() + 4 * k + 2 * j, 2);
  return sk::fp16_bits_to_float(h);
}

// sent + residual == acc exactly for every element, from the payload as sent.
void check_invariant(const std::vector<float>& acc, const Result& got, std::size_t k,
                     TopkValues values) {
  std::vector<char> chosen(acc.size(), 0);
  std::size_t bad = 0;
  for (std::size_t j = 0; j < k; ++j) {
    const std::uint32_t i = payload_index(got.payload, j);
    ASSERT_LT(i, acc.size());
    ASSERT_FALSE(chosen[i]) << "index " << i << " sent twice";
    chosen[i] = 1;
    const float sent = payload_value(got.payload, k, j, values);
    const bool ok =
        std::isfinite(sent) ? sent + got.residual[i] == acc[i] : got.residual[i] == 0.0f;
    if (!ok && bad++ == 0) ADD_FAILURE() << "selected index " << i << " acc " << acc[i];
  }
  for (std::size_t i = 0; i < acc.size(); ++i) {
    if (!chosen[i] && sk::float_bits(got.residual[i]) != sk::float_bits(acc[i]) && bad++ == 0) {
      ADD_FAILURE() << "unselected index " << i << " residual " << got.residual[i] << " acc "
                    << acc[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

// topk_accumulate into a dense buffer versus a scatter of the reference entries.
void check_round_trip(const std::vector<float>& acc, const std::vector<std::uint32_t>& index,
                      const Result& got, TopkValues values) {
  const std::size_t k = index.size();
  std::vector<float> dense(acc.size()), want(acc.size());
  for (std::size_t i = 0; i < dense.size(); ++i) dense[i] = want[i] = static_cast<float>(i % 7);
  for (std::size_t j = 0; j < k; ++j) want[index[j]] += sent_of(acc[index[j]], values);
  sk::topk_accumulate(got.payload.data(), k, values, dense.data());
  for (std::size_t i = 0; i < dense.size(); ++i) {
    const bool same = sk::float_bits(dense[i]) == sk::float_bits(want[i]) ||
                      (std::isnan(dense[i]) && std::isnan(want[i]));
    if (!same) {
      ADD_FAILURE() << "dense[" << i << "] = " << dense[i] << ", want " << want[i];
      return;
    }
  }
}

// The full check of one call: payload bytes, residual bits, invariant, round trip.
void check_case(const Input& x, bool with_residual, std::size_t k, TopkValues values,
                sk::TopkScratch& scratch, const sk::TopkTuning& tuning = {}) {
  const std::vector<float> acc = reference_acc(x, with_residual);
  const std::vector<std::uint32_t> index = reference_topk(acc, k);
  const Result want = expected(acc, index, values, with_residual);
  const std::vector<float> in_before = x.in;
  const Result got = run(x, with_residual, k, values, scratch, tuning);
  EXPECT_EQ(first_difference(got.payload, want.payload), -1) << "payload differs";
  EXPECT_EQ(first_difference(x.in, in_before), -1) << "in was written";
  if (!with_residual) return;
  EXPECT_EQ(first_difference(got.residual, want.residual), -1) << "residual differs";
  check_invariant(acc, got, k, values);
  check_round_trip(acc, index, got, values);
}

using Param = std::tuple<std::size_t, double, TopkValues>;

std::string param_name(const Param& p) {
  const auto [n, ratio, values] = p;
  std::string name = "n";  // Appended piecewise: GCC 12 flags a + chain (-Wrestrict).
  name += std::to_string(n);
  name += "_r";
  name += std::to_string(static_cast<int>(ratio * 1000));
  name += values == TopkValues::fp16 ? "_fp16" : "_fp32";
  return name;
}

class TopkSweep : public ::testing::TestWithParam<Param> {};

TEST_P(TopkSweep, MatchesReference) {
  const auto [n, ratio, values] = GetParam();
  const std::size_t k = sk::topk_count(n, ratio);
  sk::TopkScratch scratch;  // Shared by the cases below: reuse must not matter.
  for (Data kind : {Data::random, Data::ties, Data::all_equal, Data::nan_inf}) {
    SCOPED_TRACE(data_name(kind));
    check_case(make_input(kind, n, n * 31 + k), true, k, values, scratch);
  }
  SCOPED_TRACE("no residual");
  check_case(make_input(Data::nan_inf, n, n + 7), false, k, values, scratch);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, TopkSweep,
    ::testing::Combine(::testing::Values<std::size_t>(1, 2, 17, 1000, 65536, (1 << 20) + 3,
                                                      3'000'001),
                       ::testing::Values(0.001, 0.01, 0.1, 0.5, 1.0),
                       ::testing::Values(TopkValues::fp32, TopkValues::fp16)),
    [](const ::testing::TestParamInfo<Param>& info) { return param_name(info.param); });

// Every ISA and thread split gives the same bytes as the reference.
TEST(Topk, EveryIsaAndThreadCountAgree) {
  struct Case {
    std::size_t n, k;
    Data kind;
  };
  const Case cases[] = {{100, 7, Data::random},
                        {1000, 999, Data::ties},
                        {4099, 40, Data::nan_inf},
                        {70000, 700, Data::random},
                        {(1 << 20) + 3, 12345, Data::ties},
                        {(1 << 20) + 3, 5000, Data::all_equal}};
  sk::TopkScratch scratch;
  for (const Case& c : cases) {
    const Input x = make_input(c.kind, c.n, c.n + c.k);
    for (sk::Isa isa : {sk::Isa::scalar, sk::Isa::avx2, sk::Isa::avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(sk::best_isa())) continue;
      for (unsigned threads : {1u, 2u, 3u, 5u}) {
        SCOPED_TRACE(std::string(data_name(c.kind)) + " n=" + std::to_string(c.n) + " " +
                     sk::isa_name(isa) + " threads=" + std::to_string(threads));
        check_case(x, true, c.k, TopkValues::fp16, scratch, {isa, threads});
      }
    }
  }
}

// Pass 1's histogram floor (normally from a sample) only changes the speed:
// a floor above the k-th key costs one more pass, never a different result.
TEST(Topk, Pass1FloorNeverChangesResult) {
  sk::TopkScratch scratch;
  for (Data kind : {Data::random, Data::ties, Data::nan_inf}) {
    for (std::size_t n : {std::size_t{70000}, std::size_t{(1 << 20) + 3}}) {
      const Input x = make_input(kind, n, n ^ 5);
      // 1016 is the bin of 1.0f, 1040 of 8.0f, 2047 holds only NaNs.
      for (int floor : {0, 1016, 1040, 2047}) {
        for (std::size_t k : {std::size_t{1}, n / 1000, n / 10}) {
          SCOPED_TRACE(std::string(data_name(kind)) + " n=" + std::to_string(n) +
                       " floor=" + std::to_string(floor) + " k=" + std::to_string(k));
          sk::TopkTuning tuning;
          tuning.pass1_floor_bin = floor;
          check_case(x, true, k, TopkValues::fp32, scratch, tuning);
        }
      }
    }
  }
}

TEST(Topk, RejectsBadSizes) {
  sk::TopkScratch scratch;
  float in[4] = {1, 2, 3, 4};
  std::uint8_t payload[64];
  EXPECT_THROW(sk::topk_compress(in, nullptr, 4, 5, TopkValues::fp32, payload, scratch),
               std::invalid_argument);
  // Checked before anything is read: the pointer is never touched.
  EXPECT_THROW(
      sk::topk_compress(in, nullptr, std::size_t{1} << 32, 1, TopkValues::fp32, payload, scratch),
      std::invalid_argument);
}

TEST(Topk, KOneAndKNearN) {
  sk::TopkScratch scratch;
  for (std::size_t n : {1u, 5u, 64u, 65u, 1000u}) {
    const Input x = make_input(Data::random, n, n);
    for (std::size_t k : {std::size_t{1}, std::size_t{2}, n - 1, n}) {
      if (k == 0 || k > n) continue;
      SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k));
      check_case(x, true, k, TopkValues::fp32, scratch);
    }
  }
}

// NaN outranks inf, which outranks every number, whatever the sign or payload.
TEST(Topk, NanThenInfBeforeNumbers) {
  const std::size_t n = 5000;
  Input x = make_input(Data::random, n, 99);
  std::vector<std::uint32_t> nans, infs;
  for (std::uint32_t i = 3; i < n; i += 101) {
    x.in[i] = sk::bits_float((i % 2 ? 0x80000000u : 0u) | (0x7f800001u + i));
    nans.push_back(i);
  }
  for (std::uint32_t i = 50; i < n; i += 257) {
    if ((i - 3) % 101 == 0) continue;  // Keep that NaN.
    x.in[i] = i % 2 ? -INFINITY : INFINITY;
    infs.push_back(i);
  }
  sk::TopkScratch scratch;
  const std::size_t k = nans.size() + infs.size();
  const Result got = run(x, true, k, TopkValues::fp32, scratch);
  std::vector<std::uint32_t> want = nans;
  want.insert(want.end(), infs.begin(), infs.end());
  std::sort(want.begin(), want.end());
  for (std::size_t j = 0; j < k; ++j) EXPECT_EQ(payload_index(got.payload, j), want[j]);
  const Result only_nans = run(x, true, nans.size(), TopkValues::fp32, scratch);
  for (std::size_t j = 0; j < nans.size(); ++j) {
    EXPECT_EQ(payload_index(only_nans.payload, j), nans[j]);
  }
}

TEST(Topk, ZeroKOrNWritesNothing) {
  sk::TopkScratch scratch;
  std::vector<float> in(10, 1.0f), residual(10, 0.5f);
  std::vector<std::uint8_t> payload(64, 0xcd);
  sk::topk_compress(in.data(), residual.data(), 10, 0, TopkValues::fp32, payload.data(), scratch);
  sk::topk_compress(in.data(), residual.data(), 0, 0, TopkValues::fp16, payload.data(), scratch);
  EXPECT_EQ(std::count(payload.begin(), payload.end(), 0xcd), 64);
  EXPECT_EQ(std::count(residual.begin(), residual.end(), 0.5f), 10);
  std::vector<float> dense(10, 2.0f);
  sk::topk_accumulate(payload.data(), 0, TopkValues::fp32, dense.data());
  EXPECT_EQ(std::count(dense.begin(), dense.end(), 2.0f), 10);
}

// Payloads of several ranks meeting at one index add with the shared NaN
// rule, in rank order, as the GPU twin adds them.
TEST(Topk, AccumulateFollowsTheSharedNanRule) {
  auto payload = [](std::uint32_t index, float value) {
    std::vector<unsigned char> bytes(sk::topk_payload_bytes(1, TopkValues::fp32));
    std::memcpy(bytes.data(), &index, sizeof index);
    std::memcpy(bytes.data() + sizeof index, &value, sizeof value);
    return bytes;
  };
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> dense(4, 0.0f);
  sk::topk_accumulate(payload(1, inf).data(), 1, TopkValues::fp32, dense.data());
  sk::topk_accumulate(payload(1, -inf).data(), 1, TopkValues::fp32, dense.data());
  EXPECT_EQ(sk::float_bits(dense[1]), 0xffc00000u);
  sk::topk_accumulate(payload(2, sk::bits_float(0x7fc00001u)).data(), 1, TopkValues::fp32,
                      dense.data());
  sk::topk_accumulate(payload(2, sk::bits_float(0xffc00002u)).data(), 1, TopkValues::fp32,
                      dense.data());
  EXPECT_EQ(sk::float_bits(dense[2]), 0x7fc00001u) << "the first rank's NaN stays";
}

TEST(Topk, CountAndPayloadBytes) {
  EXPECT_EQ(sk::topk_count(0, 0.5), 0u);
  EXPECT_EQ(sk::topk_count(0, 1.0), 0u);
  EXPECT_EQ(sk::topk_count(10, 0.01), 1u);  // Clamped up to 1.
  EXPECT_EQ(sk::topk_count(10, 0.0), 1u);
  EXPECT_EQ(sk::topk_count(10, -1.0), 1u);
  EXPECT_EQ(sk::topk_count(10, std::nan("")), 1u);
  EXPECT_EQ(sk::topk_count(1000, 0.0015), 2u);  // ceil(1.5).
  EXPECT_EQ(sk::topk_count(1000, 0.25), 250u);  // Exact products are not bumped.
  EXPECT_EQ(sk::topk_count(3, 0.5), 2u);
  EXPECT_EQ(sk::topk_count(100, 0.07), 7u);  // 0.07 x 100 is a hair above 7 in double.
  EXPECT_EQ(sk::topk_count(1000, 0.0071), 8u);
  EXPECT_EQ(sk::topk_count(1001, 0.5), 501u);
  EXPECT_EQ(sk::topk_count(10, 1.0), 10u);
  EXPECT_EQ(sk::topk_count(10, 3.0), 10u);  // Clamped down to n.
  EXPECT_EQ(sk::topk_count(10, std::numeric_limits<double>::infinity()), 10u);
  EXPECT_EQ(sk::topk_count(1, 1e-9), 1u);
  EXPECT_EQ(sk::topk_count(2147483647u, 0.5), 1073741824u);
  EXPECT_EQ(sk::topk_payload_bytes(0, TopkValues::fp32), 0u);
  EXPECT_EQ(sk::topk_payload_bytes(5, TopkValues::fp32), 40u);
  EXPECT_EQ(sk::topk_payload_bytes(5, TopkValues::fp16), 30u);
}

}  // namespace
