// The Transport calls one by one, on every path an executable names
// (algorithm_paths.h): sendrecv (which the cast ring runs on a transport
// without a native 16-bit sum, so NCCL's is checked nowhere else),
// reduce_scatter_sum and split (the building blocks of hierarchical reduction). Values are small
// integers, so every order of the adds gives the same bits and the check is
// exact whichever algorithm the backend picks.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backends/transport.h"
#include "tests/mpi/algorithm_paths.h"

namespace slimreduce::testing {

// Element i of rank `rank`'s send buffer: an integer in [-50, 50].
inline float transport_value(int rank, std::size_t i) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 3) % 101) - 50);
}

// Buffers of a path, on its memory, released when dropped.
class PathBuffer {
 public:
  PathBuffer(Path& path, std::size_t bytes)
      : path_(path), bytes_(bytes), data_(path.allocate(bytes == 0 ? 1 : bytes)) {}
  ~PathBuffer() { path_.release(data_); }
  PathBuffer(const PathBuffer&) = delete;
  PathBuffer& operator=(const PathBuffer&) = delete;
  std::byte* get() const { return data_; }
  void fill(const void* host) {
    if (bytes_ == 0) return;  // an empty vector's data() may be null
    if (!path_.device_memory()) return void(std::memcpy(data_, host, bytes_));
    path_.to_device(data_, static_cast<const std::byte*>(host), bytes_);
    path_.synchronize();
  }
  void read(void* host) {
    if (bytes_ == 0) return;
    if (!path_.device_memory()) return void(std::memcpy(host, data_, bytes_));
    path_.to_host(static_cast<std::byte*>(host), data_, bytes_);
    path_.synchronize();
  }

 private:
  Path& path_;
  std::size_t bytes_;
  std::byte* data_;
};

using TransportCase = std::tuple<std::string, std::size_t>;  // path, count per rank

class TransportSuite : public ::testing::TestWithParam<TransportCase> {};

TEST_P(TransportSuite, ReduceScatterGivesEachRankItsBlockOfTheSum) {
  const auto& [path_name, count] = GetParam();
  Path& path = *paths().at(path_name);
  backends::Transport& transport = path.transport();
  const int ranks = transport.size();
  std::vector<float> send(count * ranks);
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = transport_value(transport.rank(), i);
  PathBuffer on_send(path, send.size() * sizeof(float));
  PathBuffer on_recv(path, count * sizeof(float));
  on_send.fill(send.data());
  const Status status = transport.reduce_scatter_sum(
      reinterpret_cast<float*>(on_send.get()), reinterpret_cast<float*>(on_recv.get()), count);
  ASSERT_TRUE(status.ok()) << "domain " << static_cast<int>(status.domain()) << ", code "
                           << status.code();
  path.synchronize();
  std::vector<float> got(count);
  on_recv.read(got.data());
  for (std::size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < ranks; ++r) want += transport_value(r, transport.rank() * count + i);
    ASSERT_EQ(got[i], want) << "element " << i << " of rank " << transport.rank() << "'s block";
  }
}

// Each rank sends its values to the next rank and receives the previous
// rank's, as one step of a ring; sizes differ by rank, so a wrong size shows.
TEST_P(TransportSuite, SendrecvPassesBytesAlongTheRing) {
  const auto& [path_name, count] = GetParam();
  Path& path = *paths().at(path_name);
  backends::Transport& transport = path.transport();
  const int rank = transport.rank();
  const int ranks = transport.size();
  const int next = (rank + 1) % ranks;
  const int previous = (rank + ranks - 1) % ranks;
  const auto count_of = [count](int r) { return count == 0 ? 0 : count + r; };
  std::vector<float> send(count_of(rank));
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = transport_value(rank, i);
  PathBuffer on_send(path, send.size() * sizeof(float));
  PathBuffer on_recv(path, count_of(previous) * sizeof(float));
  on_send.fill(send.data());
  const Status status =
      transport.sendrecv(on_send.get(), send.size() * sizeof(float), next, on_recv.get(),
                         count_of(previous) * sizeof(float), previous);
  ASSERT_TRUE(status.ok()) << "domain " << static_cast<int>(status.domain()) << ", code "
                           << status.code();
  path.synchronize();
  std::vector<float> got(count_of(previous));
  on_recv.read(got.data());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], transport_value(previous, i)) << "element " << i << " from rank " << previous;
}

// Ranks split by parity, keyed in reverse: each sub-transport holds the ranks
// of one parity, highest first, and its collectives run among them alone.
class TransportSplit : public ::testing::TestWithParam<std::string> {};

TEST_P(TransportSplit, GroupsByColorAndRanksByKey) {
  Path& path = *paths().at(GetParam());
  backends::Transport& transport = path.transport();
  const int rank = transport.rank();
  const int ranks = transport.size();
  std::unique_ptr<backends::Transport> sub;
  ASSERT_TRUE(transport.split(rank % 2, ranks - rank, &sub).ok());
  ASSERT_NE(sub, nullptr);
  std::vector<int> members;  // the same parity, highest rank first
  for (int r = ranks - 1; r >= 0; --r) {
    if (r % 2 == rank % 2) members.push_back(r);
  }
  EXPECT_EQ(sub->size(), static_cast<int>(members.size()));
  EXPECT_EQ(members.at(sub->rank()), rank);
  EXPECT_EQ(sub->memory(), transport.memory());
  EXPECT_EQ(sub->execution(), transport.execution());

  const int mine = rank;
  PathBuffer on_send(path, sizeof mine);
  PathBuffer on_gathered(path, members.size() * sizeof mine);
  on_send.fill(&mine);
  ASSERT_TRUE(sub->allgather(on_send.get(), sizeof mine, on_gathered.get()).ok());
  path.synchronize();
  std::vector<int> gathered(members.size());
  on_gathered.read(gathered.data());
  EXPECT_EQ(gathered, members) << "the sub-transport's allgather, in its rank order";
  sub.reset();  // freed before the parent, as the interface asks
}

// The cases on `names`' paths.
inline auto transport_cases(std::vector<std::string> names) {
  return ::testing::Combine(::testing::ValuesIn(names),
                            ::testing::Values<std::size_t>(0, 1, 5, 1000));
}

inline std::string transport_case_name(const ::testing::TestParamInfo<TransportCase>& info) {
  return std::get<0>(info.param) + "_n" + std::to_string(std::get<1>(info.param));
}

}  // namespace slimreduce::testing
