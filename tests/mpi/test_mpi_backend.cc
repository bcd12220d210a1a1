// The MPI backend's byte movers against MPI's own collective. Payloads over
// kMaxBytesPerCall (1 GiB) are moved in pieces; the pieces are shrunk here so
// that every rank's share is cut, at sizes a test can afford.
#include "backends/mpi_backend.h"
#include "tests/mpi/mpi_helpers.h"
#include "tests/mpi/mpi_test_main.h"

namespace slimreduce::testing {
namespace {

std::vector<std::uint8_t> bytes_of(int rank, std::size_t count) {
  std::mt19937_64 generator(0x5eed + static_cast<std::uint64_t>(rank) * 7919 + count);
  std::vector<std::uint8_t> bytes(count);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(generator());
  return bytes;
}

// (bytes per rank, largest piece)
class AllgatherBytes : public ::testing::TestWithParam<std::tuple<std::size_t, std::size_t>> {};

TEST_P(AllgatherBytes, MatchesMpiAllgatherWhateverThePieces) {
  const auto [bytes_per_rank, max_piece] = GetParam();
  const int ranks = world_size();
  const std::vector<std::uint8_t> mine = bytes_of(world_rank(), bytes_per_rank);
  // Poisoned, so that a byte no piece wrote shows.
  std::vector<std::uint8_t> gathered(bytes_per_rank * ranks + 1, 0xa5);
  ASSERT_EQ(backends::mpi::allgather_bytes(mine.data(), bytes_per_rank, gathered.data(),
                                           MPI_COMM_WORLD, max_piece),
            MPI_SUCCESS);
  for (int rank = 0; rank < ranks; ++rank) {
    const std::vector<std::uint8_t> theirs = bytes_of(rank, bytes_per_rank);
    EXPECT_TRUE(std::equal(theirs.begin(), theirs.end(),
                           gathered.begin() + static_cast<std::ptrdiff_t>(rank * bytes_per_rank)))
        << "rank " << rank << "'s share";
  }
  EXPECT_EQ(gathered.back(), 0xa5) << "written past the end";
}

INSTANTIATE_TEST_SUITE_P(
    Pieces, AllgatherBytes,
    ::testing::Values(std::make_tuple(0, 4), std::make_tuple(1, 1), std::make_tuple(100, 7),
                      std::make_tuple(1000, 999), std::make_tuple(1000, 1000),
                      std::make_tuple(4096, 1024), std::make_tuple(100003, 4096),
                      std::make_tuple(1 << 20, backends::mpi::kMaxBytesPerCall)));

class SendrecvBytes : public ::testing::TestWithParam<std::size_t> {};

// The ring's step: every rank sends right and receives from the left.
TEST_P(SendrecvBytes, RingShiftDeliversEveryByte) {
  const std::size_t bytes = GetParam();
  const int ranks = world_size(), rank = world_rank();
  const int right = (rank + 1) % ranks, left = (rank + ranks - 1) % ranks;
  const std::vector<std::uint8_t> mine = bytes_of(rank, bytes);
  std::vector<std::uint8_t> received(bytes, 0xa5);
  ASSERT_EQ(backends::mpi::sendrecv_bytes(mine.data(), bytes, right, received.data(), bytes, left,
                                          MPI_COMM_WORLD),
            MPI_SUCCESS);
  EXPECT_EQ(received, bytes_of(left, bytes));
}

INSTANTIATE_TEST_SUITE_P(Sizes, SendrecvBytes, ::testing::Values(0, 1, 4097, 1 << 20));

}  // namespace
}  // namespace slimreduce::testing

int main(int argc, char** argv) { return slimreduce::testing::run_all_tests_under_mpi(argc, argv); }
