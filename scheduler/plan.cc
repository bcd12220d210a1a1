#include "scheduler/plan.h"

#include <chrono>

namespace slimreduce::scheduler {

double Plan::wire_sent() const {
  double sent = 0;
  for (const auto& step : steps_) sent += step->wire_sent();
  return sent;
}

std::size_t Plan::overflow_rescued() const {
  std::size_t rescued = 0;
  for (const auto& step : steps_) rescued += step->overflow_rescued();
  return rescued;
}

Status run_phase(const Plan& plan, Phase phase) {
  for (std::size_t i = 0; i < plan.size(); ++i) {
    Step& step = plan.step(i);
    switch (phase) {
      case Phase::compress:
        SLIMREDUCE_TRY(step.compress());
        break;
      case Phase::communicate:
        SLIMREDUCE_TRY(step.communicate());
        break;
      case Phase::finish:
        SLIMREDUCE_TRY(step.finish());
        break;
    }
  }
  return {};
}

double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

Status run_one(const Plan& plan, std::size_t index, Phase phase, PhaseObserver* observer,
               int lane) {
  Step& step = plan.step(index);
  const double begin = observer ? now_us() : 0.0;
  Status status;
  switch (phase) {
    case Phase::compress:
      status = step.compress();
      break;
    case Phase::communicate:
      status = step.communicate();
      break;
    case Phase::finish:
      status = step.finish();
      break;
  }
  if (observer) observer->phase_ran({phase, index, plan.size(), lane, begin, now_us()});
  return status;
}

Status run_blocking(const Plan& plan, PhaseObserver* observer) {
  for (std::size_t i = 0; i < plan.size(); ++i) {
    for (Phase phase : {Phase::compress, Phase::communicate, Phase::finish}) {
      SLIMREDUCE_TRY(run_one(plan, i, phase, observer, 0));
    }
  }
  return {};
}

Status run_blocking(const Plan& plan) { return run_blocking(plan, nullptr); }

}  // namespace slimreduce::scheduler
