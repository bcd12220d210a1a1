// A compressed call that fails inside SlimReduce (here: out of memory, under
// a cap on the address space) must reach the caller as the real call's error
// would: through the communicator's error handler, once, on the caller's
// communicator, and the next call must work. Run under LD_PRELOAD with a
// compressor and error feedback on (the residual is the allocation that fails).
// FatalHandler.* runs alone: under MPI_ERRORS_ARE_FATAL the job must stop.
#include <sys/resource.h>

#include <cstdio>
#include <fstream>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

// Larger than the headroom below by far: its residual cannot be allocated.
constexpr int kLargeCount = 16 << 20;  // 64 MiB of floats
constexpr rlim_t kHeadroomBytes = 8 << 20;

// Caps the address space just above what the process maps now, for one call.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(rlim_t headroom_bytes = kHeadroomBytes) {
    getrlimit(RLIMIT_AS, &saved_);
    std::ifstream statm("/proc/self/statm");
    rlim_t pages = 0;
    statm >> pages;
    rlimit capped = saved_;
    capped.rlim_cur = pages * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + headroom_bytes;
    applied_ = setrlimit(RLIMIT_AS, &capped) == 0;
  }
  ~AddressSpaceCap() { setrlimit(RLIMIT_AS, &saved_); }
  bool applied() const { return applied_; }

 private:
  rlimit saved_{};
  bool applied_ = false;
};

// What the handler of the caller's communicator saw.
struct HandlerLog {
  int calls = 0;
  int code = MPI_SUCCESS;
  MPI_Comm comm = MPI_COMM_NULL;
};
HandlerLog handler_log;

void recording_handler(MPI_Comm* comm, int* code, ...) {
  ++handler_log.calls;
  handler_log.code = *code;
  handler_log.comm = *comm;
}

int error_class(int code) {
  int error_class = MPI_SUCCESS;
  MPI_Error_class(code, &error_class);
  return error_class;
}

// Whether `got` is the error the real call gives, `real` (and `real_again`,
// the same real call's code a second time). MPICH's codes carry an instance
// of their message, so two identical calls give two codes of one class; Open
// MPI's are the class itself. So: the real one's class, and its very code
// where the real library repeats its code.
::testing::AssertionResult same_error(int got, int real, int real_again) {
  if (error_class(got) != error_class(real))
    return ::testing::AssertionFailure()
           << "class " << error_class(got) << ", the real call's " << error_class(real);
  if (real == real_again && got != real)
    return ::testing::AssertionFailure() << "code " << got << ", the real call's " << real;
  return ::testing::AssertionSuccess();
}

// Small integers: every sum is exact in fp16, bf16 and top-k at any ratio.
std::vector<float> ones_times(int rank, std::size_t count) {
  return std::vector<float>(count, static_cast<float>(rank + 1));
}

// A duplicate of MPI_COMM_WORLD with the given handler, its private
// communicator already made by one compressed call (as in any job's first step).
class CommWithHandler {
 public:
  explicit CommWithHandler(MPI_Errhandler handler) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, handler);
    std::vector<float> warm = ones_times(world_rank(), 1 << 16);
    warm_rc_ = MPI_Allreduce(MPI_IN_PLACE, warm.data(), static_cast<int>(warm.size()), MPI_FLOAT,
                             MPI_SUM, comm_);
  }
  ~CommWithHandler() { MPI_Comm_free(&comm_); }
  MPI_Comm get() const { return comm_; }
  int warm_rc() const { return warm_rc_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int warm_rc_ = MPI_ERR_OTHER;
};

// The large call under the cap, then again without it.
struct Outcome {
  int capped_rc = MPI_SUCCESS;
  int retry_rc = MPI_ERR_OTHER;
  std::uint64_t compressed_while_capped = 0;
  std::vector<float> retried;
};

Outcome fail_then_retry(MPI_Comm comm) {
  Outcome outcome;
  std::vector<float> data = ones_times(world_rank(), kLargeCount);
  slimreduce_counters before{}, after{};
  read_counters(&before);
  {
    AddressSpaceCap cap;
    EXPECT_TRUE(cap.applied());
    outcome.capped_rc =
        MPI_Allreduce(MPI_IN_PLACE, data.data(), kLargeCount, MPI_FLOAT, MPI_SUM, comm);
  }
  read_counters(&after);
  outcome.compressed_while_capped = after.compressed - before.compressed;
  data = ones_times(world_rank(), kLargeCount);
  outcome.retry_rc =
      MPI_Allreduce(MPI_IN_PLACE, data.data(), kLargeCount, MPI_FLOAT, MPI_SUM, comm);
  outcome.retried = std::move(data);
  return outcome;
}

void expect_exact_sums(const std::vector<float>& reduced) {
  const int ranks = world_size();
  const float sum = static_cast<float>(ranks * (ranks + 1) / 2);
  std::size_t wrong = 0;
  for (float x : reduced) wrong += x != sum;
  EXPECT_EQ(wrong, 0u) << "of " << reduced.size() << " elements, expected " << sum;
}

TEST(RaisedErrors, ReachTheCallersHandlerOnceAndTheNextCallWorks) {
  slimreduce_counters counters{};
  ASSERT_TRUE(read_counters(&counters)) << "libslimreduce.so is not preloaded";
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  MPI_Comm_create_errhandler(recording_handler, &handler);
  CommWithHandler comm(handler);
  ASSERT_EQ(comm.warm_rc(), MPI_SUCCESS);
  handler_log = {};

  const Outcome outcome = fail_then_retry(comm.get());

  EXPECT_EQ(error_class(outcome.capped_rc), MPI_ERR_NO_MEM);
  EXPECT_EQ(handler_log.calls, 1) << "the handler must hear of the error exactly once";
  EXPECT_EQ(handler_log.code, outcome.capped_rc);
  EXPECT_EQ(handler_log.comm, comm.get()) << "the handler must see the caller's communicator";
  EXPECT_EQ(outcome.compressed_while_capped, 0u) << "a failed call is not a compressed one";
  ASSERT_EQ(outcome.retry_rc, MPI_SUCCESS);
  EXPECT_EQ(handler_log.calls, 1);
  expect_exact_sums(outcome.retried);
  MPI_Errhandler_free(&handler);
}

TEST(RaisedErrors, ErrorsReturnHandsBackTheCode) {
  CommWithHandler comm(MPI_ERRORS_RETURN);
  ASSERT_EQ(comm.warm_rc(), MPI_SUCCESS);
  const Outcome outcome = fail_then_retry(comm.get());
  EXPECT_EQ(error_class(outcome.capped_rc), MPI_ERR_NO_MEM);
  ASSERT_EQ(outcome.retry_rc, MPI_SUCCESS);
  expect_exact_sums(outcome.retried);
}

// The library's slimreduce_set_topk_ratio (it drops every residual).
bool set_topk_ratio(double ratio) {
  using Fn = int (*)(double);
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "slimreduce_set_topk_ratio"));
  return fn && fn(ratio) == 0;
}

// A top-k call that runs out of memory must leave the error-feedback state
// as it was: its retry gives the same bits as the same call on a twin
// communicator where nothing failed. Here the residual and the payload fit
// under the cap and only the gathered payloads do not, so the failure comes
// after the payload's memory and must come before the compress step.
TEST(TopkErrors, OutOfMemoryLeavesTheResidualAsItWas) {
  ASSERT_EQ(env_or("SLIMREDUCE_COMPRESSOR", ""), "topk");
  constexpr int kCount = 4 << 20;
  MPI_Comm failing = MPI_COMM_NULL, twin = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &failing);
  MPI_Comm_dup(MPI_COMM_WORLD, &twin);
  MPI_Comm_set_errhandler(failing, MPI_ERRORS_RETURN);
  const std::vector<float> first = inputs_of(world_rank(), 1, kCount);
  const std::vector<float> second = inputs_of(world_rank(), 2, kCount);
  std::vector<float> on_failing(kCount), on_twin(kCount);
  // Small payloads first: both communicators' workspaces fit a ratio of 1%.
  ASSERT_TRUE(set_topk_ratio(0.01));
  for (MPI_Comm comm : {failing, twin}) {
    std::vector<float>& out = comm == failing ? on_failing : on_twin;
    ASSERT_EQ(MPI_Allreduce(first.data(), out.data(), kCount, MPI_FLOAT, MPI_SUM, comm),
              MPI_SUCCESS);
  }
  // Half the entries: a residual (16 MiB) and a payload (16 MiB) fit in the
  // headroom, the gathered payloads (16 MiB per rank) do not.
  ASSERT_TRUE(set_topk_ratio(0.5));
  int capped_rc = MPI_SUCCESS;
  {
    AddressSpaceCap cap(40 << 20);
    ASSERT_TRUE(cap.applied());
    capped_rc =
        MPI_Allreduce(second.data(), on_failing.data(), kCount, MPI_FLOAT, MPI_SUM, failing);
  }
  EXPECT_EQ(error_class(capped_rc), MPI_ERR_NO_MEM);
  ASSERT_EQ(MPI_Allreduce(second.data(), on_failing.data(), kCount, MPI_FLOAT, MPI_SUM, failing),
            MPI_SUCCESS);
  ASSERT_EQ(MPI_Allreduce(second.data(), on_twin.data(), kCount, MPI_FLOAT, MPI_SUM, twin),
            MPI_SUCCESS);
  // Once more: the residuals the two calls left must match too.
  for (MPI_Comm comm : {failing, twin}) {
    std::vector<float>& out = comm == failing ? on_failing : on_twin;
    ASSERT_EQ(MPI_Allreduce(first.data(), out.data(), kCount, MPI_FLOAT, MPI_SUM, comm),
              MPI_SUCCESS);
  }
  EXPECT_EQ(fnv1a(on_failing.data(), kCount * sizeof(float)),
            fnv1a(on_twin.data(), kCount * sizeof(float)));
  set_topk_ratio(std::stod(env_or("SLIMREDUCE_TOPK_RATIO", "0.01")));
  MPI_Comm_free(&failing);
  MPI_Comm_free(&twin);
}

// Erroneous calls the real library reports (MPI_ERR_BUFFER in Open MPI) are
// left to it: the same error as PMPI_Allreduce gives (same_error), never a
// crash of ours.
TEST(ErroneousCalls, GetTheRealLibrarysError) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  // Open MPI 4.1 raises buffer errors on MPI_COMM_WORLD, whatever the communicator.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  constexpr int kCount = 1 << 20;  // well over any SLIMREDUCE_MIN_BYTES the tests use
  std::vector<float> data = ones_times(world_rank(), kCount);
  struct Form {
    const char* name;
    const void* send;
    void* recv;
  };
  const Form forms[] = {{"MPI_IN_PLACE as the receive buffer", data.data(), MPI_IN_PLACE},
                        {"one buffer twice", data.data(), data.data()},
                        {"MPI_IN_PLACE twice", MPI_IN_PLACE, MPI_IN_PLACE}};
  for (const Form& form : forms) {
    const int real = PMPI_Allreduce(form.send, form.recv, kCount, MPI_FLOAT, MPI_SUM, comm);
    ASSERT_NE(real, MPI_SUCCESS) << form.name << ": the MPI accepted it";
    const int real_again = PMPI_Allreduce(form.send, form.recv, kCount, MPI_FLOAT, MPI_SUM, comm);
    slimreduce_counters before{}, after{};
    read_counters(&before);
    EXPECT_TRUE(same_error(MPI_Allreduce(form.send, form.recv, kCount, MPI_FLOAT, MPI_SUM, comm),
                           real, real_again))
        << form.name;
    read_counters(&after);
    EXPECT_EQ(after.passed_through - before.passed_through, 1u) << form.name;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Comm_free(&comm);
}

// Null handles: the caller's handler runs once, as without SlimReduce (the
// engine must not ask MPI about them first).
TEST(ErroneousCalls, NullHandlesRaiseOnce) {
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  MPI_Comm_create_errhandler(recording_handler, &handler);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler);  // where Open MPI raises these
  std::vector<float> send(1 << 20, 1.0f), recv(send.size());
  const int count = static_cast<int>(send.size());
  struct Form {
    const char* name;
    MPI_Datatype datatype;
    MPI_Comm comm;
  };
  const Form forms[] = {{"MPI_DATATYPE_NULL", MPI_DATATYPE_NULL, MPI_COMM_WORLD},
                        {"MPI_COMM_NULL", MPI_FLOAT, MPI_COMM_NULL}};
  for (const Form& form : forms) {
    handler_log = {};
    const int real =
        PMPI_Allreduce(send.data(), recv.data(), count, form.datatype, MPI_SUM, form.comm);
    const int real_calls = handler_log.calls;
    ASSERT_NE(real, MPI_SUCCESS) << form.name;
    const int real_again =
        PMPI_Allreduce(send.data(), recv.data(), count, form.datatype, MPI_SUM, form.comm);
    handler_log = {};
    EXPECT_TRUE(same_error(
        MPI_Allreduce(send.data(), recv.data(), count, form.datatype, MPI_SUM, form.comm), real,
        real_again))
        << form.name;
    EXPECT_EQ(handler_log.calls, real_calls) << form.name;
    handler_log = {};
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallreduce(send.data(), recv.data(), count, form.datatype, MPI_SUM, form.comm, &request);
    EXPECT_EQ(handler_log.calls, real_calls) << form.name << " (MPI_Iallreduce)";
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  MPI_Errhandler_free(&handler);
}

// Must not return: ctest expects Open MPI's "MPI_ERRORS_ARE_FATAL" abort and
// fails on the line below.
TEST(FatalHandler, StopsTheJob) {
  CommWithHandler comm(MPI_ERRORS_ARE_FATAL);
  ASSERT_EQ(comm.warm_rc(), MPI_SUCCESS);
  const Outcome outcome = fail_then_retry(comm.get());
  std::printf("rank %d continued after a fatal error (rc %d)\n", world_rank(), outcome.capped_rc);
  ADD_FAILURE() << "the job went on after an error under MPI_ERRORS_ARE_FATAL";
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
