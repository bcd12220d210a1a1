#include "scheduler/partition.h"

#include <algorithm>
#include <stdexcept>

namespace slimreduce::scheduler {

std::vector<Partition> partitions(std::size_t count, std::size_t element_bytes,
                                  std::uint64_t partition_bytes) {
  if (partition_bytes == 0 || element_bytes == 0) throw std::invalid_argument("partition size");
  std::vector<Partition> pieces;
  if (count == 0) return pieces;
  // A piece holds at least one element, however small the setting.
  const std::uint64_t per_piece = std::max<std::uint64_t>(1, partition_bytes / element_bytes);
  const std::size_t piece_count = static_cast<std::size_t>((count + per_piece - 1) / per_piece);
  const std::size_t base = count / piece_count;
  const std::size_t longer = count % piece_count;
  pieces.reserve(piece_count);
  std::size_t begin = 0;
  for (std::size_t i = 0; i < piece_count; ++i) {
    const std::size_t length = base + (i < longer ? 1 : 0);
    pieces.push_back({begin, length});
    begin += length;
  }
  return pieces;
}

}  // namespace slimreduce::scheduler
