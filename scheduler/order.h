// The order in which a flush reduces the calls it took (ByteScheduler's
// rule, docs/architecture.md "Fusion"): by explicit priority, higher first
// (the native API's); among equal priorities, in call order, or reversed: in
// backprop the last gradients handed over are the first layers', which the
// next forward pass needs first. It reads the priorities and the call order
// alone, so every rank orders its flush alike.
#pragma once

#include <cstddef>
#include <vector>

namespace slimreduce::scheduler {

enum class CallOrder { fifo, reverse };

// The calls' indices (0 .. priorities.size() - 1) in the order to reduce them.
std::vector<std::size_t> flush_order(const std::vector<int>& priorities, CallOrder order);

}  // namespace slimreduce::scheduler
