// One test suite for every algorithm (algorithms/) on every path that carries
// it (a transport and the memory its collectives take), at any rank count.
// An executable names its paths and runs the suite (run_algorithm_suite);
// a new algorithm is one AlgorithmUnderTest class, listed in
// algorithms_under_test(), and is then tested on every path, with every
// compressor it accepts, at every size.
//
// Each case checks, on every rank: (a) every rank holds the same output bits;
// (b) they are the bits of the plain reference (algorithm_reference.h);
// (c) wire_sent() is the report's formula; (d) with error feedback, the
// residual left behind is the reference's.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "backends/transport.h"
#include "compressors/registry.h"
#include "tests/mpi/algorithm_paths.h"
#include "tests/mpi/algorithm_reference.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {

// An algorithm's phases, whatever its class: the library's own interface
// (algorithms/allreduce.h), so the suite drives exactly what the paths drive.
using Phases = algorithms::Allreduce;
template <class Algorithm>
using PhasesOf = algorithms::AllreduceOf<Algorithm>;

struct CompressorSpec {
  std::string name;
  double ratio;
  bool fp16_values;
  std::string label;  // in test names
};

// What every rank knows of a case: every rank's input and residual.
struct CaseWorld {
  int rank;
  int ranks;
  std::size_t n;
  CompressorSpec compressor;
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> residuals;  // before the call; none without error feedback
  ref::SumOrder sum_order;
  bool device_memory;
};

struct Expected {
  std::vector<float> output;
  std::vector<float> residual;  // this rank's, after the call
  double wire_sent;
};

class AlgorithmUnderTest {
 public:
  virtual ~AlgorithmUnderTest() = default;
  virtual std::string name() const = 0;
  virtual bool accepts(const compressors::Compressor& compressor) const = 0;
  // Bytes of each buffer the algorithm is built over.
  virtual std::vector<std::size_t> buffer_bytes(const compressors::Compressor& compressor,
                                                std::size_t n, int ranks,
                                                bool device_memory) const = 0;
  virtual std::unique_ptr<Phases> make(Path& path, compressors::Compressor& compressor,
                                       std::size_t n,
                                       const std::vector<std::byte*>& buffers) const = 0;
  virtual Expected expect(const CaseWorld& world) const = 0;
};

class CastRingUnderTest final : public AlgorithmUnderTest {
 public:
  std::string name() const override { return "CastRing"; }
  bool accepts(const compressors::Compressor& compressor) const override {
    return compressor.aggregation() == compressors::Aggregation::summable;
  }
  std::vector<std::size_t> buffer_bytes(const compressors::Compressor& compressor, std::size_t n,
                                        int ranks, bool) const override {
    const auto& summable = static_cast<const compressors::SummableCompressor&>(compressor);
    return {algorithms::CastRing::wire_bytes(summable, n),
            algorithms::CastRing::scratch_bytes(summable, n, ranks)};
  }
  std::unique_ptr<Phases> make(Path& path, compressors::Compressor& compressor, std::size_t n,
                               const std::vector<std::byte*>& buffers) const override {
    return std::make_unique<PhasesOf<algorithms::CastRing>>(
        path.transport(), static_cast<compressors::SummableCompressor&>(compressor), n, buffers[0],
        buffers[1]);
  }
  Expected expect(const CaseWorld& world) const override {
    const ref::Half format = world.compressor.name == "fp16" ? ref::Half::fp16 : ref::Half::bf16;
    Expected want;
    std::vector<std::vector<std::uint16_t>> wires;
    for (int r = 0; r < world.ranks; ++r) {
      std::vector<float> residual =
          world.residuals.empty() ? std::vector<float>{} : world.residuals[r];
      wires.push_back(
          ref::cast_compress(format, world.inputs[r], residual.empty() ? nullptr : &residual));
      if (r == world.rank) want.residual = residual;
    }
    want.output = ref::cast_sum(format, wires, world.n, world.sum_order);
    want.wire_sent = ref::ring_allreduce_bytes(world.n * 2, world.ranks);
    return want;
  }
};

class GatheredUnderTest final : public AlgorithmUnderTest {
 public:
  std::string name() const override { return "Gathered"; }
  bool accepts(const compressors::Compressor& compressor) const override {
    return compressor.aggregation() == compressors::Aggregation::gathered;
  }
  // Payloads sit 16-byte aligned in device memory, as the device paths place them.
  static std::size_t slot(std::size_t payload_bytes, bool device_memory) {
    return device_memory ? (payload_bytes + 15) / 16 * 16 : payload_bytes;
  }
  std::vector<std::size_t> buffer_bytes(const compressors::Compressor& compressor, std::size_t n,
                                        int ranks, bool device_memory) const override {
    const std::size_t bytes = slot(compressor.compressed_bytes(n), device_memory);
    return {bytes, bytes * ranks};
  }
  std::unique_ptr<Phases> make(Path& path, compressors::Compressor& compressor, std::size_t n,
                               const std::vector<std::byte*>& buffers) const override {
    return std::make_unique<PhasesOf<algorithms::GatheredAllreduce>>(
        path.transport(), static_cast<compressors::GatheredCompressor&>(compressor), n,
        slot(compressor.compressed_bytes(n), path.device_memory()), buffers[0], buffers[1]);
  }
  Expected expect(const CaseWorld& world) const override {
    const CompressorSpec& spec = world.compressor;
    Expected want;
    std::vector<ref::Sparse> payloads;
    for (int r = 0; r < world.ranks; ++r) {
      std::vector<float> residual =
          world.residuals.empty() ? std::vector<float>{} : world.residuals[r];
      payloads.push_back(ref::topk_compress(world.inputs[r], residual.empty() ? nullptr : &residual,
                                            spec.ratio, spec.fp16_values));
      if (r == world.rank) want.residual = residual;
    }
    want.output = ref::sparse_sum(payloads, world.n);
    const std::size_t payload = ref::topk_payload_bytes(world.n, spec.ratio, spec.fp16_values);
    want.wire_sent = ref::ring_allgather_bytes(slot(payload, world.device_memory), world.ranks);
    return want;
  }
};

// Every algorithm under test: a new one is a class above and a line here.
inline const std::vector<const AlgorithmUnderTest*>& algorithms_under_test() {
  static const CastRingUnderTest cast_ring;
  static const GatheredUnderTest gathered;
  static const std::vector<const AlgorithmUnderTest*> all = {&cast_ring, &gathered};
  return all;
}

inline std::vector<CompressorSpec> compressor_specs() {
  return {{"fp16", 0.01, false, "fp16"},          {"bf16", 0.01, false, "bf16"},
          {"topk", 0.01, false, "topk1pct_fp32"}, {"topk", 0.01, true, "topk1pct_fp16"},
          {"topk", 1.0, false, "topkall_fp32"},   {"topk", 1.0, true, "topkall_fp16"}};
}

struct Case {
  std::string path;
  const AlgorithmUnderTest* algorithm;
  CompressorSpec compressor;
  std::size_t n;
  bool error_feedback;
};

inline std::string case_name(const Case& c) {
  return c.path + "_" + c.algorithm->name() + "_" + c.compressor.label +
         (c.error_feedback ? "_ef" : "_noef") + "_n" + std::to_string(c.n);
}

// Sizes: none, fewer than the ranks, odd splits, a power of two; a million
// once per compressor (on the first path, with error feedback).
inline std::vector<Case> cases_on(const std::vector<std::string>& path_names) {
  const std::size_t sizes[] = {0, 1, 2, 3, 7, 4099, 65536, 100003};
  std::vector<Case> cases;
  for (const std::string& path : path_names) {
    for (const CompressorSpec& spec : compressor_specs()) {
      const auto compressor = compressors::make_compressor(
          spec.name, compressors::CompressorOptions{spec.ratio, spec.fp16_values});
      for (const AlgorithmUnderTest* algorithm : algorithms_under_test()) {
        if (!compressor || !algorithm->accepts(*compressor)) continue;
        for (bool error_feedback : {false, true}) {
          for (std::size_t n : sizes) cases.push_back({path, algorithm, spec, n, error_feedback});
        }
        if (path == path_names.front()) cases.push_back({path, algorithm, spec, 1000003, true});
      }
    }
  }
  return cases;
}

inline std::uint64_t fnv1a(const void* data, std::size_t bytes) {
  std::uint64_t hash = 1469598103934665603ull;
  const auto* at = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ at[i]) * 1099511628211ull;
  return hash;
}

// Whether every rank of MPI_COMM_WORLD holds these bytes: the largest hash
// and the largest complement (the smallest hash) agree. The same answer on every rank.
inline bool same_bits_on_every_rank(const void* data, std::size_t bytes) {
  const std::uint64_t hash = fnv1a(data, bytes);
  const std::uint64_t mine[2] = {hash, ~hash};
  std::uint64_t most[2] = {0, 0};
  MPI_Allreduce(mine, most, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return most[0] == ~most[1];
}

// "" when got and want hold the same bits, else how many differ and the first.
inline std::string differences(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return "sizes differ";
  std::size_t count = 0, first = 0;
  for (std::size_t i = got.size(); i-- > 0;) {
    if (ref::bits_of(got[i]) != ref::bits_of(want[i])) ++count, first = i;
  }
  if (count == 0) return "";
  const auto show = [](float x) {
    char text[48];
    std::snprintf(text, sizeof text, "%a (0x%08x)", x, static_cast<unsigned>(ref::bits_of(x)));
    return std::string(text);
  };
  return std::to_string(count) + " of " + std::to_string(got.size()) + " differ; first at " +
         std::to_string(first) + ": " + show(got[first]) + " instead of " + show(want[first]);
}

// One call of the algorithm on the path; returns its wire_sent().
inline double run_on(Path& path, const AlgorithmUnderTest& algorithm,
                     compressors::Compressor& compressor, std::size_t n, const float* input,
                     float* residual, float* output) {
  const bool device = path.device_memory();
  const std::vector<std::size_t> bytes =
      algorithm.buffer_bytes(compressor, n, path.transport().size(), device);
  std::vector<std::byte*> wire, host_at;
  std::vector<std::vector<std::byte>> twins(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    wire.push_back(path.allocate(bytes[i]));
    twins[i].assign(bytes[i], std::byte{0xa5});  // poisoned: what is never written shows
    if (!device && bytes[i] > 0) std::memcpy(wire[i], twins[i].data(), bytes[i]);
    host_at.push_back(device ? twins[i].data() : wire[i]);
  }
  const std::unique_ptr<Phases> on_host = algorithm.make(path, compressor, n, host_at);
  const std::unique_ptr<Phases> on_device =
      device ? algorithm.make(path, compressor, n, wire) : nullptr;
  Phases& on_wire = device ? *on_device : *on_host;
  on_host->compress(input, residual);
  for (std::size_t i = 0; device && i < bytes.size(); ++i)
    path.to_device(wire[i], host_at[i], bytes[i]);
  const Status status = on_wire.communicate();
  EXPECT_TRUE(status.ok()) << "communicate(): domain " << static_cast<int>(status.domain())
                           << ", code " << status.code();
  path.synchronize();
  for (std::size_t i = 0; device && i < bytes.size(); ++i)
    path.to_host(host_at[i], wire[i], bytes[i]);
  path.synchronize();
  on_host->finish(output);
  const double sent = on_wire.wire_sent();
  for (std::byte* buffer : wire) path.release(buffer);
  return sent;
}

class AlgorithmSuite : public ::testing::TestWithParam<Case> {};

TEST_P(AlgorithmSuite, SameBitsAsTheReferenceOnEveryRank) {
  const Case& c = GetParam();
  Path& path = *paths().at(c.path);
  backends::Transport& transport = path.transport();
  const auto compressor = compressors::make_compressor(
      c.compressor.name,
      compressors::CompressorOptions{c.compressor.ratio, c.compressor.fp16_values});
  ASSERT_NE(compressor, nullptr);
  if (const auto* summable = dynamic_cast<compressors::SummableCompressor*>(compressor.get())) {
    const auto format = summable->native_format();
    EXPECT_EQ(format && transport.sums_natively(*format),
              path.sum_order() == ref::SumOrder::rank_order)
        << "the reference's order of 16-bit sums is not this path's";
  }

  const std::string name = case_name(c);
  const std::uint64_t seed = fnv1a(name.data(), name.size());
  CaseWorld world{transport.rank(), transport.size(),    c.n, c.compressor, {}, {},
                  path.sum_order(), path.device_memory()};
  for (int r = 0; r < world.ranks; ++r) {
    world.inputs.push_back(ref::input_of(r, seed, c.n));
    if (c.error_feedback) world.residuals.push_back(ref::residual_of(r, seed, c.n));
  }
  std::vector<float> residual =
      c.error_feedback ? world.residuals[world.rank] : std::vector<float>{};
  std::vector<float> output(c.n, NAN);
  const double wire_sent =
      run_on(path, *c.algorithm, *compressor, c.n, world.inputs[world.rank].data(),
             c.error_feedback ? residual.data() : nullptr, output.data());
  const Expected want = c.algorithm->expect(world);

  EXPECT_TRUE(same_bits_on_every_rank(output.data(), output.size() * sizeof(float)))  // (a)
      << "ranks hold different results";
  EXPECT_EQ(differences(output, want.output), "") << "output against the reference";          // (b)
  EXPECT_DOUBLE_EQ(wire_sent, want.wire_sent) << "wire_sent() against the report's formula";  // (c)
  if (c.error_feedback) {
    EXPECT_EQ(differences(residual, want.residual), "") << "residual against the reference";  // (d)
  }
}

// main() of an executable that runs the suite on `makers`' paths.
inline int run_algorithm_suite(int argc, char** argv, PathMakers makers) {
  ::testing::AddGlobalTestEnvironment(new PathsEnvironment(std::move(makers)));  // gtest owns it
  return run_all_tests_under_mpi(argc, argv);
}

}  // namespace slimreduce::testing
