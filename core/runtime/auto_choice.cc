#include "core/runtime/auto_choice.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>

namespace slimreduce {

double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

namespace {

// How many powers of two apart two size classes are.
std::uint32_t classes_apart(std::uint32_t a, std::uint32_t b) { return a > b ? a - b : b - a; }

// A round's calls after its first pass (or all of them, without one), in
// turn: `probes` cycles over `turns`, whose first also takes the candidates
// that `joined` after the pass (they had no call in it, so one more each).
std::vector<int> turn_calls(const std::vector<int>& turns, const std::vector<int>& joined,
                            int probes) {
  std::vector<int> calls = joined;
  for (int cycle = 0; cycle < probes; ++cycle) {
    calls.insert(calls.end(), turns.begin(), turns.end());
    calls.insert(calls.end(), joined.begin(), joined.end());
  }
  return calls;
}

}  // namespace

AutoChooser::AutoChooser(int candidates, Schedule schedule)
    : candidates_(candidates), schedule_(schedule) {
  if (candidates < 1 || schedule.probes < 1 || schedule.check_window < 1 ||
      schedule.check_every < schedule.check_window || schedule.first_reprobe < 1 ||
      schedule.longest_reprobe < schedule.first_reprobe || schedule.full_round_every < 1 ||
      !(schedule.hopeless >= 1))
    throw std::invalid_argument("AutoChooser: a schedule that never agrees");
}

std::uint32_t AutoChooser::size_class(std::uint64_t bytes) {
  return bytes < 2 ? 0u : static_cast<std::uint32_t>(std::bit_width(bytes) - 1);
}

AutoStep AutoChooser::next(std::uint64_t comm_id, std::uint64_t bytes, std::vector<bool> available,
                           int ranks) {
  const std::uint32_t size_class = AutoChooser::size_class(bytes);
  if (ranks > 0) ranks_[comm_id] = ranks;
  ClassState& state = classes_[{comm_id, size_class}];
  state.available = std::move(available);
  if (state.summary.calls == 0) state.reprobe_after = schedule_.first_reprobe;
  ++state.summary.calls;
  if (state.awaiting) return awaiting_step(state, size_class);
  if (!state.probing && state.step >= state.reprobe_after) {
    state.probing = true;  // the interval is over: measure again
    state.step = 0;
    state.times.clear();
  }
  const AutoStep step =
      state.probing ? probe_step(state, {comm_id, size_class}) : chosen_step(state, size_class);
  state.awaiting = step.agree_after;  // cleared by agreed(): at once on MPI, later on NCCL
  return step;
}

AutoStep AutoChooser::awaiting_step(const ClassState& state, std::uint32_t size_class) const {
  AutoStep step;
  step.size_class = size_class;
  step.candidate = state.summary.chosen < 0 ? 0 : state.summary.chosen;
  step.awaiting = true;
  return step;
}

// The candidates a round starting now takes: the first round's by
// first_round(); every one every full_round_every-th round and after a
// drift; otherwise those whose last agreed median (or, never probed, their
// prediction) is within `hopeless` times the choice's (the choice always,
// and any with neither). Read from agreed medians alone, so the same on
// every rank. Never a candidate the communicator cannot run (next()'s
// `available`). *open: the round may take a candidate it knows nothing of.
std::vector<int> AutoChooser::round_candidates(const ClassState& state, const Key& key,
                                               bool* open) const {
  const ClassSummary& summary = state.summary;
  *open = true;
  if (summary.chosen < 0) return first_round(state, key);
  const bool all = state.drifted || summary.probe_rounds % schedule_.full_round_every == 0 ||
                   summary.medians.size() != static_cast<std::size_t>(candidates_);
  *open = all;
  const double bound = all ? 0 : schedule_.hopeless * summary.medians[summary.chosen];
  std::vector<int> round;
  for (int c = 0; c < candidates_; ++c) {
    if (!may_probe(state, c)) continue;
    const double own =
        summary.medians[c] > 0 ? summary.medians[c] : predicted(key.first, key.second, c);
    if (!(all || c == summary.chosen || own <= bound)) continue;
    round.push_back(c);
    // Neither measured nor predicted (cut by a pass before): the round opens
    // with a pass of its own.
    *open = *open || own <= 0;
  }
  if (round.empty()) round.push_back(0);  // next() asks that the first be available
  return round;
}

// A class's first round: every candidate, but for those the communicator's
// other classes predict more than `hopeless` times the best prediction
// (only where two candidates or more have one: a prediction is judged
// against another). Probing a hopeless candidate costs the most (plain fp32
// over a slow link), and its own round would only confirm it; it is probed
// at the class's next full round.
std::vector<int> AutoChooser::first_round(const ClassState& state, const Key& key) const {
  std::vector<double> predictions(candidates_, 0.0);
  double best = 0;
  int predicted_count = 0;
  for (int c = 0; c < candidates_; ++c) {
    if (!may_probe(state, c) || !schedule_.predict_first_round) continue;
    predictions[c] = predicted(key.first, key.second, c);
    if (predictions[c] <= 0) continue;
    ++predicted_count;
    best = best > 0 ? std::min(best, predictions[c]) : predictions[c];
  }
  std::vector<int> round;
  for (int c = 0; c < candidates_; ++c) {
    if (!may_probe(state, c)) continue;
    if (predicted_count < 2 || predictions[c] <= 0 || predictions[c] <= schedule_.hopeless * best)
      round.push_back(c);
  }
  if (round.empty()) round.push_back(0);  // next() asks that the first be available
  return round;
}

double AutoChooser::predicted(std::uint64_t comm_id, std::uint32_t size_class,
                              int candidate) const {
  // The communicator's agreed classes with a median of the candidate, nearest first.
  std::vector<std::pair<std::uint32_t, double>> known;  // (class, median)
  for (auto it = classes_.lower_bound({comm_id, 0}); it != classes_.end(); ++it) {
    if (it->first.first != comm_id) break;
    const ClassSummary& summary = it->second.summary;
    if (it->first.second == size_class || summary.chosen < 0 ||
        static_cast<std::size_t>(candidate) >= summary.medians.size() ||
        !(summary.medians[candidate] > 0))
      continue;
    known.emplace_back(it->first.second, summary.medians[candidate]);
  }
  if (known.size() < 2) return modelled(comm_id, size_class, candidate);
  const auto distance = [size_class](std::uint32_t c) { return classes_apart(c, size_class); };
  std::stable_sort(known.begin(), known.end(), [&](const auto& a, const auto& b) {
    return distance(a.first) < distance(b.first);  // ties: the smaller class (map order)
  });
  const double x1 = std::ldexp(1.0, static_cast<int>(known[0].first));
  const double x2 = std::ldexp(1.0, static_cast<int>(known[1].first));
  const double seconds_per_byte = (known[1].second - known[0].second) / (x2 - x1);
  if (!(seconds_per_byte > 0)) return 0;
  const double at =
      known[0].second + seconds_per_byte * (std::ldexp(1.0, static_cast<int>(size_class)) - x1);
  return at > 0 ? at : 0;
}

// One agreed time of the candidate at the nearest other class of the
// communicator (ties: the smaller class), its median or else the one call of
// the pass that cut it, times the model's ratio of the two sizes: the model
// gives the shape (latency against bytes, each algorithm's wire), the ranks'
// agreed time the scale. 0 without a model, the ranks, or such a time.
double AutoChooser::modelled(std::uint64_t comm_id, std::uint32_t size_class, int candidate) const {
  const auto ranks = ranks_.find(comm_id);
  if (!model_ || ranks == ranks_.end()) return 0;
  const auto c = static_cast<std::size_t>(candidate);
  std::uint32_t nearest = 0, distance = 0;
  double time = 0;
  for (auto it = classes_.lower_bound({comm_id, 0}); it != classes_.end(); ++it) {
    if (it->first.first != comm_id) break;
    const std::uint32_t at = it->first.second;
    const ClassSummary& summary = it->second.summary;
    if (at == size_class || summary.chosen < 0) continue;
    const double median = c < summary.medians.size() ? summary.medians[c] : 0;
    const double agreed = median > 0 ? median : c < summary.cut.size() ? summary.cut[c] : 0;
    const std::uint32_t apart = classes_apart(at, size_class);
    if (!(agreed > 0) || (time > 0 && apart >= distance)) continue;
    nearest = at, distance = apart, time = agreed;
  }
  if (!(time > 0)) return 0;
  const double there = model_(candidate, std::uint64_t{1} << nearest, ranks->second);
  const double here = model_(candidate, std::uint64_t{1} << size_class, ranks->second);
  return there > 0 && here > 0 ? time * (here / there) : 0;
}

// A round's candidates, and whether it opens with a first pass: only a
// round that may take every candidate (the others left out the hopeless
// ones already), of two candidates or more; on a side that agrees later,
// only where the calls before the agreement take a choice the class has
// (exchanges_later()).
void AutoChooser::start_round(ClassState& state, const Key& key) const {
  bool open = false;
  state.round = state.twins_next ? twins_round(state) : round_candidates(state, key, &open);
  state.twins_next = false;
  const bool waits_on_choice = !later_.contains(key.first) || state.summary.chosen >= 0;
  const bool cut = open && schedule_.cut_after_first_pass && waits_on_choice &&
                   schedule_.probes > 1 && state.round.size() > 1;
  state.pass_calls = cut ? state.round.size() : 0;
  state.pass.clear();
  state.pass_resetting = false;
  state.calls = turn_calls(state.round, {}, schedule_.probes - (cut ? 1 : 0));
  // What a prediction alone kept out of the round, for the report.
  const std::vector<double>& medians = state.summary.medians;
  state.left_out.assign(candidates_, 0.0);
  for (int c = 0; c < candidates_; ++c) {
    const bool measured = static_cast<std::size_t>(c) < medians.size() && medians[c] > 0;
    if (measured || !may_probe(state, c) ||
        std::find(state.round.begin(), state.round.end(), c) != state.round.end())
      continue;
    state.left_out[c] = predicted(key.first, key.second, c);
  }
}

AutoStep AutoChooser::probe_step(ClassState& state, const Key& key) const {
  if (state.step == 0) start_round(state, key);
  AutoStep step;
  step.size_class = key.second;
  step.timed = true;
  step.probe = true;
  if (state.step < state.pass_calls) {
    step.candidate = state.round[state.step];
    step.first_pass = step.agree_after = state.step + 1 == state.pass_calls;
  } else {
    const std::uint64_t in_turn = state.step - state.pass_calls;
    step.candidate = state.calls[in_turn];
    step.agree_after = in_turn + 1 == state.calls.size();
  }
  ++state.step;
  return step;
}

AutoStep AutoChooser::chosen_step(ClassState& state, std::uint32_t size_class) const {
  const std::uint64_t in_period = state.step % schedule_.check_every;
  AutoStep step;
  step.size_class = size_class;
  step.candidate = state.summary.chosen;
  step.timed = in_period >= schedule_.check_every - schedule_.check_window;
  step.agree_after = in_period + 1 == schedule_.check_every;
  ++state.step;
  return step;
}

int AutoChooser::current(std::uint64_t comm_id, std::uint64_t bytes) const {
  const auto found = classes_.find({comm_id, size_class(bytes)});
  if (found == classes_.end() || found->second.summary.chosen < 0) return 0;
  return found->second.summary.chosen;
}

void AutoChooser::record(const AutoStep& step, std::uint64_t comm_id, double seconds,
                         std::uint64_t resets) {
  if (step.awaiting) return;  // no call of any window
  ClassState& state = classes_[{comm_id, step.size_class}];
  ++state.calls_since;
  state.resets_since += resets;
  if (step.timed) state.times.push_back(seconds);
}

std::vector<double> AutoChooser::window(const AutoStep& step, std::uint64_t comm_id) const {
  const auto found = classes_.find({comm_id, step.size_class});
  if (found == classes_.end()) return {0.0};
  std::vector<double> window = found->second.times;
  window.push_back(static_cast<double>(found->second.resets_since));
  return window;
}

bool AutoChooser::agreed(const AutoStep& step, std::uint64_t comm_id, std::vector<double> window) {
  ClassState& state = classes_[{comm_id, step.size_class}];
  // The ranks' largest count of resets: every rank judges the same number.
  const double resets = window.empty() ? 0.0 : window.back();
  if (!window.empty()) window.pop_back();
  state.awaiting = false;
  state.times.clear();
  bool resetting = state.calls_since > 0 && 2 * resets >= double(state.calls_since);
  if (step.first_pass) {
    // The round's resets are judged again over all its calls, at its end.
    agree_pass(state, window, resetting);
    return false;
  }
  resetting = resetting || (step.probe && state.pass_resetting);
  state.calls_since = 0;
  state.resets_since = 0;
  state.summary.resetting = resetting;
  if (step.probe) return agree_round(state, window, resetting);
  agree_check(state, window, resetting);
  return false;
}

// The first pass's times, one a candidate in round order: the calls after
// it leave out those more than `hopeless` times the fastest (never the
// fastest: the earliest of equals). A resetting pass (at least half its
// calls reset, the ranks' largest count) makes the round resetting: the
// twins the class may now probe join it, and the candidates that keep a
// residual, which could not win it, leave (where one that keeps none stays).
void AutoChooser::agree_pass(ClassState& state, const std::vector<double>& times,
                             bool resetting) const {
  state.pass = times;
  state.pass.resize(state.round.size(), 0.0);
  const double fastest = *std::min_element(state.pass.begin(), state.pass.end());
  std::vector<int> kept, joined;
  for (std::size_t k = 0; k < state.round.size(); ++k) {
    if (state.pass[k] <= schedule_.hopeless * fastest) kept.push_back(state.round[k]);
  }
  if (resetting) {
    state.summary.resetting = state.pass_resetting = true;  // may_probe() takes the twins now
    for (int c = 0; c < candidates_; ++c) {
      if (for_resetting(c) && may_probe(state, c) &&
          std::find(state.round.begin(), state.round.end(), c) == state.round.end())
        joined.push_back(c);
    }
    const auto keeps_none = [this](int c) { return !keeps_residual(c); };
    if (std::any_of(kept.begin(), kept.end(), keeps_none) ||
        std::any_of(joined.begin(), joined.end(), keeps_none))
      std::erase_if(kept, [this](int c) { return keeps_residual(c); });
  }
  state.round.insert(state.round.end(), joined.begin(), joined.end());
  state.calls = turn_calls(kept, joined, schedule_.probes - 1);
}

// A probe round's times, after its first pass (if any) in turn over
// state.calls: the least median wins; in a resetting round, the least of the
// candidates that keep no residual, where there is one.
bool AutoChooser::agree_round(ClassState& state, const std::vector<double>& times,
                              bool resetting) const {
  // A candidate left out of the round keeps its last agreed median (the
  // report's), and cannot win; one cut after the pass is judged by its
  // pass's time.
  std::vector<double> medians = state.summary.medians;
  medians.resize(candidates_, 0.0);
  std::vector<std::size_t> cut;  // after the pass: their places in the round
  for (std::size_t k = 0; k < state.round.size(); ++k) {
    const int c = state.round[k];
    std::vector<double> own;
    if (k < state.pass.size()) own.push_back(state.pass[k]);  // not a twin that joined after it
    // In the pass, and none of the calls after it: cut.
    if (std::find(state.calls.begin(), state.calls.end(), c) == state.calls.end()) cut.push_back(k);
    for (std::size_t i = 0; i < times.size() && i < state.calls.size(); ++i)
      if (state.calls[i] == c) own.push_back(times[i]);
    medians[c] = median_of(std::move(own));
  }
  bool any_without = false, any_keeping = false, any_for_all = false;
  for (int c : state.round) {
    any_without = any_without || !keeps_residual(c);
    any_keeping = any_keeping || keeps_residual(c);
    any_for_all = any_for_all || !for_resetting(c);
  }
  // Resetting: the candidates that keep a residual are left out (where that
  // leaves one: any_without), counted where there was one to leave out. Not
  // resetting: a candidate for resetting classes only (a twin, there as the
  // choice of a class whose buffers have settled) cannot win, since the
  // quantizer with its residual is what such a class should go back to.
  const bool exclude = resetting && any_without;
  const bool settled = !resetting && any_for_all;
  int winner = -1;
  for (int c : state.round) {
    if ((exclude && keeps_residual(c)) || (settled && for_resetting(c))) continue;
    if (winner < 0 || medians[c] < medians[winner]) winner = c;  // ties: the earlier
  }
  // A candidate cut after the pass has one call's time, no median: the
  // class's next round measures it again (with a pass), unless a prediction
  // leaves it out. So one slow call, a page fault or another process on the
  // core, keeps a candidate out of one round only.
  ClassSummary& summary = state.summary;
  summary.predicted_out = state.left_out;
  summary.cut.resize(candidates_, 0.0);
  for (int c : state.round) summary.cut[c] = 0;  // measured again: a median, or cut anew
  for (std::size_t k : cut) {
    const int c = state.round[k];
    if (c == winner) continue;
    medians[c] = 0;
    summary.cut[c] = state.pass[k];
  }
  if (exclude && any_keeping) ++summary.reset_rounds;
  const bool changed = summary.chosen != winner;
  if (summary.chosen >= 0 && changed) ++summary.switches;
  // The same winner again: measure less often; another: as often as at first.
  // After a drift the link has changed: as often as at first, whoever wins.
  state.reprobe_after = summary.chosen == winner && !state.drifted
                            ? std::min(state.reprobe_after * 2, schedule_.longest_reprobe)
                            : schedule_.first_reprobe;
  state.drifted = false;
  summary.chosen = winner;
  summary.medians = std::move(medians);
  ++summary.probe_rounds;
  state.chosen_median = 0;  // the first check sets it
  state.probing = false;
  state.step = 0;
  if (resetting && left_out_for_resetting(state)) {
    state.step = state.reprobe_after;  // a round at the next call: twins_round()
    state.twins_next = true;
  }
  return changed;
}

// Whether a candidate for resetting classes that the class may now probe
// was not in its last round.
bool AutoChooser::left_out_for_resetting(const ClassState& state) const {
  for (int c = 0; c < candidates_; ++c) {
    if (for_resetting(c) && may_probe(state, c) &&
        std::find(state.round.begin(), state.round.end(), c) == state.round.end())
      return true;
  }
  return false;
}

// The round after a resetting one that left twins out: the choice (the
// fastest that keeps no residual) against those twins; every other
// candidate keeps the median it was just agreed.
std::vector<int> AutoChooser::twins_round(const ClassState& state) const {
  std::vector<int> round = {state.summary.chosen};
  for (int c = 0; c < candidates_; ++c)
    if (for_resetting(c) && may_probe(state, c) && c != state.summary.chosen) round.push_back(c);
  return round;
}

// A check of the choice. The first after a round sets the choice's own
// median (a probe's time includes the switches between candidates, which the
// chosen calls do not pay); a later one that drifted from it (a link that
// slowed down or sped up, or other work on the cores) starts a probe round at
// the next call.
void AutoChooser::agree_check(ClassState& state, const std::vector<double>& times,
                              bool resetting) const {
  if (resetting && keeps_residual(state.summary.chosen)) {
    // Its residuals keep resetting: a round at the next call, which leaves it out.
    state.step = state.reprobe_after;
    state.drifted = true;
    return;
  }
  const double now = median_of(times);
  const double then = state.chosen_median;
  if (then <= 0) {
    state.chosen_median = now;
    return;
  }
  if (std::fabs(now - then) > schedule_.drift * then) {
    state.step = state.reprobe_after;
    state.drifted = true;
  }
}

AutoChooser::ClassSummary AutoChooser::summary(std::uint64_t comm_id,
                                               std::uint32_t size_class) const {
  const auto found = classes_.find({comm_id, size_class});
  return found == classes_.end() ? ClassSummary{} : found->second.summary;
}

std::vector<std::pair<std::pair<std::uint64_t, std::uint32_t>, AutoChooser::ClassSummary>>
AutoChooser::summaries() const {
  std::map<Key, ClassSummary> all = gone_;
  for (const auto& [key, state] : classes_) all[key] = state.summary;
  return {all.begin(), all.end()};
}

void AutoChooser::forget_communicator(std::uint64_t comm_id) {
  later_.erase(comm_id);
  ranks_.erase(comm_id);
  for (auto it = classes_.begin(); it != classes_.end();) {
    if (it->first.first != comm_id) {
      ++it;
      continue;
    }
    gone_[it->first] = it->second.summary;
    it = classes_.erase(it);
  }
}

}  // namespace slimreduce
