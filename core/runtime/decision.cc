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
  call.passes_because = passed_by(rule, call.error_feedback, shape, &call.shape_call);
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

std::string auto_span_args(const std::optional<AutoStep>& auto_step) {
  if (!auto_step) return {};
  const AutoStep& step = *auto_step;
  return std::string(", \"auto\": \"") +
         (step.probe   ? "probe"
          : step.timed ? "check"
                       : "chosen") +
         "\"";
}

AutoChoiceRow auto_choice_row(const Policy& policy, std::uint64_t comm_id, std::uint32_t size_class,
                              const AutoChooser::ClassSummary& summary) {
  AutoChoiceRow row{comm_id,          size_class,   "", {}, summary.probe_rounds,
                    summary.switches, summary.calls};
  if (summary.chosen >= 0) row.chosen = policy.candidates.at(summary.chosen).name;
  row.resetting = summary.resetting;
  row.reset_rounds = summary.reset_rounds;
  for (std::size_t c = 0; c < summary.medians.size(); ++c)
    row.medians.emplace_back(policy.candidates.at(c).name, summary.medians[c]);
  return row;
}

}  // namespace slimreduce
