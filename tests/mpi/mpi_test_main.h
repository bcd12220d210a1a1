// GoogleTest under mpirun: every rank runs every test; only rank 0 prints the
// progress, every rank prints its own failures; the exit code is the worst over ranks.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <memory>

#include "tests/strict_filter.h"

namespace slimreduce::testing {

// What the other ranks print instead of GoogleTest's progress: their own
// failures, each marked with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

// Runs the tests once MPI and GoogleTest are initialized; finalizes MPI.
inline int run_initialized_tests() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    // Release hands ownership back to us; dropping it silences this rank.
    std::unique_ptr<::testing::TestEventListener>(
        listeners.Release(listeners.default_result_printer()));
    listeners.Append(std::make_unique<RankFailurePrinter>(rank).release());  // gtest owns it
  }
  // Every rank registers the same tests, so every rank reaches the same verdict.
  int failed = 1;
  if (every_filter_pattern_names_a_test(rank == 0)) failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  PMPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}

inline int run_all_tests_under_mpi(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return run_initialized_tests();
}

}  // namespace slimreduce::testing
