// What one thread's MPI calls keep from call to call: the communicator it used
// last, what may be compressed on it, and the tally of the thread's calls
// that passed through. Kept together in one cache line, because a call that
// passes through must cost next to nothing: it reads this line, compares,
// adds two integers, and is gone.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/runtime/counters.h"

namespace slimreduce {

class CommState;

struct alignas(64) ThreadTally {
  static constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

  // The communicator this thread used last. Any thread may clear it (when a
  // communicator is freed or the compressor changes), hence atomic; a
  // value-initialized handle matches no communicator MPI hands out.
  std::atomic<MPI_Comm> comm{};
  // Its state, and the smallest float SUM call, in bytes, that may be
  // compressed on it (kNever when none may); only the owning thread touches these.
  CommState* state = nullptr;
  std::uint64_t compress_from = kNever;
  // MPI_FLOAT and MPI_SUM: in Open MPI the addresses of its globals, which
  // the hot path would otherwise read through another cache line (our GOT).
  // real_type: Fortran's MPI_REAL where it is 4 bytes wide, else MPI_FLOAT again.
  const MPI_Datatype float_type = MPI_FLOAT;
  MPI_Datatype real_type = MPI_FLOAT;
  const MPI_Op sum_op = MPI_SUM;

  // Pass-through calls: written by the owning thread only (a relaxed load and
  // store is a whole update, no locked instruction), read by any thread. The
  // bytes since the thread moved to its current communicator become wire
  // bytes (x that communicator's ring factor) when it moves on, so that the
  // hot path does no floating-point work.
  std::atomic<std::uint64_t> calls{0}, bytes{0}, bytes_at_move{0};
  std::atomic<double> wire{0}, ring_factor{0};
  // The same split by node (Counters::inter_node_*): the share of the ring
  // factor that crosses a node boundary and the share that stays inside (both
  // 0 while the communicator's nodes are unknown), and what they came to.
  std::atomic<double> inter_factor{0}, intra_factor{0}, inter_wire{0}, intra_wire{0};

  void count(std::uint64_t call_bytes) {
    bump(calls, std::uint64_t{1});
    bump(bytes, call_bytes);
  }
  // Makes next_comm the thread's communicator.
  struct Factors {
    double ring = 0;   // 2(n-1)/n
    double inter = 0;  // ring when this rank's ring hop crosses a node boundary, else 0
    double intra = 0;  // ring when it stays inside a known node, else 0
  };
  void move_to(MPI_Comm next_comm, CommState* next_state, std::uint64_t next_compress_from,
               const Factors& next);
  // The tally as counters (a reader on another thread may see a call
  // half-counted while this thread moves between communicators).
  Counters counters() const;

 private:
  template <typename T>
  static void bump(std::atomic<T>& counter, T delta) {
    counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
};

// Every thread's tally for one engine: registered on a thread's first call,
// kept until the engine goes (a thread that ends leaves its counts behind).
class TallyBoard {
 public:
  TallyBoard();
  TallyBoard(const TallyBoard&) = delete;
  TallyBoard& operator=(const TallyBoard&) = delete;

  // This board's number: no two boards of a process have the same, and none is 0.
  std::uint64_t id() const { return id_; }
  // The calling thread's tally on board number board_id, or nullptr before
  // the thread's first call to that board's mine().
  static ThreadTally* known_on(std::uint64_t board_id) {
    return cache_.board == board_id ? cache_.tally : nullptr;
  }
  ThreadTally* known() const { return known_on(id_); }
  // The calling thread's tally, registered on first use.
  ThreadTally& mine() {
    if (ThreadTally* tally = known()) [[likely]]
      return *tally;
    cache_ = {id_, register_thread()};
    return *cache_.tally;
  }
  // Makes every thread look its communicator up again on its next call.
  void forget_communicators();
  // Every thread's pass-through calls, summed.
  Counters total() const;

 private:
  struct Cached {
    std::uint64_t board = 0;
    ThreadTally* tally = nullptr;
  };
  // initial-exec (the library is preloaded, so its TLS is static) and
  // constant-initialized: otherwise every access would cost a __tls_get_addr
  // call, and a dynamic initializer a guard too. Named directly, never through
  // a reference: GCC 12's null check of a reference to a thread_local tests
  // the flags of the add that forms its address, and where the linker turns
  // that add into a lea (an initial-exec access inside an executable, as in
  // the unit tests) the check read stale flags and reported a null store.
  static inline constinit thread_local Cached cache_
      __attribute__((tls_model("initial-exec"))){0, nullptr};
  ThreadTally* register_thread();

  std::uint64_t id_;  // tells this board's tallies from an earlier board's in a thread's cache
  mutable std::mutex mutex_;  // guards tallies_
  std::vector<std::unique_ptr<ThreadTally>> tallies_;
};

}  // namespace slimreduce
