// The algorithms over the real MPI (MpiTransport, linked, no preload), at any
// rank count: host memory, and staged_host, the pinned buffers that stand in
// for device memory where MPI cannot read it. Without CUDA here, staged_host
// runs on plain host memory (the algorithms never read the memory kind; the
// host simulation's test runs it on pinned memory too).
#include "tests/mpi/algorithm_suite.h"
#include "tests/mpi/transport_suite.h"

namespace slimreduce::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(Mpi, AlgorithmSuite,
                         ::testing::ValuesIn(cases_on({"mpi_host", "mpi_staged"})),
                         [](const auto& info) { return case_name(info.param); });

INSTANTIATE_TEST_SUITE_P(Mpi, TransportSuite, transport_cases({"mpi_host", "mpi_staged"}),
                         transport_case_name);
INSTANTIATE_TEST_SUITE_P(Mpi, TransportSplit, ::testing::Values("mpi_host", "mpi_staged"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) {
  using slimreduce::backends::MemoryKind;
  using slimreduce::testing::MpiPath;
  return slimreduce::testing::run_algorithm_suite(
      argc, argv,
      {{"mpi_host", [] { return std::make_unique<MpiPath>(MemoryKind::host); }},
       {"mpi_staged", [] { return std::make_unique<MpiPath>(MemoryKind::staged_host); }}});
}
