// The layout of fused buffers: the tensors handed over together are grouped
// into batches, one per key (what must be alike for one collective to carry
// them: communicator, stream, op), in the order their keys first appear, and
// each tensor is given an offset in its batch's buffer, aligned so that every
// tensor gets the vector path (kernels::fusion_align). The order comes from
// the call order alone, so every rank lays out the same batches (design
// invariant 3). The pack and unpack of a batch are kernels::pack_batch /
// unpack_batch on the host and their CUDA twins on the device.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/pack.h"

namespace slimreduce::fusion {

// Where one tensor sits: its batch, and its element offset in the batch's buffer.
struct Placement {
  int batch = -1;
  std::size_t offset = 0;
};

template <class Key>
class Layout {
 public:
  // Places a tensor of `count` elements in the batch of `key` (a new batch
  // for a key not seen yet), after the tensors placed there before it.
  Placement add(const Key& key, std::size_t count) {
    int batch = 0;
    while (batch < batches() && !(batches_[batch].key == key)) ++batch;
    if (batch == batches()) batches_.push_back(Batch{key, 0, {}});
    Batch& b = batches_[batch];
    const Placement placement{batch, b.elements};
    b.elements += kernels::fusion_align(count);
    b.members.push_back(added_++);
    return placement;
  }

  int batches() const { return static_cast<int>(batches_.size()); }
  const Key& key(int batch) const { return batches_[batch].key; }
  // The batch buffer's length in elements, padding included.
  std::size_t elements(int batch) const { return batches_[batch].elements; }
  // The tensors of a batch, by the order in which add() saw them (0, 1, ...).
  const std::vector<int>& members(int batch) const { return batches_[batch].members; }

 private:
  struct Batch {
    Key key;
    std::size_t elements;
    std::vector<int> members;
  };
  std::vector<Batch> batches_;
  int added_ = 0;
};

}  // namespace slimreduce::fusion
