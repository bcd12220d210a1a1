// backends/status.h: one Status for the error domains below the runtime, and
// what the caller's library would have returned for each (mpi_code, nccl_code).
#include <gtest/gtest.h>

#include "backends/mpi_transport.h"
#include "backends/status.h"
#ifdef SLIMREDUCE_HAVE_CUDA
#include "backends/nccl_transport.h"
#endif

namespace slimreduce {
namespace {

TEST(Status, SuccessInAnyDomainIsOk) {
  EXPECT_TRUE(Status().ok());
  EXPECT_TRUE(Status::mpi(0).ok());
  EXPECT_TRUE(Status::nccl(0).ok());
  EXPECT_TRUE(Status::cuda(0).ok());
  EXPECT_FALSE(Status::mpi(5).ok());
  EXPECT_EQ(Status::mpi(5).domain(), ErrorDomain::mpi);
  EXPECT_EQ(Status::mpi(5).code(), 5);
  EXPECT_FALSE(Status::no_memory().ok());
  EXPECT_FALSE(Status::internal().ok());
}

Status first_failure(int* steps, Status a, Status b, Status c) {
  for (const Status& s : {a, b, c}) {
    ++*steps;
    SLIMREDUCE_TRY(s);
  }
  return {};
}

TEST(Status, TryReturnsTheFirstFailureAndStops) {
  int steps = 0;
  EXPECT_EQ(first_failure(&steps, {}, Status::cuda(2), Status::mpi(3)), Status::cuda(2));
  EXPECT_EQ(steps, 2);
  steps = 0;
  EXPECT_TRUE(first_failure(&steps, {}, {}, {}).ok());
  EXPECT_EQ(steps, 3);
}

TEST(Status, TheMpiCallerGetsAnMpiCode) {
  EXPECT_EQ(backends::mpi_code({}), MPI_SUCCESS);
  EXPECT_EQ(backends::mpi_code(Status::mpi(MPI_ERR_TRUNCATE)), MPI_ERR_TRUNCATE);
  EXPECT_EQ(backends::mpi_code(Status::no_memory()), MPI_ERR_NO_MEM);
  EXPECT_EQ(backends::mpi_code(Status::internal()), MPI_ERR_INTERN);
  EXPECT_EQ(backends::mpi_code(Status::cuda(2)), MPI_ERR_OTHER) << "a failed CUDA step";
  EXPECT_EQ(backends::mpi_code(Status::nccl(2)), MPI_ERR_OTHER);
}

#ifdef SLIMREDUCE_HAVE_CUDA
TEST(Status, TheNcclCallerGetsAnNcclResult) {
  EXPECT_EQ(backends::nccl_code({}), ncclSuccess);
  EXPECT_EQ(backends::nccl_code(Status::nccl(ncclInvalidUsage)), ncclInvalidUsage);
  EXPECT_EQ(backends::nccl_code(Status::nccl(ncclInProgress)), ncclInProgress)
      << "a non-blocking communicator's answer passes through";
  EXPECT_EQ(backends::nccl_code(Status::cuda(2)), ncclUnhandledCudaError);
  EXPECT_EQ(backends::nccl_code(Status::no_memory()), ncclSystemError);
  EXPECT_EQ(backends::nccl_code(Status::mpi(MPI_ERR_OTHER)), ncclSystemError);
}
#endif

}  // namespace
}  // namespace slimreduce
