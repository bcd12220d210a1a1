// What both sides keep of every user communicator they reduce on, and how one
// call on it is counted for the report: written once, so a byte is counted
// alike whichever library carried it. The MPI side's CommState holds one; the
// NCCL side's NcclCommState is one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/runtime/counters.h"
#include "core/runtime/node_split.h"

namespace slimreduce {

struct CommShape {
  // One numbering for MPI and NCCL communicators, in the order every rank
  // made them (SharedState::next_comm_id): the key of warm-up counts and
  // residuals, and the order of work across communicators.
  std::uint64_t id = 0;
  int rank = 0;
  // Its ranks. NCCL: 0 until known (a communicator created inside a group
  // answers 0 until the group ends), -1 never known.
  int size = 0;
  // 2(n-1)/n: the bytes a rank sends per byte of a ring allreduce.
  double ring_factor() const;
};

// One call as a side ran it.
struct CallOutcome {
  std::uint64_t bytes = 0;  // the caller's bytes
  std::size_t count = 0;    // its values
  bool compressed = false;
  double wire_sent = 0;             // compressed: the bytes this rank sent
  bool ran_hierarchically = false;  // compressed over the node split's steps
  // Passed through by the decision (warm-up, the residual cap): its counter.
  std::uint64_t Counters::*passed_because = nullptr;
};

// The call's counters: its bytes against the ring baseline of `ranks` (a
// communicator whose size is not known counts as one rank), split by node
// where the nodes are known (`nodes`: nullptr before).
Counters counted_call(int ranks, const NodeSplit* nodes, const CallOutcome& call);

}  // namespace slimreduce
