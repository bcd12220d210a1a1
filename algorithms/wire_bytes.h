// The bytes a rank hands to the transport in the collectives the algorithms
// use: the report's accounting (design notes section 5), for compressed and
// passed-through calls alike.
#pragma once

#include <cstdint>

namespace slimreduce::algorithms {

// Bytes a rank sends in a bandwidth-optimal ring allreduce of `bytes`.
inline double ring_allreduce_wire_bytes(std::uint64_t bytes, int ranks) {
  if (ranks <= 1) return 0;
  return 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes);
}

// Bytes a rank sends in a ring allgather of a `payload_bytes` payload per rank.
inline double ring_allgather_wire_bytes(std::uint64_t payload_bytes, int ranks) {
  if (ranks <= 1) return 0;
  return static_cast<double>(ranks - 1) * static_cast<double>(payload_bytes);
}

}  // namespace slimreduce::algorithms
