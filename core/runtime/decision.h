// Whether an eligible call is compressed: one rule for every path (MPI host,
// MPI device, NCCL), read from the call and the calls before it, so every rank
// takes the same decision (invariant 3 of docs/architecture.md):
//  1. with error feedback, a tensor whose residual could never fit under
//     SLIMREDUCE_EF_MAX_BYTES passes through (a cap every rank compares alike);
//  2. the first SLIMREDUCE_WARMUP_STEPS calls of each shape (communicator,
//     count, datatype) pass through;
//  3. else it is compressed. The residual itself is looked up afterwards: its
//     keys are local buffer addresses, so finding no room for one only turns
//     error feedback off for the call, never the path.
//
// On top of that rule sits the one value a call is run with, CallDecision:
// route, compressor and level, read from the call's shape and the calls of
// that shape before it, the same on every rank. The compressor is the
// policy's; a measured choice (SLIMREDUCE_COMPRESSOR=auto) picks it per size
// class, and adaptive levels (SLIMREDUCE_ADAPTIVE) pick its level per shape,
// here and nowhere else; every path (MPI host, MPI device, queued, NCCL)
// runs what the value says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compressors/compressor.h"
#include "core/runtime/adaptive_levels.h"
#include "core/runtime/auto_choice.h"
#include "core/runtime/call_shape.h"
#include "core/runtime/counters.h"
#include "core/runtime/residuals.h"
#include "scheduler/route.h"

namespace slimreduce {

enum class Decision { compress, over_residual_cap, warming_up };

class CompressionDecision {
 public:
  // `numbers_calls`: number each shape's calls (stochastic rounding draws from them).
  CompressionDecision(std::uint64_t ef_max_bytes, std::uint64_t warmup_steps,
                      bool numbers_calls = false)
      : ef_max_bytes_(ef_max_bytes), warmup_(warmup_steps, numbers_calls) {}

  // Counts the call towards its shape's warm-up unless the cap decides first;
  // *number (nullptr: not asked), then, the call's number among its shape's
  // where calls are numbered.
  Decision decide(bool error_feedback, std::uint64_t comm_id, std::size_t count,
                  std::uint64_t datatype_tag, std::uint64_t* number = nullptr) {
    if (error_feedback && std::uint64_t{count} * sizeof(float) > ef_max_bytes_)
      return Decision::over_residual_cap;
    if (warmup_.warming_up(comm_id, count, datatype_tag, number)) return Decision::warming_up;
    return Decision::compress;
  }
  void forget_communicator(std::uint64_t comm_id) { warmup_.forget_communicator(comm_id); }

 private:
  std::uint64_t ef_max_bytes_;
  WarmupCounter warmup_;
};

// The report's counter for a call passed through by `decision` (nullptr: compressed).
inline std::uint64_t Counters::*counted_as(Decision decision) {
  switch (decision) {
    case Decision::over_residual_cap:
      return &Counters::ef_cap_fallback;
    case Decision::warming_up:
      return &Counters::warmup;
    case Decision::compress:
      break;
  }
  return nullptr;
}

// The policy a call runs under: taken under the runtime's lock, held for the
// call (a switch meanwhile leaves the call's compressor alive).
struct Policy {
  std::shared_ptr<compressors::Compressor> compressor;  // nullptr: "none" (or "auto")
  bool error_feedback = false;
  // SLIMREDUCE_COMPRESSOR=auto: what it chooses from, each with its own
  // settings and error feedback (a nullptr compressor: "none"); else empty.
  struct Candidate {
    std::string name;
    std::shared_ptr<compressors::Compressor> compressor;
    bool error_feedback = false;
    bool two_level = false;  // SLIMREDUCE_HIERARCHICAL=auto's twin: "<name>/two-level"
    // A quantizer's twin for classes whose residuals keep resetting:
    // "<name>/unbiased", stochastic rounding and no residual (add_unbiased_twins).
    bool unbiased = false;
  };
  std::vector<Candidate> candidates;
  // SLIMREDUCE_HIERARCHICAL=auto: the candidates after the flat ones are
  // their two-level twins; a flat candidate then runs flat on a communicator
  // that spans nodes.
  bool chooses_hierarchy = false;
  // SLIMREDUCE_ADAPTIVE=accordion: the compressor at each level (gentle,
  // hard: LevelSchedule's), made alike but for the level, `compressor` being
  // the gentle one; else empty.
  std::vector<std::shared_ptr<compressors::Compressor>> levels;

  bool chooses() const { return !candidates.empty(); }
  bool adapts() const { return levels.size() > 1; }
  // Whether any candidate keeps a residual (the residual cap reads it).
  bool any_error_feedback() const;
};

// What one eligible call is run with.
struct CallDecision {
  // The classifier's route, or pass_through when the decision passes it.
  ReductionPath route = ReductionPath::pass_through;
  std::shared_ptr<compressors::Compressor> compressor;  // held for the call
  bool error_feedback = false;
  int level = 0;  // the compressor's level: 0, its only one, unless levels adapt
  // The call's number among its shape's calls (WarmupCounter), the same on
  // every rank: what stochastic rounding draws from, with the rank.
  std::uint64_t shape_call = 0;
  // SLIMREDUCE_ADAPTIVE: the level came from the shape's LevelSchedule, to
  // which the side reports the reduced result's norm.
  bool levels_adapt = false;
  // Set when the call passes through: the report's counter of the reason.
  std::uint64_t Counters::*passes_because = nullptr;
  // Runs flat even on a communicator that spans nodes: a flat candidate of
  // SLIMREDUCE_HIERARCHICAL=auto.
  bool flat = false;
  // SLIMREDUCE_COMPRESSOR=auto: the candidate (its index) and the schedule's
  // step for this call (unset for a queued call, which only follows the choice).
  int candidate = -1;
  std::optional<AutoStep> auto_step;

  bool compressed() const { return route != ReductionPath::pass_through; }
};

// What a call of `shape` would be run with, before warm-up and the cap have
// their say (nothing is counted): a side may still find the compressor will
// not take the call (a low-rank tensor too small to factor) and pass it
// through uncounted. `route`: the classifier's, for the policy's compressor.
// `level`: the shape's level where the policy adapts (LevelSchedule::level).
// Not for a policy that chooses (decide_auto is).
inline CallDecision choose_for(const Policy& policy, ReductionPath route, int level = 0) {
  CallDecision decision;
  decision.levels_adapt = policy.adapts();
  decision.level = decision.levels_adapt ? level : 0;
  decision.compressor = decision.levels_adapt ? policy.levels.at(level) : policy.compressor;
  decision.error_feedback = policy.error_feedback;
  decision.route = policy.compressor ? route : ReductionPath::pass_through;
  return decision;
}

// The residual cap and warm-up on a call of `shape` (counted towards its
// warm-up): the report's counter of why it passes through, or nullptr;
// *number (nullptr: not asked) the call's number among its shape's.
inline std::uint64_t Counters::*passed_by(CompressionDecision& rule, bool error_feedback,
                                          const CallShape& shape, std::uint64_t* number = nullptr) {
  return counted_as(
      rule.decide(error_feedback, shape.comm_id, shape.count, shape.datatype_tag, number));
}

// The residual cap and warm-up on a chosen call: where either passes it, its
// route becomes pass_through, with the reason.
inline void settle(CompressionDecision& rule, CallDecision& decision, const CallShape& shape) {
  if (!decision.compressed()) return;
  decision.passes_because = passed_by(rule, decision.error_feedback, shape, &decision.shape_call);
  if (decision.passes_because) decision.route = ReductionPath::pass_through;
}

// SLIMREDUCE_COMPRESSOR=auto: warm-up and the cap first (with error feedback
// if any candidate keeps one), then the candidate: the schedule's next step
// (`timed_path`: a call whose time the side measures and whose ranks can
// exchange after it) or the class's choice (a queued call, a call in a
// group or a CUDA graph). The route
// is the candidate's (none: pass_through, passes_because unset).
// `two_level`: whether the communicator runs a two-level candidate two-level
// (it spans nodes, and the side runs that candidate's aggregation so); a
// round leaves out the twins it cannot run. The same on every rank.
// `ranks`: the communicator's, for the chooser's model (0: not known).
CallDecision decide_auto(const Policy& policy, CompressionDecision& rule, AutoChooser& chooser,
                         const CallShape& shape, bool timed_path,
                         const std::function<bool(const Policy::Candidate&)>& two_level = {},
                         int ranks = 0);

// SLIMREDUCE_HIERARCHICAL=auto: appends each compressing candidate's
// two-level twin ("<name>/two-level", a compressor of its own made alike by
// `make`). Not none's (the real library's allreduce has no two levels of
// ours) nor a low-rank one's (its Q is a factor of the whole tensor flat and
// of a shard two-level: one key's Q cannot serve both).
void add_two_level_twins(
    Policy& policy,
    const std::function<std::shared_ptr<compressors::Compressor>(const std::string&)>& make);

// SLIMREDUCE_COMPRESSOR=auto: appends, for each flat candidate that keeps a
// residual and can round stochastically (the integer quantizers), its
// unbiased twin ("<name>/unbiased", made by `make` with stochastic rounding,
// no error feedback), which AutoChooser probes only for classes whose
// residuals keep resetting: there error feedback feeds back nothing, and
// unbiased codes keep the sum right on average without it.
void add_unbiased_twins(
    Policy& policy,
    const std::function<std::shared_ptr<compressors::Compressor>(const std::string&)>& make);

// Which candidates a communicator can run (AutoChooser::next's `available`):
// every flat one, and a two-level twin where `two_level` says so.
std::vector<bool> available_candidates(
    const Policy& policy, const std::function<bool(const Policy::Candidate&)>& two_level);

// SLIMREDUCE_COMPRESSOR=auto: the chooser's model (AutoChooser::set_model),
// the analytic cost model (core/runtime/cost_model.h) of each flat candidate
// at a nominal link of its own per rank (cost::Link's 1 Gbit/s and 20 us, so
// one rank's bytes a link: the algorithms' wire and messages) with no
// compression time: only its ratio between two sizes is used, scaled by a
// time the ranks agreed, and a rank's own kernel rate is not a fact the
// others share. 0 for a two-level twin (its nodes are the side's).
AutoChooser::Model auto_model(const Policy& policy);

// A call's place in auto's schedule, as its timeline spans' args
// (`, "auto": "probe"`, "check" or "chosen"); empty outside the schedule.
std::string auto_span_args(const std::optional<AutoStep>& auto_step);

// One size class's agreed choice with the candidates' names, as the report
// and the log give it.
AutoChoiceRow auto_choice_row(const Policy& policy, std::uint64_t comm_id, std::uint32_t size_class,
                              const AutoChooser::ClassSummary& summary);

}  // namespace slimreduce
