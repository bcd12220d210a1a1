// MPI_Iallreduce under LD_PRELOAD (docs/architecture.md, "Fusion"): eligible
// calls are queued and reduced in fused batches when the caller waits or
// tests, when SLIMREDUCE_FUSION_THRESHOLD bytes are queued, when the
// communicator is freed, at MPI_Finalize. Checked: fused results equal
// MPI_Allreduce's (unfused, the same residual history) bit for bit; every
// request completes exactly once under every wait and test, mixed with the
// caller's own requests and MPI_REQUEST_NULL; ranks that wait at different
// points; a communicator freed with calls queued; the report's counts.
// Run with SLIMREDUCE_COMPRESSOR fp16, bf16 or topk and SLIMREDUCE_MIN_BYTES=4096;
// the tests that check sums of small integers need every value sent, so
// top-k runs them at SLIMREDUCE_TOPK_RATIO=1 (the others at any ratio).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

const std::string kCompressor = env_or("SLIMREDUCE_COMPRESSOR", "none");
const std::uint64_t kThreshold = std::stoull(env_or("SLIMREDUCE_FUSION_THRESHOLD", "67108864"));
// A flush is cut into fused buffers of at most this (SLIMREDUCE_PARTITION_BYTES, plain bytes here).
const std::uint64_t kLargestBuffer = std::min<std::uint64_t>(
    kThreshold, std::stoull(env_or("SLIMREDUCE_PARTITION_BYTES", "4194304")));

// Tensor sizes of a small network's layers: all above SLIMREDUCE_MIN_BYTES.
const std::vector<std::size_t> kCounts = {1024, 4099, 70000, 1025, 16384, 3000, 262144, 1111};

std::vector<std::vector<float>> tensors_for(int step) {
  std::vector<std::vector<float>> tensors;
  for (std::size_t t = 0; t < kCounts.size(); ++t)
    tensors.push_back(inputs_of(world_rank(), 100 * step + t, kCounts[t]));
  return tensors;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Several steps, so that error feedback's residuals carry over: each step's
// tensors by MPI_Iallreduce + MPI_Waitall (fused) into one set of buffers,
// and by MPI_Allreduce into another (each its own residuals, the same history).
TEST(Iallreduce, FusedResultsEqualMpiAllreduceBitForBit) {
  std::vector<std::vector<float>> fused(kCounts.size()), alone(kCounts.size());
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    fused[t].resize(kCounts[t]);
    alone[t].resize(kCounts[t]);
  }
  for (int step = 0; step < 3; ++step) {
    const auto inputs = tensors_for(step);
    std::vector<MPI_Request> requests(kCounts.size());
    for (std::size_t t = 0; t < kCounts.size(); ++t) {
      ASSERT_EQ(MPI_Iallreduce(inputs[t].data(), fused[t].data(), int(kCounts[t]), MPI_FLOAT,
                               MPI_SUM, MPI_COMM_WORLD, &requests[t]),
                MPI_SUCCESS);
    }
    ASSERT_EQ(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
    for (std::size_t t = 0; t < kCounts.size(); ++t) {
      ASSERT_EQ(MPI_Allreduce(inputs[t].data(), alone[t].data(), int(kCounts[t]), MPI_FLOAT,
                              MPI_SUM, MPI_COMM_WORLD),
                MPI_SUCCESS);
      EXPECT_TRUE(same_bits(fused[t], alone[t])) << "step " << step << ", tensor " << t;
      EXPECT_TRUE(identical_on_all_ranks(fused[t].data(), kCounts[t] * 4, MPI_COMM_WORLD));
    }
  }
}

// The report: every call compressed and counted as MPI_Iallreduce; batches
// of two or more counted as fused, as the threshold cuts them.
TEST(Iallreduce, CountsItsCallsAndFusedBatches) {
  const double calls = counter("calls.iallreduce"), compressed = counter("calls.compressed");
  const double batches = counter("calls.fused_batches"), carried = counter("calls.fused_tensors");
  const auto inputs = tensors_for(7);
  std::vector<std::vector<float>> outputs(kCounts.size());
  std::vector<MPI_Request> requests(kCounts.size());
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    outputs[t].resize(kCounts[t]);
    ASSERT_EQ(MPI_Iallreduce(inputs[t].data(), outputs[t].data(), int(kCounts[t]), MPI_FLOAT,
                             MPI_SUM, MPI_COMM_WORLD, &requests[t]),
              MPI_SUCCESS);
  }
  ASSERT_EQ(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
  // The batches the threshold makes: a flush when the queue reaches it, and
  // at the wait; a flush cut into batches of at most kLargestBuffer (a
  // larger call alone).
  std::uint64_t want_batches = 0, want_carried = 0;
  auto close_batch = [&](std::uint64_t members) {
    if (members >= 2) want_batches += 1, want_carried += members;
  };
  auto cut = [&](const std::vector<std::uint64_t>& flushed) {
    std::uint64_t bytes = 0, members = 0;
    for (std::uint64_t b : flushed) {
      if (members > 0 && bytes + b > kLargestBuffer) close_batch(members), bytes = 0, members = 0;
      bytes += b;
      ++members;
    }
    close_batch(members);
  };
  std::vector<std::uint64_t> queued;
  std::uint64_t queued_bytes = 0;
  for (std::size_t count : kCounts) {
    queued.push_back(count * 4);
    queued_bytes += count * 4;
    if (queued_bytes >= kThreshold) cut(queued), queued.clear(), queued_bytes = 0;
  }
  cut(queued);
  EXPECT_EQ(counter("calls.iallreduce") - calls, double(kCounts.size()));
  EXPECT_EQ(counter("calls.compressed") - compressed, double(kCounts.size()));
  EXPECT_EQ(counter("calls.fused_batches") - batches, double(want_batches));
  EXPECT_EQ(counter("calls.fused_tensors") - carried, double(want_carried));
}

enum class Completion { wait, waitall, waitany, waitsome, test, testall, testany, testsome };

// Completes `requests` with one kind of wait or test, looping where it must;
// returns how often each index was reported complete.
std::vector<int> complete_all(std::vector<MPI_Request>& requests, Completion how) {
  const int n = int(requests.size());
  std::vector<int> completed(n, 0);
  auto live = [&] {
    return std::any_of(requests.begin(), requests.end(),
                       [](MPI_Request r) { return r != MPI_REQUEST_NULL; });
  };
  std::vector<int> indices(n);
  int flag = 0, index = 0, outcount = 0;
  while (live()) {
    switch (how) {
      case Completion::wait:
        for (int i = 0; i < n; ++i) {
          if (requests[i] == MPI_REQUEST_NULL) continue;
          EXPECT_EQ(MPI_Wait(&requests[i], MPI_STATUS_IGNORE), MPI_SUCCESS);
          ++completed[i];
        }
        break;
      case Completion::waitall:
        for (int i = 0; i < n; ++i) completed[i] += requests[i] != MPI_REQUEST_NULL;
        EXPECT_EQ(MPI_Waitall(n, requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
        break;
      case Completion::waitany:
        EXPECT_EQ(MPI_Waitany(n, requests.data(), &index, MPI_STATUS_IGNORE), MPI_SUCCESS);
        if (index != MPI_UNDEFINED) ++completed[index];
        break;
      case Completion::waitsome:
        EXPECT_EQ(MPI_Waitsome(n, requests.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE),
                  MPI_SUCCESS);
        for (int i = 0; i < outcount; ++i) ++completed[indices[i]];
        break;
      case Completion::test:
        for (int i = 0; i < n; ++i) {
          if (requests[i] == MPI_REQUEST_NULL) continue;
          EXPECT_EQ(MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
          if (flag) ++completed[i];
        }
        break;
      case Completion::testall: {
        std::vector<bool> live_before(n);
        for (int i = 0; i < n; ++i) live_before[i] = requests[i] != MPI_REQUEST_NULL;
        EXPECT_EQ(MPI_Testall(n, requests.data(), &flag, MPI_STATUSES_IGNORE), MPI_SUCCESS);
        if (flag) {
          for (int i = 0; i < n; ++i) completed[i] += live_before[i];
        }
        break;
      }
      case Completion::testany:
        EXPECT_EQ(MPI_Testany(n, requests.data(), &index, &flag, MPI_STATUS_IGNORE), MPI_SUCCESS);
        if (flag && index != MPI_UNDEFINED) ++completed[index];
        break;
      case Completion::testsome:
        EXPECT_EQ(MPI_Testsome(n, requests.data(), &outcount, indices.data(), MPI_STATUSES_IGNORE),
                  MPI_SUCCESS);
        for (int i = 0; i < outcount; ++i) ++completed[indices[i]];
        break;
    }
  }
  return completed;
}

class EveryCompletion : public ::testing::TestWithParam<Completion> {};

// Three queued reductions, a send and a receive of the caller's, and
// MPI_REQUEST_NULL, in one array: each request reported complete exactly
// once, each result right.
TEST_P(EveryCompletion, CompletesEachRequestOnceAmongTheCallersOwn) {
  const int rank = world_rank(), ranks = world_size();
  const std::vector<std::size_t> counts = {5000, 1200, 30000};
  std::vector<std::vector<float>> outputs;
  std::vector<MPI_Request> requests;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    outputs.emplace_back(counts[t], float(rank + 1));
    requests.emplace_back();
    ASSERT_EQ(MPI_Iallreduce(MPI_IN_PLACE, outputs[t].data(), int(counts[t]), MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD, &requests.back()),
              MPI_SUCCESS);
  }
  int sent = rank, received = -1;
  requests.emplace_back();
  MPI_Irecv(&received, 1, MPI_INT, (rank + ranks - 1) % ranks, 9, MPI_COMM_WORLD, &requests.back());
  requests.emplace_back();
  MPI_Isend(&sent, 1, MPI_INT, (rank + 1) % ranks, 9, MPI_COMM_WORLD, &requests.back());
  requests.push_back(MPI_REQUEST_NULL);
  const std::vector<int> completed = complete_all(requests, GetParam());
  for (std::size_t i = 0; i + 1 < requests.size(); ++i)
    EXPECT_EQ(completed[i], 1) << "request " << i;
  EXPECT_EQ(completed.back(), 0) << "MPI_REQUEST_NULL";
  EXPECT_EQ(received, (rank + ranks - 1) % ranks);
  const float sum = float(ranks * (ranks + 1) / 2);  // small integers: exact in 16 bits
  // Sparse top-k (the plan-hash runs) sends a share of each tensor: its results
  // are checked for agreement across ranks; every other setting sums exactly.
  const bool sparse = env_or("SLIMREDUCE_COMPRESSOR", "none") == "topk" &&
                      std::stod(env_or("SLIMREDUCE_TOPK_RATIO", "0.01")) < 1.0;
  for (const auto& output : outputs) {
    EXPECT_TRUE(identical_on_all_ranks(output.data(), output.size() * 4, MPI_COMM_WORLD));
    if (sparse) continue;
    EXPECT_TRUE(std::all_of(output.begin(), output.end(), [&](float x) { return x == sum; }))
        << output[0];
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, EveryCompletion,
                         ::testing::Values(Completion::wait, Completion::waitall,
                                           Completion::waitany, Completion::waitsome,
                                           Completion::test, Completion::testall,
                                           Completion::testany, Completion::testsome));

// Rank 0 waits for each call at once; the others queue all and wait at the
// end. The flushes agree on what every rank holds, so all results are right.
TEST(Iallreduce, RanksThatWaitAtDifferentPointsStillAgree) {
  const auto inputs = tensors_for(11);
  std::vector<std::vector<float>> fused(kCounts.size()), alone(kCounts.size());
  std::vector<MPI_Request> requests(kCounts.size());
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    fused[t].resize(kCounts[t]);
    ASSERT_EQ(MPI_Iallreduce(inputs[t].data(), fused[t].data(), int(kCounts[t]), MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD, &requests[t]),
              MPI_SUCCESS);
    if (world_rank() == 0) {
      ASSERT_EQ(MPI_Wait(&requests[t], MPI_STATUS_IGNORE), MPI_SUCCESS);
    }
  }
  ASSERT_EQ(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    EXPECT_TRUE(identical_on_all_ranks(fused[t].data(), kCounts[t] * 4, MPI_COMM_WORLD))
        << "tensor " << t;
  }
}

// A wait on the last call handed over (in backprop, the first layer's):
// under `reverse` it is in the flush's first buffer, and the flush runs only
// that one before the wait returns (the rest stays queued, for the Waitall);
// under `fifo` it is in the last, and the flush runs them all. Run with
// buffers smaller than the calls (SLIMREDUCE_PARTITION_BYTES) and nothing
// flushed before the waits (SLIMREDUCE_FUSION_THRESHOLD).
TEST(Priority, AWaitForTheFirstLayerRunsOnlyTheBuffersItNeeds) {
  const bool reverse = env_or("SLIMREDUCE_PRIORITY", "fifo") == "reverse";
  const auto inputs = tensors_for(21);
  std::vector<std::vector<float>> fused(kCounts.size()), alone(kCounts.size());
  std::vector<MPI_Request> requests(kCounts.size());
  const double compressed = counter("calls.compressed");
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    fused[t].resize(kCounts[t]);
    alone[t].resize(kCounts[t]);
    ASSERT_EQ(MPI_Iallreduce(inputs[t].data(), fused[t].data(), int(kCounts[t]), MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD, &requests[t]),
              MPI_SUCCESS);
  }
  ASSERT_EQ(MPI_Wait(&requests.back(), MPI_STATUS_IGNORE), MPI_SUCCESS);
  const double ran = counter("calls.compressed") - compressed;
  if (reverse) {
    EXPECT_GE(ran, 1.0);
    EXPECT_LT(ran, double(kCounts.size())) << "the wait ran every buffer";
  } else {
    EXPECT_EQ(ran, double(kCounts.size()));
  }
  ASSERT_EQ(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(counter("calls.compressed") - compressed, double(kCounts.size()));
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    ASSERT_EQ(MPI_Allreduce(inputs[t].data(), alone[t].data(), int(kCounts[t]), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD),
              MPI_SUCCESS);
    EXPECT_TRUE(same_bits(fused[t], alone[t])) << "tensor " << t;
  }
}

// Ranks that wait on different calls: each flush runs the most buffers any
// rank needs, so every rank runs the same ones, and none hangs.
TEST(Priority, RanksThatWaitOnDifferentCallsRunTheSameBuffers) {
  const auto inputs = tensors_for(22);
  std::vector<std::vector<float>> fused(kCounts.size());
  std::vector<MPI_Request> requests(kCounts.size());
  const double compressed = counter("calls.compressed");
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    fused[t].resize(kCounts[t]);
    ASSERT_EQ(MPI_Iallreduce(inputs[t].data(), fused[t].data(), int(kCounts[t]), MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD, &requests[t]),
              MPI_SUCCESS);
  }
  MPI_Request& mine = world_rank() == 0 ? requests.back() : requests[world_rank() % 3];
  ASSERT_EQ(MPI_Wait(&mine, MPI_STATUS_IGNORE), MPI_SUCCESS);
  const double ran = counter("calls.compressed") - compressed;
  double least = ran, most = ran;
  PMPI_Allreduce(&ran, &least, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  PMPI_Allreduce(&ran, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(least, most) << "ranks ran different buffers";
  ASSERT_EQ(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    EXPECT_TRUE(identical_on_all_ranks(fused[t].data(), kCounts[t] * 4, MPI_COMM_WORLD))
        << "tensor " << t;
  }
}

// A communicator freed with calls still queued: they run at the free, and
// the caller's requests then complete with the results.
TEST(Iallreduce, AFreedCommunicatorRunsItsQueuedCallsFirst) {
  MPI_Comm comm;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  const int ranks = world_size();
  std::vector<std::vector<float>> outputs(3, std::vector<float>(8192, 2.0f));
  std::vector<MPI_Request> requests(3);
  for (int t = 0; t < 3; ++t) {
    ASSERT_EQ(MPI_Iallreduce(MPI_IN_PLACE, outputs[t].data(), 8192, MPI_FLOAT, MPI_SUM, comm,
                             &requests[t]),
              MPI_SUCCESS);
  }
  ASSERT_EQ(MPI_Comm_free(&comm), MPI_SUCCESS);
  ASSERT_EQ(MPI_Waitall(3, requests.data(), MPI_STATUSES_IGNORE), MPI_SUCCESS);
  for (const auto& output : outputs) EXPECT_EQ(output[4000], 2.0f * ranks);
}

// An in-place MPI_Iallreduce of `values` over the world, queued; its request.
MPI_Request queued_sum_in_place(std::vector<float>& values) {
  MPI_Request request = MPI_REQUEST_NULL;
  EXPECT_EQ(MPI_Iallreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD, &request),
            MPI_SUCCESS);
  return request;
}

// Freeing a queued request: the reduction still happens (every rank takes
// part in it), before the free returns.
TEST(Iallreduce, AFreedRequestsReductionStillRuns) {
  std::vector<float> output(6000, 1.0f);
  MPI_Request request = queued_sum_in_place(output);
  ASSERT_EQ(MPI_Request_free(&request), MPI_SUCCESS);
  EXPECT_EQ(request, MPI_REQUEST_NULL);
  EXPECT_EQ(output[5999], float(world_size()));
}

// A queued reduction cannot be cancelled (MPI forbids cancelling a
// collective): the cancel is accepted, the request completes, not cancelled.
TEST(Iallreduce, ACancelLeavesTheReductionToComplete) {
  std::vector<float> output(6000, 1.0f);
  MPI_Request request = queued_sum_in_place(output);
  EXPECT_EQ(MPI_Cancel(&request), MPI_SUCCESS);
  MPI_Status status;
  ASSERT_EQ(MPI_Wait(&request, &status), MPI_SUCCESS);
  int cancelled = 1;
  MPI_Test_cancelled(&status, &cancelled);
  EXPECT_EQ(cancelled, 0);
  EXPECT_EQ(output[0], float(world_size()));
}

// The native API (slimreduce_enqueue / slimreduce_synchronize): tensors
// named, handed over in fresh buffers every step, give the bits of
// MPI_Allreduce on buffers that stay: the residual follows the name.
TEST(NativeApi, NamedTensorsInFreshBuffersMatchMpiAllreduceOnStableOnes) {
  using Enqueue = int (*)(const char*, float*, size_t, MPI_Comm, int);
  using Synchronize = int (*)(MPI_Comm);
  auto enqueue = reinterpret_cast<Enqueue>(dlsym(RTLD_DEFAULT, "slimreduce_enqueue"));
  auto synchronize = reinterpret_cast<Synchronize>(dlsym(RTLD_DEFAULT, "slimreduce_synchronize"));
  ASSERT_NE(enqueue, nullptr);
  ASSERT_NE(synchronize, nullptr);
  // A communicator of its own: no residual of an earlier test's buffers
  // (keyed by address, which the heap reuses) meets the stable buffers.
  MPI_Comm comm;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  std::vector<std::vector<float>> stable(kCounts.size());
  for (std::size_t t = 0; t < kCounts.size(); ++t) stable[t].resize(kCounts[t]);
  // Every step's buffers kept, so that each step's are at new addresses.
  std::vector<std::vector<std::vector<float>>> steps;
  for (int step = 0; step < 3; ++step) {
    const auto inputs = tensors_for(20 + step);
    std::vector<std::vector<float>>& fresh = steps.emplace_back(inputs);
    for (std::size_t t = 0; t < kCounts.size(); ++t) {
      const std::string name = "layer" + std::to_string(t) + ".weight";
      ASSERT_EQ(enqueue(name.c_str(), fresh[t].data(), kCounts[t], comm, 0), 0);
    }
    ASSERT_EQ(synchronize(comm), 0);
    for (std::size_t t = 0; t < kCounts.size(); ++t) {
      ASSERT_EQ(MPI_Allreduce(inputs[t].data(), stable[t].data(), int(kCounts[t]), MPI_FLOAT,
                              MPI_SUM, comm),
                MPI_SUCCESS);
      EXPECT_TRUE(same_bits(fresh[t], stable[t])) << "step " << step << ", tensor " << t;
    }
  }
  EXPECT_EQ(synchronize(comm), 0) << "nothing left to complete";
  EXPECT_EQ(MPI_Comm_free(&comm), MPI_SUCCESS);
}

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
