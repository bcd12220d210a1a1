// What SlimReduce keeps per user communicator: its shape, a private duplicate
// for our own traffic (so our messages never meet the user's), and workspace
// reused from call to call.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/mpi/hierarchy.h"
#include "core/mpi/reduction_queue.h"
#include "core/runtime/comm_shape.h"

namespace slimreduce {

class CommState {
 public:
  CommState(std::uint64_t id, MPI_Comm user_comm);
  ~CommState();
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  // Its id and shape, as both sides keep them (core/runtime/comm_shape.h); an
  // intercommunicator's (never compressed) is rank 0 of 1.
  const CommShape& shape() const { return shape_; }
  std::uint64_t id() const { return shape_.id; }
  int rank() const { return shape_.rank; }
  int size() const { return shape_.size; }
  bool is_intercommunicator() const { return is_inter_; }
  double ring_factor() const { return shape_.ring_factor(); }
  // Where its nodes are known (SLIMREDUCE_HIERARCHICAL), their split; else nullptr.
  const NodeSplit* nodes() const { return hierarchy_ ? &hierarchy_->split : nullptr; }
  // Whether a compressed call runs the node steps (nodes known, and not flat).
  bool reduces_hierarchically() const { return hierarchy_ && !hierarchy_->flat(); }
  // Whether a call decided `flat` (CallDecision::flat: a flat candidate of
  // SLIMREDUCE_HIERARCHICAL=auto) runs the node steps: every path asks this.
  bool runs_two_level(bool flat) const { return reduces_hierarchically() && !flat; }

  // The private duplicate, made on first use: the first compressed call on a
  // communicator is the same call on every rank, so the collective dup matches.
  // Its error handler is MPI_ERRORS_RETURN. A failed dup has already been
  // reported to the caller's handler (MPI raises it on the caller's communicator).
  int private_comm(MPI_Comm* out);
  // Whether its ranks have agreed on what shapes the wire (core/mpi/wire_check.h),
  // done once, with the private duplicate's first use.
  bool wire_agreed() const { return wire_agreed_; }
  void mark_wire_agreed() { wire_agreed_ = true; }
  // Frees the private duplicate and the communicators split from it; before
  // MPI_Finalize, or when the user frees theirs.
  void release();

  // Workspace that grows to the largest call and stays (no allocation in steady state).
  std::byte* wire(std::size_t bytes) { return grow(wire_, bytes); }
  std::byte* scratch(std::size_t bytes) { return grow(scratch_, bytes); }
  std::byte* shards(std::size_t bytes) { return grow(shards_, bytes); }  // hierarchical

  // The caller's communicator: errors of our traffic are raised on it.
  MPI_Comm user_comm() const { return user_comm_; }
  // Its queued MPI_Iallreduce calls (core/mpi/reduction_queue.h).
  ReductionQueue& queue() { return queue_; }

  // Hierarchical reduction's sub-transports, once made (core/mpi/hierarchy.h).
  const Hierarchy* hierarchy() const { return hierarchy_ ? &*hierarchy_ : nullptr; }
  void keep_hierarchy(Hierarchy hierarchy) { hierarchy_ = std::move(hierarchy); }

 private:
  static std::byte* grow(std::vector<std::byte>& buffer, std::size_t bytes);

  CommShape shape_;
  MPI_Comm user_comm_;
  MPI_Comm private_comm_ = MPI_COMM_NULL;
  bool wire_agreed_ = false;
  bool is_inter_ = false;
  std::vector<std::byte> wire_;
  std::vector<std::byte> scratch_;
  std::vector<std::byte> shards_;
  std::optional<Hierarchy> hierarchy_;
  ReductionQueue queue_;
};

}  // namespace slimreduce
