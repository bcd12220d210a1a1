// Group deferral: eligible calls inside ncclGroupStart/End are held, and
// nothing of them is enqueued before the outermost end; there the order is
// compress, collectives, real end, finish. Driven with a recording fake, so
// no GPU and no NCCL are needed.
#include <gtest/gtest.h>

#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "scheduler/group_deferral.h"

namespace slimreduce {
namespace {

class Recorder : public PlanActions {
 public:
  int real_group_start() override { return note("start", start_rc); }
  int real_group_end() override { return note("end", end_rc); }
  int pass_through(const Reduction& call) override { return note("pass:" + name(call), 0); }
  void count_pass_through(const Reduction& call) override {
    if (!counted.empty()) counted += ' ';
    counted += name(call);
  }
  int real_group_simulate_end(void*) override { return note("simulate", simulate_rc); }
  int plan(std::vector<Reduction>& held) override {
    note("plan" + names(held), 0);
    if (throw_in_plan) throw std::bad_alloc();
    return plan_rc;
  }
  bool runs_whole() const override { return whole; }
  int run_whole(std::vector<Reduction>& held) override { return note("whole" + names(held), 0); }
  int begin(std::vector<Reduction>& held) override {
    note("begin" + names(held), 0);
    return begin_rc;
  }
  int issue(std::vector<Reduction>& held) override {
    note("issue" + names(held), 0);
    if (throw_in_issue) throw std::runtime_error("issue");
    return 0;
  }
  int wait_ready(std::vector<Reduction>& held) override { return note("wait" + names(held), 0); }
  int finish(std::vector<Reduction>& held) override { return note("finish" + names(held), 0); }

  std::string log() const {
    std::string out;
    for (const std::string& entry : entries) out += (out.empty() ? "" : " ") + entry;
    return out;
  }

  int start_rc = kNcclSuccess;
  int end_rc = kNcclSuccess;
  int plan_rc = kNcclSuccess;
  int begin_rc = kNcclSuccess;
  int simulate_rc = kNcclSuccess;
  bool throw_in_plan = false;
  bool throw_in_issue = false;
  bool whole = false;  // plan() made it run whole (pipelined)
  std::vector<std::string> entries;
  std::string counted;  // the calls counted as passed through, in order

 private:
  int note(const std::string& what, int rc) {
    entries.push_back(what);
    return rc;
  }
  static std::string name(const Reduction& call) { return std::to_string(call.count); }
  static std::string names(const std::vector<Reduction>& calls) {
    std::string out;
    for (const Reduction& call : calls) out.append(":").append(name(call));
    return out;
  }
};

Reduction call(std::uint64_t id) {
  Reduction c;
  c.count = id;  // the count names the call in the log
  c.verdict.path = ReductionPath::cast;
  return c;
}

TEST(GroupDeferral, ACallOutsideAGroupRunsAsAGroupOfOne) {
  GroupDeferral group;
  Recorder actions;
  EXPECT_EQ(group.eligible(call(1), actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "plan:1 start begin:1 issue:1 end finish:1");
  EXPECT_FALSE(group.in_group());
}

// Outside a group a call is planned before its real group opens: none is
// opened for a call that fails to plan, or one planned to run whole
// (pipelined, each piece's collectives in a group of their own); a failed
// real start enqueues nothing.
TEST(GroupDeferral, ACallOutsideAGroupOpensARealGroupOnceItIsPlanned) {
  GroupDeferral group;
  Recorder actions;
  actions.plan_rc = 1;  // ncclUnhandledCudaError
  EXPECT_EQ(group.eligible(call(1), actions), 1);
  EXPECT_EQ(actions.log(), "plan:1");
  actions = Recorder();
  actions.whole = true;
  EXPECT_EQ(group.eligible(call(2), actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "plan:2 whole:2");
  actions = Recorder();
  actions.start_rc = 5;  // ncclInvalidUsage
  EXPECT_EQ(group.eligible(call(3), actions), 5);
  EXPECT_EQ(actions.log(), "plan:3 start");
  actions = Recorder();
  actions.throw_in_plan = true;
  EXPECT_EQ(group.eligible(call(4), actions), kNcclSystemError);
  EXPECT_EQ(actions.log(), "plan:4");
  EXPECT_FALSE(group.in_group());
}

TEST(GroupDeferral, PassThroughOutsideAGroupIsForwardedAlone) {
  GroupDeferral group;
  Recorder actions;
  EXPECT_EQ(group.pass_through(call(7), false, actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "pass:7");
}

TEST(GroupDeferral, NothingIsEnqueuedBeforeTheOutermostEnd) {
  GroupDeferral group;
  Recorder actions;
  group.start(actions);
  group.eligible(call(1), actions);
  group.start(actions);
  group.eligible(call(2), actions);
  group.pass_through(call(3), true, actions);  // a pass-through goes into the real group now
  EXPECT_EQ(group.end(actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "start start pass:3 end");  // the inner end only forwards
  EXPECT_TRUE(group.in_group());
  actions.entries.clear();
  EXPECT_EQ(group.end(actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "plan:1:2 begin:1:2 issue:1:2 end finish:1:2");
  EXPECT_FALSE(group.in_group());
}

TEST(GroupDeferral, AnEmptyGroupOnlyForwards) {
  GroupDeferral group;
  Recorder actions;
  group.start(actions);
  group.end(actions);
  EXPECT_EQ(actions.log(), "start end");
}

TEST(GroupDeferral, ANonBlockingCommunicatorInTheGroupPassesEverythingThrough) {
  GroupDeferral group;
  Recorder actions;
  group.start(actions);
  group.eligible(call(1), actions);
  group.pass_through(call(2), false, actions);
  group.eligible(call(3), actions);
  group.end(actions);
  EXPECT_EQ(actions.log(), "start pass:2 pass:1 pass:3 end");
  // The next group starts clean.
  actions.entries.clear();
  group.start(actions);
  group.eligible(call(4), actions);
  group.end(actions);
  EXPECT_EQ(actions.log(), "start plan:4 begin:4 issue:4 end finish:4");
}

TEST(GroupDeferral, AFailedBeginStillClosesTheRealGroupAndFinishesNothing) {
  GroupDeferral group;
  Recorder actions;
  actions.begin_rc = 1;  // ncclUnhandledCudaError
  group.start(actions);
  group.eligible(call(1), actions);
  EXPECT_EQ(group.end(actions), 1);
  EXPECT_EQ(actions.log(), "start plan:1 begin:1 end");
  EXPECT_FALSE(group.in_group());
}

TEST(GroupDeferral, AFailedRealEndIsReturnedAndFinishesNothing) {
  GroupDeferral group;
  Recorder actions;
  actions.end_rc = 6;  // ncclRemoteError
  EXPECT_EQ(group.eligible(call(1), actions), 6);
  EXPECT_EQ(actions.log(), "plan:1 start begin:1 issue:1 end");
}

// The caller's own call on a non-blocking communicator in the group can make
// the end return early: we wait for ours before finishing, and ncclInProgress
// still reaches the caller, who must poll its communicators.
TEST(GroupDeferral, AnEndInProgressWaitsBeforeFinishingAndSaysSo) {
  GroupDeferral group;
  Recorder actions;
  actions.end_rc = kNcclInProgress;
  EXPECT_EQ(group.eligible(call(1), actions), kNcclInProgress);
  EXPECT_EQ(actions.log(), "plan:1 start begin:1 issue:1 end wait:1 finish:1");
}

TEST(GroupDeferral, AFailedStartLeavesTheDepthAlone) {
  GroupDeferral group;
  Recorder actions;
  actions.start_rc = 5;  // ncclInvalidUsage
  EXPECT_EQ(group.start(actions), 5);
  EXPECT_FALSE(group.in_group());
  EXPECT_EQ(group.eligible(call(1), actions), 5);  // its own group could not open
  EXPECT_EQ(actions.log(), "start plan:1 start");
}

TEST(GroupDeferral, AnUnbalancedEndIsAnsweredByTheRealLibrary) {
  GroupDeferral group;
  Recorder actions;
  actions.end_rc = 5;
  EXPECT_EQ(group.end(actions), 5);
  EXPECT_EQ(group.depth(), 0);
}

TEST(GroupDeferral, HeldCallsKeepTheirOrder) {
  GroupDeferral group;
  Recorder actions;
  group.start(actions);
  for (std::uint64_t id = 10; id > 0; --id) group.eligible(call(id), actions);
  group.end(actions);
  EXPECT_EQ(actions.entries[1], "plan:10:9:8:7:6:5:4:3:2:1");
}

TEST(GroupDeferral, EachThreadHasItsOwnGroup) {
  // As NCCL keeps its group depth per thread, the engine keeps one GroupDeferral per thread.
  thread_local GroupDeferral group;
  Recorder main_actions;
  group.start(main_actions);
  bool other_in_group = true;
  std::thread([&] { other_in_group = group.in_group(); }).join();
  EXPECT_FALSE(other_in_group);
  EXPECT_TRUE(group.in_group());
  group.end(main_actions);
}

TEST(GroupDeferral, AnExceptionInPlanningClosesTheRealGroup) {
  // Left open, NCCL would hold every later call of the thread for an end.
  GroupDeferral group;
  Recorder actions;
  actions.throw_in_plan = true;
  group.start(actions);
  group.eligible(call(1), actions);
  EXPECT_EQ(group.end(actions), kNcclSystemError);
  EXPECT_EQ(actions.log(), "start plan:1 end");
  EXPECT_FALSE(group.in_group());
  actions.throw_in_plan = false;
  actions.entries.clear();
  EXPECT_EQ(group.eligible(call(2), actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "plan:2 start begin:2 issue:2 end finish:2");
}

TEST(GroupDeferral, AnExceptionOutsideAGroupClosesItsGroupOfOne) {
  GroupDeferral group;
  Recorder actions;
  actions.throw_in_issue = true;
  EXPECT_EQ(group.eligible(call(1), actions), kNcclInternalError);
  EXPECT_EQ(actions.log(), "plan:1 start begin:1 issue:1 end");
}

TEST(GroupDeferral, ASimulatedEndHandsTheHeldCallsToNcclUnchanged) {
  GroupDeferral group;
  Recorder actions;
  group.start(actions);
  group.eligible(call(1), actions);
  group.start(actions);
  group.eligible(call(2), actions);
  EXPECT_EQ(group.simulate_end(nullptr, actions), kNcclSuccess);  // inner: NCCL's depth only
  EXPECT_EQ(group.depth(), 1);
  EXPECT_EQ(group.simulate_end(nullptr, actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "start start simulate pass:1 pass:2 simulate");
  EXPECT_FALSE(group.in_group());
  // Nothing is left held: the next call runs at once.
  actions.entries.clear();
  group.eligible(call(3), actions);
  EXPECT_EQ(actions.log(), "plan:3 start begin:3 issue:3 end finish:3");
}

TEST(GroupDeferral, ASimulatedEndClearsTheTaint) {
  GroupDeferral group;
  Recorder actions;
  group.start(actions);
  group.pass_through(call(1), false, actions);
  group.simulate_end(nullptr, actions);
  actions.entries.clear();
  group.start(actions);
  group.eligible(call(2), actions);
  group.end(actions);
  EXPECT_EQ(actions.log(), "start plan:2 begin:2 issue:2 end finish:2");
}

TEST(GroupDeferral, AnUnbalancedSimulatedEndIsAnsweredByTheRealLibrary) {
  GroupDeferral group;
  Recorder actions;
  actions.simulate_rc = 5;  // ncclInvalidUsage
  EXPECT_EQ(group.simulate_end(nullptr, actions), 5);
  EXPECT_EQ(actions.log(), "simulate");
  EXPECT_EQ(group.depth(), 0);
}

// A pass-through call is counted when it has run: at once outside a group, at
// the outermost real end inside one. A simulated group runs nothing and
// counts nothing; a whole_group_passes group counts its held calls as they pass through.
TEST(GroupDeferral, PassThroughCallsAreCountedWhenTheyRun) {
  GroupDeferral group;
  Recorder actions;
  group.pass_through(call(1), true, actions);
  EXPECT_EQ(actions.counted, "1");
  group.start(actions);
  group.start(actions);
  group.pass_through(call(2), true, actions);
  group.end(actions);  // inner
  EXPECT_EQ(actions.counted, "1");
  group.end(actions);
  EXPECT_EQ(actions.counted, "1 2");
}

TEST(GroupDeferral, ASimulatedGroupCountsNothing) {
  GroupDeferral group;
  Recorder actions;
  group.start(actions);
  group.pass_through(call(1), true, actions);
  group.eligible(call(2), actions);
  EXPECT_EQ(group.simulate_end(nullptr, actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "start pass:1 pass:2 simulate");
  EXPECT_EQ(actions.counted, "");
  group.start(actions);  // the next group starts clean
  group.end(actions);
  EXPECT_EQ(actions.counted, "");
}

TEST(GroupDeferral, ATaintedGroupCountsItsHeldCallsAsTheyPassThrough) {
  GroupDeferral group;
  Recorder actions;
  group.start(actions);
  group.eligible(call(1), actions);
  group.pass_through(call(2), false, actions);  // a non-blocking communicator
  EXPECT_EQ(group.end(actions), kNcclSuccess);
  EXPECT_EQ(actions.log(), "start pass:2 pass:1 end");
  EXPECT_EQ(actions.counted, "1 2");  // held ones as they pass, the rest after the end
}

}  // namespace
}  // namespace slimreduce
