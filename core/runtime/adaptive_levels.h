// SLIMREDUCE_ADAPTIVE=accordion: how hard a compressor with two levels
// (SLIMREDUCE_TOPK_RATIO=0.01,0.001; SLIMREDUCE_POWERSGD_RANK=4,1) sends
// each call (docs/architecture.md, "Adaptive levels"; after Accordion,
// Agarwal et al., MLSys 2021: gradients change fastest in short critical
// regimes, early in training and after a learning-rate drop, and compressing
// gently only there keeps the accuracy of gentle compression at close to the
// bytes of hard compression).
//
// Per shape (communicator, count, datatype: as every rank sees the call,
// never a buffer address), over windows of `window` reduced calls:
//  - each call's signal is the norm of its reduced result
//    (kernels/fixed_order_norm: the same bits on every rank, which all hold
//    the same reduced bits), so every rank decides alike with no message;
//  - a window's signal is the mean of its calls' norms; it is compared with
//    the last window sent at the same level (a hard level's reduced norm
//    differs from a gentle one's, so a change of level cannot trigger
//    itself): a relative change above `threshold` makes the window critical;
//  - the next window is sent gentle after a critical window, hard after a
//    quiet one. The first window is critical (nothing to compare with yet),
//    so the first two windows go gentle and no warm-up length is guessed; a
//    hard window with no hard window before it sets the reference and stays
//    hard. A window with a norm that is not finite is critical (and no
//    reference); a window whose calls were sent at both levels (queued
//    calls decided before a switch and reduced after it) is not judged.
// Pure logic under the runtime's lock: the sides compute the norms.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/runtime/call_shape.h"

namespace slimreduce {

class LevelSchedule {
 public:
  static constexpr int kGentle = 0;
  static constexpr int kHard = 1;
  static constexpr int kLevels = 2;

  struct Rule {
    std::uint64_t window = 0;  // reduced calls per window, >= 1
    double threshold = 0.5;    // relative change of the window's norm, >= 0
  };
  // What a size class of a communicator did, for the report.
  struct ClassSummary {
    std::uint64_t calls[kLevels] = {0, 0};  // reduced calls sent at each level
    std::uint64_t windows = 0;              // windows closed
    std::uint64_t critical = 0;             // of them, critical
    std::uint64_t switches = 0;             // level changes
  };

  explicit LevelSchedule(Rule rule) : rule_(rule) {}
  static const char* name(int level) { return level == kHard ? "hard" : "gentle"; }

  // The level the next call of `shape` is sent at (gentle for a new shape).
  int level(const CallShape& shape) const;
  // A call of `shape` sent at `level` was reduced; `norm`: its result's
  // (fixed_order_norm). Returns true when it closed a window that changed
  // the shape's level.
  bool record(const CallShape& shape, int level, double norm);
  void forget_communicator(std::uint64_t comm_id);

  // Every (communicator, size class: floor(log2 bytes)) with reduced calls, in key order.
  std::vector<std::pair<std::pair<std::uint64_t, std::uint32_t>, ClassSummary>> summaries() const;
  const Rule& rule() const { return rule_; }

 private:
  struct ShapeState {
    int level = kGentle;                  // of the calls decided from now on
    std::uint64_t in_window = 0;          // reduced calls of the open window
    double norm_sum = 0.0;                // their norms
    int window_level = -1;                // the level of the open window's first call
    bool mixed = false;                   // a call of the open window was sent at another level
    std::optional<double> last[kLevels];  // the last judged window's mean norm at each level
  };
  // Closes the shape's window: whether it was critical, or nothing (not judged).
  std::optional<bool> judge(ShapeState& state) const;

  Rule rule_;
  std::map<CallShape, ShapeState> shapes_;
  std::map<std::pair<std::uint64_t, std::uint32_t>, ClassSummary> classes_;
};

// |now - before| / before; 0 when both are 0, infinity when only before is.
double relative_change(double now, double before);

}  // namespace slimreduce
