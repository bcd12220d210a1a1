#include "scheduler/plan.h"

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

Status run_blocking(const Plan& plan) {
  for (std::size_t i = 0; i < plan.size(); ++i) {
    Step& step = plan.step(i);
    SLIMREDUCE_TRY(step.compress());
    SLIMREDUCE_TRY(step.communicate());
    SLIMREDUCE_TRY(step.finish());
  }
  return {};
}

}  // namespace slimreduce::scheduler
