#include "core/runtime/decision.h"

#include "core/runtime/eligibility.h"

namespace slimreduce {

bool Policy::any_error_feedback() const {
  for (const Candidate& candidate : candidates) {
    if (candidate.error_feedback) return true;
  }
  return error_feedback;
}

CallDecision decide_auto(const Policy& policy, CompressionDecision& rule, AutoChooser& chooser,
                         const CallShape& shape, bool timed_path) {
  CallDecision call;
  call.error_feedback = policy.any_error_feedback();
  call.passes_because =
      counted_as(rule.decide(call.error_feedback, shape.comm_id, shape.count, shape.datatype_tag));
  if (call.passes_because) return call;  // route pass_through
  // float32 calls only (the MPI side's): a size class is a power of two of their bytes.
  const std::uint64_t bytes = shape.count * sizeof(float);
  if (timed_path) {
    call.auto_step = chooser.next(shape.comm_id, bytes);
    call.candidate = call.auto_step->candidate;
  } else {
    call.candidate = chooser.current(shape.comm_id, bytes);
  }
  const Policy::Candidate& chosen = policy.candidates.at(call.candidate);
  call.compressor = chosen.compressor;
  call.error_feedback = chosen.error_feedback;
  call.route =
      chosen.compressor ? route_of(chosen.compressor->aggregation()) : ReductionPath::pass_through;
  return call;
}

}  // namespace slimreduce
