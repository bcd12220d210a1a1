// SLIMREDUCE_COMPRESSOR=auto: which of SLIMREDUCE_AUTO_CANDIDATES sends a
// call, measured on real calls and agreed by the ranks (docs/architecture.md,
// "The measured choice").
//
// Per (communicator, size class: the call's bytes rounded down to a power of
// two) a schedule that every rank follows call by call, so every rank is at
// the same step of it at the same call:
//  - a probe round: the candidates in turn, interleaved (so a link that
//    drifts during the round touches each alike), `probes` timed calls each;
//    after its last call the side exchanges the round's times (each timed
//    call starts together on every rank, and its time is the slowest rank's:
//    what the collective itself took, not the ranks' arrival skew) and calls
//    agreed(): each candidate's median, the least wins (ties: the earlier in
//    the list). Every rank holds the same agreed times, so the same choice.
//    A round that may take every candidate (a class's first, a full round,
//    one a drift started) opens with a first pass, one call of each, whose
//    times are exchanged at once: its remaining calls leave out a candidate
//    more than `hopeless` times the fastest (not a class's first round on a
//    side that agrees later: exchanges_later());
//  - then the choice, with a check every `check_every` calls: its last
//    `check_window` calls are timed and agreed the same way. The first
//    check's median is the choice's own (a probe round's times include the
//    switches between candidates); a later median more than `drift` away
//    from it (slower or faster: a link that changed) starts a probe round at
//    the next call;
//  - a probe round again after `first_reprobe` chosen calls, the interval
//    doubling (up to `longest_reprobe`) while the same candidate keeps
//    winning, back to the first when another wins. Such a round leaves out
//    the hopeless candidates (Schedule::hopeless), from agreed medians alone.
//    So does a class's first round, from a prediction: each candidate's
//    line (latency + bytes / rate) through its agreed medians at two other
//    classes of the communicator, or, where it has one agreed time only
//    (a median, or the one call of a pass that cut it), that time scaled
//    by the analytic cost model between the two sizes (predicted(),
//    set_model()), so that a job whose tensors span many sizes probes
//    plain fp32 over a slow link once, not at every size.
// Residuals that keep resetting (a framework's fusion buffer whose make-up
// changes from call to call, Horovod's time-driven fusion): a candidate that
// keeps a residual then feeds back nothing and loses what it drops. The side
// tells record() how many residual resets each call caused on this rank; the
// window's sum goes into the exchange too (the ranks' largest), so every rank
// sees the same count. A window in which at least half the calls reset is
// "resetting": its round's winner is the fastest candidate that keeps no
// residual (when there is one: set_keeps_residual()), and a check of a
// choice that keeps one starts a probe round at the next call. Candidates
// for resetting classes only (set_for_resetting(): a quantizer's unbiased
// twin, which needs no residual) join a class's rounds while its last agreed
// window was resetting (or while one is its choice); a resetting round that
// left such a candidate out is followed at the next call by a round of the
// choice and those candidates alone (the others' medians are known). The
// twins also join a round whose first pass was resetting (at least half
// its calls): its turns after the pass take the twins, leave out the
// candidates that keep a residual (they cannot win it; their pass call is
// kept as a cut one), and the round is resetting whatever its later calls
// count (its calls after the pass were chosen for a resetting class).
// A side may agree later than the window's last call (NCCL reads its times
// from CUDA events a few calls on, core/nccl/auto_timing.h): until agreed(),
// the class's calls are untimed, take the class's choice (or the first
// candidate before any round was agreed) and advance no step, so every rank
// that agrees at the same call stays at the same step.
// Pure logic: the side times the calls and runs the exchange.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace slimreduce {

// What one call of a size class does under the schedule.
struct AutoStep {
  std::uint32_t size_class = 0;
  int candidate = 0;         // index into the candidates
  bool timed = false;        // the side records its time (record())
  bool agree_after = false;  // after it, the side exchanges window() and calls agreed()
  bool probe = false;        // part of a probe round (the timeline marks it)
  bool awaiting = false;     // the class awaits an agreement: an untimed call of its choice
  // agree_after closes a round's first pass (one call of each candidate),
  // whose exchange may cut the rest of the round (Schedule::cut_after_first_pass).
  bool first_pass = false;
};

class AutoChooser {
 public:
  struct Schedule {
    int probes = 3;
    std::uint64_t check_every = 32;
    std::uint64_t check_window = 8;
    std::uint64_t first_reprobe = 256;
    std::uint64_t longest_reprobe = 8192;
    double drift = 0.25;
    // A later round leaves out the candidates whose last agreed median was
    // more than `hopeless` times the choice's (they cost the most to probe:
    // plain fp32 over a slow link), except every `full_round_every`-th round
    // and a round a drifted check started (the link changed), which probe all.
    double hopeless = 3.0;
    std::uint64_t full_round_every = 4;
    // A class's first round leaves out the candidates that predicted() puts
    // more than `hopeless` times the best prediction (from the
    // communicator's classes agreed before it); false: it probes every one.
    bool predict_first_round = true;
    // A round that takes every candidate it may (a class's first, a full
    // round, one a drift started) exchanges after its first pass, one call
    // of each, and its remaining calls leave out the candidates whose pass
    // took more than `hopeless` times the pass's fastest: over a slow link
    // plain fp32 is then sent once in such a round, not `probes` times. A
    // candidate so cut has no median (one call is none): the class's next
    // round takes it again, with a pass, unless a prediction leaves it out
    // (predicted()). Not a class's first round on a communicator whose
    // exchanges land later (exchanges_later()). false: every round probes
    // each of its candidates `probes` times (tests).
    bool cut_after_first_pass = true;
  };
  // What a size class did, for the log and the report.
  struct ClassSummary {
    int chosen = -1;              // -1: no probe round agreed yet
    std::vector<double> medians;  // each candidate's agreed median (seconds) at the last round
    // Each candidate cut after one call by a round's first pass: that call's
    // agreed time (seconds; 0: none, or a median since). Not a median: the
    // report lists it apart, and predicted() may scale it at other classes.
    std::vector<double> cut;
    // Each candidate the last agreed round left out by a prediction alone (no
    // median of its own at this class): that prediction, seconds (0: none).
    std::vector<double> predicted_out;
    std::uint64_t probe_rounds = 0;
    std::uint64_t switches = 0;  // agreed rounds whose winner differed from the one before
    std::uint64_t calls = 0;
    bool resetting = false;          // the last agreed window's residuals kept resetting
    std::uint64_t reset_rounds = 0;  // rounds won without the candidates that keep a residual
  };

  AutoChooser(int candidates, Schedule schedule);
  AutoChooser(int candidates) : AutoChooser(candidates, Schedule{}) {}

  // floor(log2(bytes)), 0 for 0 or 1 byte.
  static std::uint32_t size_class(std::uint64_t bytes);

  // The next call of (comm_id, size class of `bytes`): advances the schedule.
  // `available`: which candidates the communicator can run (empty: all); a
  // round takes only those, as they stand at its first call. The first
  // candidate must be available.
  // `ranks`: the communicator's (the model's shape depends on it; 0: not known).
  AutoStep next(std::uint64_t comm_id, std::uint64_t bytes, std::vector<bool> available = {},
                int ranks = 0);
  // The candidate a call that is not timed takes (queued calls, whose flush
  // is not a point the schedule counts): the class's choice, or the first
  // candidate before any round was agreed. Advances nothing.
  int current(std::uint64_t comm_id, std::uint64_t bytes) const;
  // Which candidates keep a residual (their calls feed back error); none by default.
  void set_keeps_residual(std::vector<bool> keeps) { keeps_residual_ = std::move(keeps); }
  // Which candidates only classes whose residuals keep resetting probe; none by default.
  void set_for_resetting(std::vector<bool> only) { for_resetting_ = std::move(only); }
  // The analytic cost model (core/runtime/cost_model.h) as the side gives
  // it: candidate c's seconds for a call of `bytes` over `ranks` ranks at a
  // nominal link, 0 where it has none. Arithmetic of sizes, the same on
  // every rank; predicted() takes only its ratio between two sizes, scaled
  // by a time the ranks agreed. None by default.
  using Model = std::function<double(int candidate, std::uint64_t bytes, int ranks)>;
  void set_model(Model model) { model_ = std::move(model); }
  // The communicator's side agrees a window a call or more after its last
  // call (NCCL's): a class's first round opens with no first pass. Its calls
  // before the pass's agreement would run, with no choice yet, the first
  // candidate: in a first round over a slow link plain fp32, the very
  // candidate the pass would cut, so there the pass would save nothing. A
  // later round's calls in between take the class's choice.
  void exchanges_later(std::uint64_t comm_id) { later_.insert(comm_id); }
  // After each call of the schedule: its time (kept where next() said to
  // time it) and the residual resets it caused on this rank. An awaiting
  // call counts in no window.
  void record(const AutoStep& step, std::uint64_t comm_id, double seconds,
              std::uint64_t resets = 0);
  // What to exchange after a call with agree_after: this rank's times, in
  // call order, then its resets since the last exchange.
  std::vector<double> window(const AutoStep& step, std::uint64_t comm_id) const;
  // The exchanged window (each element the ranks' largest, as window() laid
  // it out). Returns true when the class's choice changed.
  bool agreed(const AutoStep& step, std::uint64_t comm_id, std::vector<double> window);

  // Candidate c's predicted seconds for a call of size class `size_class`
  // on comm_id: a line, latency + bytes / rate, through its agreed medians at
  // the two other classes of the communicator nearest this one (a class
  // stands for its least bytes, 2^class). Where fewer than two classes have
  // a median of c: its agreed time at the nearest other class (the median,
  // or else the one call of a first pass that cut it) times the model's
  // ratio between the two sizes (set_model(); the communicator's ranks from
  // next()). 0 (no prediction) where neither gives a positive time. From
  // agreed times alone, the same on every rank; only the communicator's own
  // classes, whose calls every rank makes in one order (another
  // communicator's may agree in another order relative to this one's calls
  // on different ranks).
  double predicted(std::uint64_t comm_id, std::uint32_t size_class, int candidate) const;

  ClassSummary summary(std::uint64_t comm_id, std::uint32_t size_class) const;
  // Every (communicator, class) with a summary, in key order, those of
  // communicators already gone included (the report's choice table: a job
  // may free its communicators before it ends, as Horovod does).
  std::vector<std::pair<std::pair<std::uint64_t, std::uint32_t>, ClassSummary>> summaries() const;
  // The communicator's schedules end; their summaries stay for summaries()
  // (communicator ids are never reused).
  void forget_communicator(std::uint64_t comm_id);
  int candidates() const { return candidates_; }

 private:
  struct ClassState {
    bool probing = true;
    std::uint64_t step = 0;           // calls into the round, or into the choice
    std::uint64_t reprobe_after = 0;  // chosen calls before the next round
    double chosen_median = 0;         // the choice's median at its first check (0: none yet)
    bool drifted = false;             // the round was started by a drifted check
    bool twins_next = false;          // the next round: the choice and the twins left out
    bool awaiting = false;            // the window ended; agreed() not called yet
    std::vector<int> round;           // the candidates of the current probe round
    std::uint64_t pass_calls = 0;     // its first pass's calls (0: the round is not cut)
    std::vector<double> pass;         // the first pass's agreed times, in round order
    bool pass_resetting = false;      // the first pass was resetting: so is the round
    std::vector<double> left_out;     // the round's ClassSummary::predicted_out, from its start
    std::vector<int> calls;           // the candidates of its calls after the pass, in order
    std::vector<bool> available;      // next()'s, from the class's last call (empty: all)
    std::vector<double> times;        // this rank's timed calls since the last exchange
    std::uint64_t calls_since = 0;    // calls since the last exchange
    std::uint64_t resets_since = 0;   // this rank's residual resets in them
    ClassSummary summary;
  };
  using Key = std::pair<std::uint64_t, std::uint32_t>;

  AutoStep probe_step(ClassState& state, const Key& key) const;
  double modelled(std::uint64_t comm_id, std::uint32_t size_class, int candidate) const;
  AutoStep chosen_step(ClassState& state, std::uint32_t size_class) const;
  AutoStep awaiting_step(const ClassState& state, std::uint32_t size_class) const;
  void start_round(ClassState& state, const Key& key) const;
  // The candidates of a round starting now; *open: it may take every one.
  std::vector<int> round_candidates(const ClassState& state, const Key& key, bool* open) const;
  std::vector<int> first_round(const ClassState& state, const Key& key) const;
  std::vector<int> twins_round(const ClassState& state) const;
  bool available(const ClassState& state, int candidate) const {
    return static_cast<std::size_t>(candidate) >= state.available.size() ||
           state.available[candidate];
  }
  void agree_pass(ClassState& state, const std::vector<double>& times, bool resetting) const;
  bool agree_round(ClassState& state, const std::vector<double>& times, bool resetting) const;
  bool left_out_for_resetting(const ClassState& state) const;
  void agree_check(ClassState& state, const std::vector<double>& times, bool resetting) const;
  bool keeps_residual(int candidate) const {
    return static_cast<std::size_t>(candidate) < keeps_residual_.size() &&
           keeps_residual_[candidate];
  }
  bool for_resetting(int candidate) const {
    return static_cast<std::size_t>(candidate) < for_resetting_.size() && for_resetting_[candidate];
  }
  // Whether a round of this class may take the candidate (available, and a
  // candidate for resetting classes only while the class resets or has it chosen).
  bool may_probe(const ClassState& state, int candidate) const {
    return available(state, candidate) && (!for_resetting(candidate) || state.summary.resetting ||
                                           state.summary.chosen == candidate);
  }

  int candidates_;
  Schedule schedule_;
  std::vector<bool> keeps_residual_;
  std::vector<bool> for_resetting_;
  std::map<Key, ClassState> classes_;
  std::map<Key, ClassSummary> gone_;  // of forgotten communicators
  std::set<std::uint64_t> later_;     // communicators whose exchanges land later
  Model model_;
  std::map<std::uint64_t, int> ranks_;  // each communicator's, from next()
};

// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double median_of(std::vector<double> values);

}  // namespace slimreduce
