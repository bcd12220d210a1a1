// Partitions (docs/architecture.md, "Partitions and pipelining"): a call
// larger than SLIMREDUCE_PARTITION_BYTES is cut into near-equal contiguous
// pieces, each reduced as a call of its own, so that one piece can be on the
// wire while the next is compressed and the last decoded. The cut reads only
// the count, the element size and the setting, so every rank cuts alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace slimreduce::scheduler {

struct Partition {
  std::size_t begin;  // first element
  std::size_t count;  // elements
};

// count elements of element_bytes cut into the fewest near-equal pieces of
// at most partition_bytes (> 0) each; the first count % pieces get one more
// element. One piece (the whole) when it fits; none when count is 0.
std::vector<Partition> partitions(std::size_t count, std::size_t element_bytes,
                                  std::uint64_t partition_bytes);

}  // namespace slimreduce::scheduler
