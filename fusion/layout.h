// The one planner of fused batches, for both sides: the tensors handed over
// together are grouped into batches, one collective each, by a key (what must
// be alike for one collective to carry them: the compressor, and on NCCL the
// communicator, stream and op), and each tensor is given an offset in its
// batch's buffer. Which tensors may share a batch is a rule, as data
// (BatchRule): an NCCL group fuses every tensor of a key wherever it comes in
// the group, with no bound (one launch carries the group); an MPI flush fuses
// only tensors that follow each other in its order, up to a partition's bytes
// (core/mpi/engine_flush.cc). A tensor marked alone (a partition's piece, a
// compressor that cannot fuse) gets a batch of its own that nothing joins.
// Batches come in the order of their first tensors, members in the order
// add() saw them, so every rank, which hands over the same tensors in the same
// order, lays out the same batches (docs/architecture.md, "Fusion"). The pack
// and unpack of a batch are kernels::pack_batch / unpack_batch on the host and
// their CUDA twins on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/pack.h"

namespace slimreduce::fusion {

struct BatchRule {
  // A batch takes only the tensor right after its last one (an MPI flush, in
  // its order); otherwise any later tensor with its key (an NCCL group).
  bool adjacent = false;
  // A batch's size at most (a larger tensor alone), in the units of add()'s
  // sizes: no bound by default; 0 fuses nothing.
  std::uint64_t max_size = std::numeric_limits<std::uint64_t>::max();
  // A tensor's size as placed, its padding included: by default
  // kernels::fusion_align, so that every tensor of a 16-bit or fp32 fusion
  // buffer starts on 16 bytes; sizes already padded (bytes, strides) pass as they are.
  std::size_t (*placed)(std::size_t) = kernels::fusion_align;
};

// Where one tensor sits: its batch, and its offset in the batch's buffer.
struct Placement {
  int batch = -1;
  std::size_t offset = 0;
};

inline std::size_t as_given(std::size_t size) { return size; }

template <class Key>
class Layout {
 public:
  explicit Layout(BatchRule rule = {}) : rule_(rule) {}

  // Places a tensor of `size` units in a batch of `key` that the rule lets it
  // join (a new batch otherwise), after the tensors placed there before it.
  Placement add(const Key& key, std::size_t size, bool alone = false) {
    const std::size_t placed = rule_.placed(size);
    int batch = alone ? batches() : first_open(key, placed);
    if (batch == batches()) batches_.push_back(Batch{key, 0, {}, alone});
    Batch& b = batches_[batch];
    const Placement placement{batch, b.size};
    b.size += placed;
    b.members.push_back(added_++);
    return placement;
  }

  int batches() const { return static_cast<int>(batches_.size()); }
  const Key& key(int batch) const { return batches_[batch].key; }
  // The batch buffer's size, padding included (for casts: elements).
  std::size_t elements(int batch) const { return batches_[batch].size; }
  // The tensors of a batch, by the order in which add() saw them (0, 1, ...).
  const std::vector<int>& members(int batch) const { return batches_[batch].members; }

 private:
  struct Batch {
    Key key;
    std::size_t size;
    std::vector<int> members;
    bool closed;  // an alone tensor's: nothing joins it
  };
  bool fits(const Batch& b, std::size_t placed) const {
    return !b.closed && placed <= rule_.max_size && b.size <= rule_.max_size - placed;
  }
  // The batch of `key` a tensor of `placed` units may join, or batches().
  int first_open(const Key& key, std::size_t placed) const {
    if (rule_.adjacent) {
      // The last batch holds the last tensor placed.
      const bool joins =
          !batches_.empty() && batches_.back().key == key && fits(batches_.back(), placed);
      return joins ? batches() - 1 : batches();
    }
    int batch = 0;
    while (batch < batches() && !(batches_[batch].key == key && fits(batches_[batch], placed)))
      ++batch;
    return batch;
  }

  BatchRule rule_;
  std::vector<Batch> batches_;
  int added_ = 0;
};

}  // namespace slimreduce::fusion
