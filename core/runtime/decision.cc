#include "core/runtime/decision.h"

#include "core/runtime/compressor_choice.h"
#include "core/runtime/cost_model.h"
#include "core/runtime/eligibility.h"

namespace slimreduce {

bool Policy::any_error_feedback() const {
  for (const Candidate& candidate : candidates) {
    if (candidate.error_feedback) return true;
  }
  return error_feedback;
}

void add_two_level_twins(
    Policy& policy,
    const std::function<std::shared_ptr<compressors::Compressor>(const std::string&)>& make) {
  policy.chooses_hierarchy = true;
  const std::size_t flat = policy.candidates.size();
  for (std::size_t c = 0; c < flat; ++c) {
    const Policy::Candidate& candidate = policy.candidates[c];
    if (!candidate.compressor ||
        candidate.compressor->aggregation() == compressors::Aggregation::low_rank)
      continue;
    Policy::Candidate twin{candidate.name + "/two-level", make(candidate.name),
                           candidate.error_feedback, true};
    policy.candidates.push_back(std::move(twin));
  }
}

void add_unbiased_twins(
    Policy& policy,
    const std::function<std::shared_ptr<compressors::Compressor>(const std::string&)>& make) {
  const std::size_t before = policy.candidates.size();
  for (std::size_t c = 0; c < before; ++c) {
    const Policy::Candidate& candidate = policy.candidates[c];
    if (candidate.two_level || !candidate.error_feedback || !has_unbiased_rounding(candidate.name))
      continue;
    Policy::Candidate twin{candidate.name + "/unbiased", make(candidate.name), false, false, true};
    policy.candidates.push_back(std::move(twin));
  }
}

std::vector<bool> available_candidates(
    const Policy& policy, const std::function<bool(const Policy::Candidate&)>& two_level) {
  std::vector<bool> available;
  for (const Policy::Candidate& candidate : policy.candidates)
    available.push_back(!candidate.two_level || (two_level && two_level(candidate)));
  return available;
}

CallDecision decide_auto(const Policy& policy, CompressionDecision& rule, AutoChooser& chooser,
                         const CallShape& shape, bool timed_path,
                         const std::function<bool(const Policy::Candidate&)>& two_level,
                         int ranks) {
  CallDecision call;
  call.error_feedback = policy.any_error_feedback();
  call.passes_because = passed_by(rule, call.error_feedback, shape, &call.shape_call);
  if (call.passes_because) return call;  // route pass_through
  // float32 calls only (the MPI side's): a size class is a power of two of their bytes.
  const std::uint64_t bytes = shape.count * sizeof(float);
  if (timed_path) {
    call.auto_step = chooser.next(
        shape.comm_id, bytes,
        policy.chooses_hierarchy ? available_candidates(policy, two_level) : std::vector<bool>{},
        ranks);
    call.candidate = call.auto_step->candidate;
  } else {
    call.candidate = chooser.current(shape.comm_id, bytes);
  }
  const Policy::Candidate& chosen = policy.candidates.at(call.candidate);
  call.compressor = chosen.compressor;
  call.error_feedback = chosen.error_feedback;
  call.flat = policy.chooses_hierarchy && !chosen.two_level;
  call.route =
      chosen.compressor ? route_of(chosen.compressor->aggregation()) : ReductionPath::pass_through;
  return call;
}

AutoChooser::Model auto_model(const Policy& policy) {
  return [candidates = policy.candidates](int c, std::uint64_t bytes, int ranks) {
    const Policy::Candidate& candidate = candidates.at(static_cast<std::size_t>(c));
    if (candidate.two_level || ranks < 1) return 0.0;
    cost::Layout layout;
    layout.ranks = ranks;
    layout.per_node = 1;
    return cost::predict(candidate.compressor.get(), bytes / sizeof(float), layout, cost::Link{},
                         cost::Link{}, cost::Rates{})
        .total_s();
  };
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
  AutoChoiceRow row;
  row.comm_id = comm_id;
  row.size_class = size_class;
  if (summary.chosen >= 0) row.chosen = policy.candidates.at(summary.chosen).name;
  row.probe_rounds = summary.probe_rounds;
  row.switches = summary.switches;
  row.calls = summary.calls;
  row.resetting = summary.resetting;
  row.reset_rounds = summary.reset_rounds;
  // Each candidate's time by name, those with none left out (a median never
  // probed: a twin where the communicator runs nothing two-level, or a
  // candidate a prediction left out as hopeless).
  const auto named = [&policy](const std::vector<double>& seconds) {
    std::vector<std::pair<std::string, double>> out;
    for (std::size_t c = 0; c < seconds.size(); ++c) {
      if (seconds[c] > 0) out.emplace_back(policy.candidates.at(c).name, seconds[c]);
    }
    return out;
  };
  row.medians = named(summary.medians);
  row.cut = named(summary.cut);
  row.predicted_out = named(summary.predicted_out);
  return row;
}

}  // namespace slimreduce
