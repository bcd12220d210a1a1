#include "core/mpi/thread_tally.h"

namespace slimreduce {
namespace {

constexpr auto relaxed = std::memory_order_relaxed;
std::atomic<std::uint64_t> next_board_id{1};

double bytes_since_move(const ThreadTally& tally) {
  return static_cast<double>(tally.bytes.load(relaxed) - tally.bytes_at_move.load(relaxed));
}

double wire_since_move(const ThreadTally& tally) {
  return bytes_since_move(tally) * tally.ring_factor.load(relaxed);
}

// Adds the bytes since the move, times factor, to total.
void settle(std::atomic<double>& total, const std::atomic<double>& factor, double bytes) {
  total.store(total.load(relaxed) + bytes * factor.load(relaxed), relaxed);
}

}  // namespace

void ThreadTally::move_to(MPI_Comm next_comm, CommState* next_state,
                          std::uint64_t next_compress_from, const Factors& next) {
  const double moved = bytes_since_move(*this);
  settle(wire, ring_factor, moved);
  settle(inter_wire, inter_factor, moved);
  settle(intra_wire, intra_factor, moved);
  bytes_at_move.store(bytes.load(relaxed), relaxed);
  ring_factor.store(next.ring, relaxed);
  inter_factor.store(next.inter, relaxed);
  intra_factor.store(next.intra, relaxed);
  state = next_state;
  compress_from = next_compress_from;
  comm.store(next_comm, relaxed);
}

Counters ThreadTally::counters() const {
  Counters tally;
  tally.intercepted = tally.passed_through = calls.load(relaxed);
  tally.input_bytes = bytes.load(relaxed);
  tally.wire_baseline = tally.wire_sent = wire.load(relaxed) + wire_since_move(*this);
  const double moved = bytes_since_move(*this);
  tally.inter_node_baseline = tally.inter_node_sent =
      inter_wire.load(relaxed) + moved * inter_factor.load(relaxed);
  tally.intra_node_baseline = tally.intra_node_sent =
      intra_wire.load(relaxed) + moved * intra_factor.load(relaxed);
  return tally;
}

TallyBoard::TallyBoard() : id_(next_board_id.fetch_add(1)) {}

ThreadTally* TallyBoard::register_thread() {
  std::lock_guard lock(mutex_);
  tallies_.push_back(std::make_unique<ThreadTally>());
  return tallies_.back().get();
}

void TallyBoard::forget_communicators() {
  std::lock_guard lock(mutex_);
  for (auto& tally : tallies_) tally->comm.store(MPI_Comm{}, relaxed);
}

Counters TallyBoard::total() const {
  std::lock_guard lock(mutex_);
  Counters sum;
  for (const auto& tally : tallies_) sum += tally->counters();
  return sum;
}

}  // namespace slimreduce
