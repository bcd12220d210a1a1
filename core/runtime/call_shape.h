// A call as every rank sees it: what shared decisions are keyed by
// (invariant 3 of docs/architecture.md).
#pragma once

#include <compare>
#include <cstdint>

namespace slimreduce {

// Its communicator (numbered alike on every rank), its count and its
// datatype; never a buffer address or a clock.
struct CallShape {
  std::uint64_t comm_id = 0;
  std::uint64_t count = 0;
  std::uint64_t datatype_tag = 0;
  auto operator<=>(const CallShape&) const = default;
};

}  // namespace slimreduce
