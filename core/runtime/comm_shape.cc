#include "core/runtime/comm_shape.h"

#include <algorithm>

namespace slimreduce {

double CommShape::ring_factor() const { return ring_allreduce_wire_bytes(1, size); }

Counters counted_call(int ranks, const NodeSplit* nodes, const CallOutcome& call) {
  Counters counted;
  ranks = std::max(ranks, 1);
  if (call.compressed) {
    counted.count_compressed(call.bytes, ranks, call.wire_sent);
  } else {
    counted.count_pass_through(call.bytes, ranks);
    if (call.passed_because) ++(counted.*call.passed_because);
  }
  if (nodes) count_by_node(counted, *nodes, call.compressed && call.ran_hierarchically, call.count);
  return counted;
}

}  // namespace slimreduce
