#include "scheduler/stream_pipeline.h"

namespace slimreduce::scheduler {
namespace {

Status enqueue(const Plan& plan, std::size_t step, Phase phase, StreamHandoff& handoff) {
  handoff.mark(step, phase, false);
  Step& s = plan.step(step);
  const Status status = phase == Phase::compress      ? s.compress()
                        : phase == Phase::communicate ? s.communicate()
                                                      : s.finish();
  handoff.mark(step, phase, true);
  return status;
}

// Step i + 1's compress on the side stream, then its mark.
Status compress_next(const Plan& plan, std::size_t next, StreamHandoff& handoff) {
  if (next >= plan.size()) return {};
  SLIMREDUCE_TRY(enqueue(plan, next, Phase::compress, handoff));
  return handoff.compressed();
}

// Step i's collectives in a launch of their own, the real group closed
// whatever happened inside it.
Status communicate(const Plan& plan, std::size_t step, StreamHandoff& handoff) {
  SLIMREDUCE_TRY(handoff.open_collectives());
  const Status sent = enqueue(plan, step, Phase::communicate, handoff);
  const Status closed = handoff.close_collectives();
  return sent.ok() ? closed : sent;
}

Status run_steps(const Plan& plan, StreamHandoff& handoff) {
  SLIMREDUCE_TRY(handoff.fork());
  SLIMREDUCE_TRY(compress_next(plan, 0, handoff));
  SLIMREDUCE_TRY(handoff.wait_compressed());
  for (std::size_t i = 0; i < plan.size(); ++i) {
    // Enqueued before step i's finish: the side stream compresses step
    // i + 1 while step i is on the wire, not after step i's decode.
    SLIMREDUCE_TRY(compress_next(plan, i + 1, handoff));
    SLIMREDUCE_TRY(communicate(plan, i, handoff));
    SLIMREDUCE_TRY(handoff.communicated());
    SLIMREDUCE_TRY(enqueue(plan, i, Phase::finish, handoff));
    // The last mark is step i + 1's compress: nothing marked the side stream since.
    if (i + 1 < plan.size()) SLIMREDUCE_TRY(handoff.wait_compressed());
  }
  return {};
}

}  // namespace

Status run_on_two_streams(const Plan& plan, StreamHandoff& handoff) {
  if (plan.size() == 0) return {};
  const Status ran = run_steps(plan, handoff);
  const Status joined = handoff.join();
  return ran.ok() ? joined : ran;
}

}  // namespace slimreduce::scheduler
