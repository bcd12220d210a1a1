// How one eligible reduction travels: the route the runtime's shared
// classifier (core/runtime/eligibility.h) picks from facts every rank derives
// alike from the call's arguments, and each side maps to its steps.
#pragma once

namespace slimreduce {

// pass_through: the real library runs the caller's call as given. The others
// name the compressor's kind of aggregation: a dense cast summed on the wire,
// top-k payloads gathered (a side may shard them later), the low-rank
// factors' two sums, sharded parts to owners.
enum class ReductionPath { pass_through, cast, topk, low_rank, sharded };

struct ReductionVerdict {
  ReductionPath path = ReductionPath::pass_through;
  bool average = false;     // ncclAvg: divide by the rank count once, after the sum
  const char* reason = "";  // why it passes through ("" when it does not)
};

}  // namespace slimreduce
