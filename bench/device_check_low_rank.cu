// The PowerSGD steps on the GPU (kernels/cuda/low_rank.cu) against their CPU
// twins (kernels/low_rank.h): low_rank_add, low_rank_finish and
// orthonormalise bit for bit; the cuBLAS products against an fp64 reference
// within fp32 rounding (cuBLAS adds in an order of its own). Without cuBLAS
// on the machine, the product checks and timings say SKIP and the rest runs.
#include "bench/device_check_util.cuh"

namespace slimreduce::device_check {
namespace {

constexpr std::uint32_t kPoisonBits = 0xA5A5A5A5u;  // poison()'s bytes, as a float

// Well-conditioned factors: normals, never all zero.
std::vector<float> normals(std::size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

std::string shape_name(const k::LowRankShape& s) {
  return std::to_string(s.rows) + "x" + std::to_string(s.cols) +
         (s.count != s.rows * s.cols ? "p" : "") + " r" + std::to_string(s.rank);
}

// A shape with the rank asked for (min_compression 0: never refused).
k::LowRankShape shape_of(std::size_t count, std::size_t rank, std::size_t given_rows = 0) {
  return k::low_rank_shape(count, rank, 0.0, given_rows);
}

void check_add(std::size_t n) {
  const std::vector<float> in = values(n, true), res = values(n, true);
  auto din = dev(n * 4), dres = dev(n * 4), dm = dev(n * 4);
  put(din.get(), in);
  put(dres.get(), res);
  poison(dm.get(), n * 4);
  auto* gm = reinterpret_cast<float*>(dm.get());
  CK(cu::low_rank_add(reinterpret_cast<float*>(din.get()), reinterpret_cast<float*>(dres.get()), gm,
                      n, nullptr));
  std::vector<float> want(n);
  // algorithms/powersgd.cc's `input + residual` under the rule that pins down
  // which of two NaNs an x86 add returns (compilers may swap the operands).
  for (std::size_t e = 0; e < n; ++e) want[e] = k::add_nan_first(in[e], res[e]);
  std::string where;
  const bool ok = same_bits(get<float>(gm, n), want, &where);
  report("low_rank_add n=" + std::to_string(n) + " NaN/inf", ok, where);
}

// dependent: column 2 a multiple of column 0 (it must come back as zeros).
void check_orthonormalise(std::size_t rows, std::size_t rank, bool dependent = false) {
  std::vector<float> p = values(rows * rank, false);
  if (dependent)
    for (std::size_t i = 0; i < rows; ++i) p[i * rank + 2] = 2.0f * p[i * rank];
  auto dp = dev(p.size() * 4);
  auto* gp = reinterpret_cast<float*>(dp.get());
  put(gp, p);
  CK(cu::orthonormalise(gp, rows, rank, nullptr));
  k::orthonormalise(p.data(), rows, rank);
  std::string where;
  bool ok = same_bits(get<float>(gp, p.size()), p, &where);
  if (ok && dependent) {
    for (std::size_t i = 0; i < rows; ++i) ok = ok && p[i * rank + 2] == 0.0f;
    if (!ok) where = "the dependent column is not zero on the CPU";
  }
  report("orthonormalise " + std::to_string(rows) + "x" + std::to_string(rank) +
             (dependent ? " dependent col" : ""),
         ok, where);
}

void check_finish(const k::LowRankShape& s, bool with_residual, bool in_place) {
  const std::vector<float> m = values(s.count, false), p = normals(s.p_floats()),
                           qs = normals(s.q_floats()), ql = normals(s.q_floats());
  auto dm = dev(s.count * 4), dp = dev(p.size() * 4), dqs = dev(qs.size() * 4),
       dql = dev(ql.size() * 4), dout = dev(s.count * 4), dres = dev(s.count * 4);
  auto* gm = reinterpret_cast<float*>(dm.get());
  auto* gout = in_place ? gm : reinterpret_cast<float*>(dout.get());
  auto* gres = with_residual ? reinterpret_cast<float*>(dres.get()) : nullptr;
  put(gm, m);
  put(dp.get(), p);
  put(dqs.get(), qs);
  put(dql.get(), ql);
  if (!in_place) poison(gout, s.count * 4);
  if (gres) poison(gres, s.count * 4);
  CK(cu::low_rank_finish(gm, s, reinterpret_cast<float*>(dp.get()),
                         reinterpret_cast<float*>(dqs.get()), reinterpret_cast<float*>(dql.get()),
                         gout, gres, nullptr));
  std::vector<float> out(s.count), res(s.count);
  k::low_rank_finish(m.data(), s, p.data(), qs.data(), ql.data(), out.data(),
                     with_residual ? res.data() : nullptr, k::Isa::scalar);
  std::string where;
  bool ok = same_bits(get<float>(gout, s.count), out, &where);
  if (ok && gres) {
    ok = same_bits(get<float>(gres, s.count), res, &where);
    if (!ok) where = "residual: " + where;
  }
  report("low_rank_finish " + shape_name(s) + (with_residual ? " +res" : "") +
             (in_place ? " in place" : ""),
         ok, where);
}

// ||got - want|| / ||want|| (want in fp64), or "" and 1 when an element was
// never written (still the poison's bits).
double relative_error(const std::vector<float>& got, const std::vector<double>& want,
                      std::string* where) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    if (k::float_bits(got[e]) == kPoisonBits) {
      *where = "element " + std::to_string(e) + " never written";
      return 1.0;
    }
    diff += (got[e] - want[e]) * (got[e] - want[e]);
    norm += want[e] * want[e];
  }
  return std::sqrt(diff / norm);
}

// P = M Q and Q = M^T P against fp64 sums over the stored elements.
void check_products(const k::LowRankShape& s) {
  const std::size_t r = s.rank;
  const std::vector<float> m = normals(s.count), q = normals(s.q_floats()),
                           p = normals(s.p_floats());
  std::vector<double> want_p(s.p_floats(), 0.0), want_q(s.q_floats(), 0.0);
  for (std::size_t i = 0; i < s.rows; ++i) {
    for (std::size_t j = 0; j < s.row_length(i); ++j) {
      const double x = m[i * s.cols + j];
      for (std::size_t c = 0; c < r; ++c) {
        want_p[i * r + c] += x * q[j * r + c];
        want_q[j * r + c] += x * p[i * r + c];
      }
    }
  }
  auto dm = dev(s.count * 4), dq = dev(q.size() * 4), dp = dev(p.size() * 4),
       dpo = dev(p.size() * 4), dqo = dev(q.size() * 4);
  auto* gm = reinterpret_cast<float*>(dm.get());
  put(gm, m);
  put(dq.get(), q);
  put(dp.get(), p);
  poison(dpo.get(), p.size() * 4);
  poison(dqo.get(), q.size() * 4);
  CK(cu::low_rank_project(gm, s, reinterpret_cast<float*>(dq.get()),
                          reinterpret_cast<float*>(dpo.get()), nullptr));
  CK(cu::low_rank_back_project(gm, s, reinterpret_cast<float*>(dp.get()),
                               reinterpret_cast<float*>(dqo.get()), nullptr));
  for (int which = 0; which < 2; ++which) {
    std::string where;
    const double error = which == 0
                             ? relative_error(get<float>(dpo.get(), p.size()), want_p, &where)
                             : relative_error(get<float>(dqo.get(), q.size()), want_q, &where);
    char text[64];
    std::snprintf(text, sizeof text, "rel err %.2e", error);
    report(std::string(which == 0 ? "low_rank_project " : "low_rank_back_project ") + shape_name(s),
           error <= 1e-5, where.empty() ? text : where);
  }
}

// flag_not_finite on finite values (stays 0, from 0), one inf or NaN at
// `at` (becomes 1), and a flag already 1 (stays 1).
void check_flag(std::size_t n, std::size_t at, std::uint32_t special_bits, unsigned start) {
  std::vector<float> v = values(n, false);
  if (at < n) v[at] = k::bits_float(special_bits);
  auto dv = dev(n * 4), dflag = dev(4);
  put(reinterpret_cast<float*>(dv.get()), v);
  put(reinterpret_cast<unsigned*>(dflag.get()), std::vector<unsigned>{start});
  CK(cu::flag_not_finite(reinterpret_cast<float*>(dv.get()), n,
                         reinterpret_cast<unsigned*>(dflag.get()), nullptr));
  const unsigned got = get<unsigned>(reinterpret_cast<unsigned*>(dflag.get()), 1)[0];
  const unsigned want = start | (k::all_finite(v.data(), n) ? 0u : 1u);
  report("flag_not_finite n=" + std::to_string(n) + " at " + std::to_string(at) + " from " +
             std::to_string(start),
         got == want, "got " + std::to_string(got) + ", want " + std::to_string(want));
}

// low_rank_settle against its twin: out, residual and the key's Q, either way of `bad`.
void check_settle(std::size_t n, std::size_t q_floats, bool bad, int divisor) {
  std::vector<float> out = values(n, true), res = values(n, true);
  const std::vector<float> q_sum = values(q_floats, false);
  std::vector<float> q_state = values(q_floats, false);
  auto dout = dev(n * 4), dres = dev(n * 4), dqs = dev(q_floats * 4), dq = dev(q_floats * 4),
       dbad = dev(4);
  auto* gout = reinterpret_cast<float*>(dout.get());
  auto* gres = reinterpret_cast<float*>(dres.get());
  auto* gq = reinterpret_cast<float*>(dq.get());
  put(gout, out);
  put(gres, res);
  put(reinterpret_cast<float*>(dqs.get()), q_sum);
  put(gq, q_state);
  put(reinterpret_cast<unsigned*>(dbad.get()), std::vector<unsigned>{bad ? 1u : 0u});
  CK(cu::low_rank_settle(reinterpret_cast<unsigned*>(dbad.get()), gout, gres, n, divisor,
                         reinterpret_cast<float*>(dqs.get()), gq, q_floats, nullptr));
  k::low_rank_settle(bad, out.data(), res.data(), n, divisor, q_sum.data(), q_state.data(),
                     q_floats);
  std::string where;
  bool ok = same_bits(get<float>(gout, n), out, &where);
  ok = ok && same_bits(get<float>(gres, n), res, &where);
  ok = ok && same_bits(get<float>(gq, q_floats), q_state, &where);
  report("low_rank_settle n=" + std::to_string(n) + (bad ? " bad" : " ok") + " /" +
             std::to_string(divisor),
         ok, where);
}

}  // namespace

void check_low_rank() {
  check_flag(1'000'003, SIZE_MAX, 0, 0);
  check_flag(1'000'003, 999'999, 0x7f800000u, 0);  // inf near the end
  check_flag(4097, 0, 0xffc00001u, 0);             // NaN first
  check_flag(100, SIZE_MAX, 0, 1);                 // already set: stays
  for (const bool bad : {false, true})
    for (const int divisor : {1, 3}) check_settle(1'000'003, 4004, bad, divisor);
  check_settle(100, 100'000, false, 1);  // Q longer than the tensor
  check_add(1'000'003);
  for (const std::size_t rows : {1, 7, 1000, 4097, 100'003})
    for (const std::size_t rank : {1, 4, 8}) check_orthonormalise(rows, rank);
  check_orthonormalise(1000, 4, true);
  const k::LowRankShape padded = shape_of(1'000'003, 4);  // 1000 x 1001, last row of 4
  const k::LowRankShape square = shape_of(1024 * 1024, 8);
  for (const bool with_residual : {false, true}) {
    for (const bool in_place : {false, true}) {
      check_finish(padded, with_residual, in_place);
      check_finish(square, with_residual, in_place);
    }
  }
  check_finish(shape_of(300'007, 64), true, false);  // the largest rank
  // The register-tiled kernel's ranks (up to 4, 8, 16), a rank that fills
  // none of them, the row-per-block kernel past 16, and narrow rows.
  check_finish(shape_of(1'000'003, 1), true, true);
  check_finish(shape_of(1'000'003, 12), true, false);
  check_finish(shape_of(600'011, 16), true, true);
  check_finish(shape_of(300'007, 17), true, false);
  check_finish(shape_of(1'000'000, 4, 10'000), true, true);  // 10000 x 100
  std::string why;
  if (!cu::cublas_available(&why)) {
    std::printf("check %-44s SKIP cuBLAS unavailable: %s\n", "low_rank products", why.c_str());
    return;
  }
  check_products(padded);
  check_products(shape_of(1'000'003, 1));
  check_products(shape_of(7, 1, 1));  // one row
  check_products(square);
  check_products(shape_of(std::size_t{4096} * 16384, 4, 4096));
}

void time_low_rank(std::size_t n_floats, double copy_gbs) {
  // 64 Mi floats (the default): 8192 x 8192.
  const k::LowRankShape s = shape_of(n_floats, 4);
  const std::size_t n = s.count, r = s.rank;
  auto dm = dev(n * 4), dout = dev(n * 4), dres = dev(n * 4), dp = dev(s.p_floats() * 4),
       dq = dev(s.q_floats() * 4), dq2 = dev(s.q_floats() * 4);
  auto* m = reinterpret_cast<float*>(dm.get());
  auto* out = reinterpret_cast<float*>(dout.get());
  auto* res = reinterpret_cast<float*>(dres.get());
  auto* p = reinterpret_cast<float*>(dp.get());
  auto* q = reinterpret_cast<float*>(dq.get());
  auto* q2 = reinterpret_cast<float*>(dq2.get());
  put(m, normals(n));
  put(res, normals(n));
  put(p, normals(s.p_floats()));
  put(q, normals(s.q_floats()));
  put(q2, normals(s.q_floats()));
  auto line = [&](const char* what, double bytes, float ms) {
    const double gbs = bytes / ms / 1e6;
    std::printf("time %-34s %9.3f ms %8.0f GB/s %5.0f%% of copy\n", what, ms, gbs,
                100.0 * gbs / copy_gbs);
  };
  const double factors = 4.0 * (s.p_floats() + s.q_floats());
  const std::string name = shape_name(s);
  line("low_rank_add (2 r, 1 w)", 12.0 * n,
       median_ms([&] { CK(cu::low_rank_add(m, res, out, n, nullptr)); }));
  line(("low_rank_finish +res " + name).c_str(), 12.0 * n + factors + 4.0 * s.q_floats(),
       median_ms([&] { CK(cu::low_rank_finish(m, s, p, q, q2, out, res, nullptr)); }));
  line(("orthonormalise " + std::to_string(s.rows) + "x" + std::to_string(r)).c_str(),
       8.0 * s.rows * r, median_ms([&] { CK(cu::orthonormalise(p, s.rows, r, nullptr)); }, 5));
  std::string why;
  if (!cu::cublas_available(&why)) {
    std::printf("time %-34s SKIP cuBLAS unavailable: %s\n", "low_rank products", why.c_str());
    return;
  }
  line(("project P=MQ " + name).c_str(), 4.0 * n + factors,
       median_ms([&] { CK(cu::low_rank_project(m, s, q, p, nullptr)); }));
  line(("back_project Q=MtP " + name).c_str(), 4.0 * n + factors,
       median_ms([&] { CK(cu::low_rank_back_project(m, s, p, q, nullptr)); }));
}

}  // namespace slimreduce::device_check
