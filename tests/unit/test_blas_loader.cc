// The private OpenBLAS (kernels/blas_loader.h) and PowerSGD's two products
// through it (kernels/low_rank.h): loaded out of the process's main link-map
// namespace, so the job never sees it; its products within float rounding of
// a float64 reference and of our loops, short last row included; the same
// bits call after call and wherever the buffers lie; and the compressor
// taking the BLAS or our loops as SLIMREDUCE_POWERSGD_BLAS says. Needs
// Debian's libopenblas0-serial (scripts/setup.sh installs it).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "compressors/registry.h"
#include "kernels/blas_loader.h"
#include "kernels/low_rank.h"
#include "tests/unit/low_rank_reference.h"

namespace sk = slimreduce::kernels;
namespace sc = slimreduce::compressors;
using sk::LowRankShape;
using namespace slimreduce::kernels::testing;

namespace {

const sk::PrivateBlas& blas() {
  const sk::PrivateBlas* loaded = sk::PrivateBlas::process();
  if (!loaded) {
    ADD_FAILURE() << "no private OpenBLAS (install libopenblas0-serial: scripts/setup.sh): "
                  << sk::PrivateBlas::process_failure();
    std::abort();
  }
  return *loaded;
}

TEST(PrivateBlas, LoadedOutsideTheMainNamespace) {
  const sk::PrivateBlas& loaded = blas();
  EXPECT_NE(loaded.description().find("OpenBLAS"), std::string::npos) << loaded.description();
  EXPECT_NE(loaded.description().find(sk::PrivateBlas::default_path()), std::string::npos);
  EXPECT_EQ(sk::PrivateBlas::process_failure(), "");
  // Nothing of it in the main namespace, where the job's objects resolve
  // their symbols: neither its cblas_sgemm nor the file itself.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "cblas_sgemm"), nullptr);
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "openblas_get_config"), nullptr);
  void* main_copy = dlopen(sk::PrivateBlas::default_path(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_EQ(main_copy, nullptr) << "the OpenBLAS file is loaded in the main namespace";
  if (main_copy) dlclose(main_copy);
}

TEST(PrivateBlas, MissingLibraryIsAReasonNotACrash) {
  std::string why;
  EXPECT_EQ(sk::PrivateBlas::load("/nonexistent/libopenblas.so.0", &why), nullptr);
  EXPECT_NE(why.find("/nonexistent/libopenblas.so.0"), std::string::npos) << why;
  EXPECT_EQ(sk::PrivateBlas::load("", &why), nullptr);
}

class BlasProducts : public ::testing::TestWithParam<ShapeParam> {
 protected:
  LowRankShape shape() const { return shape_of(GetParam()); }
};

TEST_P(BlasProducts, ProjectWithinRoundingOfReferenceAndOurLoops) {
  const LowRankShape s = shape();
  const auto m = random_floats(s.count, 1);
  const auto q = random_floats(s.q_floats(), 2);
  std::vector<float> p(s.p_floats(), 42.0f), ours(s.p_floats());
  sk::low_rank_project_blas(blas(), m.data(), s, q.data(), p.data());
  sk::low_rank_project(m.data(), s, q.data(), ours.data());
  for (std::size_t i = 0; i < s.rows; ++i) {
    for (std::size_t k = 0; k < s.rank; ++k) {
      const Reference r = project_reference(m, s, q, i, k);
      // Any order of cols rounded products and adds (fused or not): at most
      // (cols + 1) roundings each side.
      const double bound = (s.cols + 1) * kUnit * r.magnitude + 1e-30;
      const std::size_t e = i * s.rank + k;
      ASSERT_LE(std::fabs(p[e] - r.exact), bound) << "p[" << i << "][" << k << "]";
      ASSERT_LE(std::fabs(p[e] - ours[e]), 2 * bound) << "p[" << i << "][" << k << "]";
    }
  }
}

TEST_P(BlasProducts, BackProjectWithinRoundingOfReferenceAndOurLoops) {
  const LowRankShape s = shape();
  const auto m = random_floats(s.count, 3);
  const auto p = random_floats(s.p_floats(), 4);
  std::vector<float> q(s.q_floats(), 42.0f), ours(s.q_floats());  // overwritten, not added to
  sk::low_rank_back_project_blas(blas(), m.data(), s, p.data(), q.data());
  sk::low_rank_back_project(m.data(), s, p.data(), ours.data());
  for (std::size_t j = 0; j < s.cols; ++j) {
    for (std::size_t k = 0; k < s.rank; ++k) {
      const Reference r = back_project_reference(m, s, p, j, k);
      const double bound = (s.rows + 1) * kUnit * r.magnitude + 1e-30;
      const std::size_t e = j * s.rank + k;
      ASSERT_LE(std::fabs(q[e] - r.exact), bound) << "q[" << j << "][" << k << "]";
      ASSERT_LE(std::fabs(q[e] - ours[e]), 2 * bound) << "q[" << j << "][" << k << "]";
    }
  }
}

// One order of adds run to run: the same bits on a second call, and with
// every buffer moved by one float (other alignment, another peel).
TEST_P(BlasProducts, SameBitsCallAfterCallAndAtAnyAlignment) {
  const LowRankShape s = shape();
  const auto m = random_floats(s.count, 5);
  const auto q = random_floats(s.q_floats(), 6);
  const auto p_in = random_floats(s.p_floats(), 7);
  std::vector<float> p1(s.p_floats()), p2(s.p_floats()), q1(s.q_floats()), q2(s.q_floats());
  sk::low_rank_project_blas(blas(), m.data(), s, q.data(), p1.data());
  sk::low_rank_project_blas(blas(), m.data(), s, q.data(), p2.data());
  EXPECT_TRUE(same_bits(p1, p2));
  sk::low_rank_back_project_blas(blas(), m.data(), s, p_in.data(), q1.data());
  sk::low_rank_back_project_blas(blas(), m.data(), s, p_in.data(), q2.data());
  EXPECT_TRUE(same_bits(q1, q2));

  std::vector<float> m_moved(s.count + 1), q_moved(s.q_floats() + 1), p_moved(s.p_floats() + 1);
  std::copy(m.begin(), m.end(), m_moved.begin() + 1);
  std::copy(q.begin(), q.end(), q_moved.begin() + 1);
  std::copy(p_in.begin(), p_in.end(), p_moved.begin() + 1);
  std::vector<float> p_out(s.p_floats() + 1), q_out(s.q_floats() + 1);
  sk::low_rank_project_blas(blas(), m_moved.data() + 1, s, q_moved.data() + 1, p_out.data() + 1);
  sk::low_rank_back_project_blas(blas(), m_moved.data() + 1, s, p_moved.data() + 1,
                                 q_out.data() + 1);
  EXPECT_EQ(std::memcmp(p_out.data() + 1, p1.data(), p1.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(q_out.data() + 1, q1.data(), q1.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlasProducts,
                         ::testing::Values(ShapeParam{64, 64, 1, 0}, ShapeParam{33, 100, 4, 0},
                                           ShapeParam{100, 99, 4, 57},     // short last row
                                           ShapeParam{17, 1000, 16, 999},  // one element in it
                                           ShapeParam{1, 40, 1, 17},       // only a short row
                                           ShapeParam{512, 512, 16, 0}, ShapeParam{300, 301, 64, 1},
                                           ShapeParam{512, 512, 1, 0},  // r = 1: sgemv
                                           ShapeParam{1000, 999, 1, 500}));

// The compressor's products: the BLAS's bits unless told builtin.
TEST(PowerSgdCompressorProducts, FollowTheSetting) {
  const std::size_t count = 100 * 99 - 57;
  const sc::PowerSgdProducts choices[] = {sc::PowerSgdProducts::builtin,
                                          sc::PowerSgdProducts::openblas,
                                          sc::PowerSgdProducts::automatic};
  for (const sc::PowerSgdProducts choice : choices) {
    sc::CompressorOptions options;
    options.powersgd_rank = 4;
    options.powersgd_min_compression = 1.0;
    options.powersgd_products = choice;
    const auto made = sc::make_compressor("powersgd", options);
    const auto& compressor = static_cast<const sc::LowRankCompressor&>(*made);
    const LowRankShape s = compressor.shape(count, 0);
    ASSERT_EQ(s.rank, 4u);
    const auto m = random_floats(count, 8);
    const auto q = random_floats(s.q_floats(), 9);
    std::vector<float> ours(s.p_floats()), theirs(s.p_floats()), p(s.p_floats());
    sk::low_rank_project(m.data(), s, q.data(), ours.data());
    sk::low_rank_project_blas(blas(), m.data(), s, q.data(), theirs.data());
    ASSERT_FALSE(same_bits(ours, theirs)) << "another seed: the test cannot tell them apart";
    compressor.project(m.data(), s, q.data(), p.data());
    const bool builtin = choice == sc::PowerSgdProducts::builtin;
    EXPECT_TRUE(same_bits(p, builtin ? ours : theirs)) << compressor.products();
    const std::string expected = builtin ? "our loops" : "cblas_sgemm of a private OpenBLAS";
    EXPECT_EQ(compressor.products().rfind(expected, 0), 0u) << compressor.products();
  }
}

}  // namespace
