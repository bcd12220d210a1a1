#include "core/runtime/adaptive_levels.h"

#include <bit>
#include <cmath>
#include <limits>

namespace slimreduce {
namespace {

// The report's class of a shape: floor(log2) of its fp32 bytes (0 for none).
std::pair<std::uint64_t, std::uint32_t> class_of(const CallShape& shape) {
  const std::uint64_t bytes = shape.count * sizeof(float);
  const auto size_class = bytes == 0 ? 0u : static_cast<std::uint32_t>(std::bit_width(bytes) - 1);
  return {shape.comm_id, size_class};
}

}  // namespace

double relative_change(double now, double before) {
  if (before == 0.0) return now == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::fabs(now - before) / std::fabs(before);
}

int LevelSchedule::level(const CallShape& shape) const {
  const auto found = shapes_.find(shape);
  return found == shapes_.end() ? kGentle : found->second.level;
}

bool LevelSchedule::record(const CallShape& shape, int level, double norm) {
  ShapeState& state = shapes_[shape];
  ClassSummary& summary = classes_[class_of(shape)];
  summary.calls[level == kHard ? kHard : kGentle] += 1;
  if (state.in_window == 0) state.window_level = level;
  state.mixed = state.mixed || level != state.window_level;
  state.norm_sum += norm;
  if (++state.in_window < rule_.window) return false;
  const std::optional<bool> critical = judge(state);
  state.in_window = 0;
  state.norm_sum = 0.0;
  state.mixed = false;
  if (!critical) return false;
  summary.windows += 1;
  summary.critical += *critical ? 1 : 0;
  const int next = *critical ? kGentle : kHard;
  if (next == state.level) return false;
  state.level = next;
  summary.switches += 1;
  return true;
}

std::optional<bool> LevelSchedule::judge(ShapeState& state) const {
  if (state.mixed) return std::nullopt;
  const double mean = state.norm_sum / static_cast<double>(state.in_window);
  if (!std::isfinite(mean)) return true;
  std::optional<double>& before = state.last[state.window_level];
  const bool critical =
      before ? relative_change(mean, *before) > rule_.threshold : state.window_level == kGentle;
  before = mean;
  return critical;
}

void LevelSchedule::forget_communicator(std::uint64_t comm_id) {
  std::erase_if(shapes_, [comm_id](const auto& entry) { return entry.first.comm_id == comm_id; });
}

std::vector<std::pair<std::pair<std::uint64_t, std::uint32_t>, LevelSchedule::ClassSummary>>
LevelSchedule::summaries() const {
  return {classes_.begin(), classes_.end()};
}

}  // namespace slimreduce
