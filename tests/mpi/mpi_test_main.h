// GoogleTest under mpirun: every rank runs every test; only rank 0 prints the
// progress, every rank prints its own failures; the exit code is the worst over ranks.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>

namespace slimreduce::testing {

inline int run_all_tests_under_mpi(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    // Release hands ownership back to us; dropping it silences this rank.
    std::unique_ptr<::testing::TestEventListener>(
        listeners.Release(listeners.default_result_printer()));
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  PMPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}

}  // namespace slimreduce::testing
