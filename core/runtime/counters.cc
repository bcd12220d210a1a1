#include "core/runtime/counters.h"

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <type_traits>
#include <utility>

#include "core/runtime/report_sections.h"

namespace slimreduce {

void Counters::count_pass_through(std::uint64_t bytes, int ranks) {
  ++intercepted;
  ++passed_through;
  input_bytes += bytes;
  const double wire = ring_allreduce_wire_bytes(bytes, ranks);
  wire_baseline += wire;
  wire_sent += wire;
}

void Counters::count_compressed(std::uint64_t bytes, int ranks, double wire_sent_bytes) {
  ++intercepted;
  ++compressed;
  input_bytes += bytes;
  wire_baseline += ring_allreduce_wire_bytes(bytes, ranks);
  wire_sent += wire_sent_bytes;
}

void Counters::count_by_node(double baseline, double sent, bool hop_crosses) {
  (hop_crosses ? inter_node_baseline : intra_node_baseline) += baseline;
  (hop_crosses ? inter_node_sent : intra_node_sent) += sent;
}

void Counters::count_hierarchical_by_node(double intra_sent, bool hop_crosses) {
  count_by_node(wire_baseline, 0, hop_crosses);
  inter_node_sent += wire_sent - intra_sent;
  intra_node_sent += intra_sent;
}

void Counters::count_topk(bool sharded, double sent) {
  ++(sharded ? topk_sharded : topk_gathered);
  (sharded ? topk_sharded_sent : topk_gathered_sent) += sent;
}

double Counters::savings() const {
  return wire_baseline > 0 ? 1.0 - wire_sent / wire_baseline : 0.0;
}

Counters& Counters::operator+=(const Counters& other) {
  intercepted += other.intercepted;
  compressed += other.compressed;
  passed_through += other.passed_through;
  warmup += other.warmup;
  ef_cap_fallback += other.ef_cap_fallback;
  input_bytes += other.input_bytes;
  wire_baseline += other.wire_baseline;
  wire_sent += other.wire_sent;
  ef_resets += other.ef_resets;
  ef_evicted += other.ef_evicted;
  overflow_rescued += other.overflow_rescued;
  iallreduce += other.iallreduce;
  fused_batches += other.fused_batches;
  fused_tensors += other.fused_tensors;
  partitions += other.partitions;
  topk_gathered += other.topk_gathered;
  topk_sharded += other.topk_sharded;
  topk_gathered_sent += other.topk_gathered_sent;
  topk_sharded_sent += other.topk_sharded_sent;
  inter_node_baseline += other.inter_node_baseline;
  inter_node_sent += other.inter_node_sent;
  intra_node_baseline += other.intra_node_baseline;
  intra_node_sent += other.intra_node_sent;
  auto_probe_calls += other.auto_probe_calls;
  auto_switches += other.auto_switches;
  auto_waits += other.auto_waits;
  adaptive_gentle += other.adaptive_gentle;
  adaptive_hard += other.adaptive_hard;
  adaptive_switches += other.adaptive_switches;
  return *this;
}

namespace {

// Every field of a Counters, in the one order to_values and from_values share.
template <class Fields, class Visit>
constexpr void for_each_field(Fields& c, Visit&& visit) {
  for (auto* field :
       {&c.intercepted,     &c.compressed,      &c.passed_through, &c.warmup,
        &c.ef_cap_fallback, &c.input_bytes,     &c.ef_resets,      &c.overflow_rescued,
        &c.iallreduce,      &c.fused_batches,   &c.fused_tensors,  &c.partitions,
        &c.topk_gathered,   &c.topk_sharded,    &c.ef_evicted,     &c.auto_probe_calls,
        &c.auto_switches,   &c.adaptive_gentle, &c.adaptive_hard,  &c.adaptive_switches,
        &c.auto_waits})
    visit(*field);
  for (auto* field :
       {&c.wire_baseline, &c.wire_sent, &c.inter_node_baseline, &c.inter_node_sent,
        &c.intra_node_baseline, &c.intra_node_sent, &c.topk_gathered_sent, &c.topk_sharded_sent})
    visit(*field);
}

constexpr int field_count() {
  Counters c;
  int fields = 0;
  for_each_field(c, [&fields](auto&) { ++fields; });
  return fields;
}
static_assert(field_count() == Counters::kValues, "kValues counts every field");

}  // namespace

void Counters::to_values(double (&v)[kValues]) const {
  int next = 0;
  for_each_field(*this, [&](const auto& field) { v[next++] = static_cast<double>(field); });
}

Counters Counters::from_values(const double (&v)[kValues]) {
  Counters c;
  int next = 0;
  for_each_field(c, [&](auto& field) {
    field = static_cast<std::remove_reference_t<decltype(field)>>(v[next++]);
  });
  return c;
}

namespace {

std::atomic<std::uint64_t> next_board_id{1};

}  // namespace

CounterBoard::CounterBoard() : id_(next_board_id.fetch_add(1)) {}
CounterBoard::~CounterBoard() = default;

// No `intercepted`: it is always compressed + passed_through.
struct CounterBoard::Slot {
  std::atomic<std::uint64_t> compressed{0}, passed_through{0}, warmup{0}, ef_cap_fallback{0},
      input_bytes{0}, ef_resets{0}, overflow_rescued{0}, iallreduce{0}, fused_batches{0},
      fused_tensors{0}, partitions{0}, topk_gathered{0}, topk_sharded{0}, ef_evicted{0},
      auto_probe_calls{0}, auto_switches{0}, adaptive_gentle{0}, adaptive_hard{0},
      adaptive_switches{0}, auto_waits{0};
  std::atomic<double> wire_baseline{0}, wire_sent{0}, topk_gathered_sent{0}, topk_sharded_sent{0};
  std::atomic<double> inter_node_baseline{0}, inter_node_sent{0}, intra_node_baseline{0},
      intra_node_sent{0};
};

namespace {

// Only the slot's own thread writes it: a relaxed load and store is a whole
// update, with no locked instruction.
template <typename T>
void bump(std::atomic<T>& counter, T delta) {
  counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

}  // namespace

CounterBoard::Slot& CounterBoard::my_slot() {
  // initial-exec: the library is preloaded, so its TLS is static and a
  // thread_local costs no __tls_get_addr call.
  static thread_local struct {
    std::uint64_t board = 0;
    Slot* slot = nullptr;
  } cached __attribute__((tls_model("initial-exec")));
  if (cached.board != id_) {
    std::lock_guard lock(mutex_);
    slots_.push_back(std::make_unique<Slot>());
    cached = {id_, slots_.back().get()};
  }
  return *cached.slot;
}

void CounterBoard::add(const Counters& delta) {
  Slot& slot = my_slot();
  bump(slot.compressed, delta.compressed);
  bump(slot.passed_through, delta.passed_through);
  bump(slot.warmup, delta.warmup);
  bump(slot.ef_cap_fallback, delta.ef_cap_fallback);
  bump(slot.input_bytes, delta.input_bytes);
  bump(slot.wire_baseline, delta.wire_baseline);
  bump(slot.wire_sent, delta.wire_sent);
  bump(slot.ef_resets, delta.ef_resets);
  bump(slot.ef_evicted, delta.ef_evicted);
  bump(slot.overflow_rescued, delta.overflow_rescued);
  bump(slot.iallreduce, delta.iallreduce);
  bump(slot.fused_batches, delta.fused_batches);
  bump(slot.fused_tensors, delta.fused_tensors);
  bump(slot.partitions, delta.partitions);
  bump(slot.topk_gathered, delta.topk_gathered);
  bump(slot.topk_sharded, delta.topk_sharded);
  bump(slot.topk_gathered_sent, delta.topk_gathered_sent);
  bump(slot.topk_sharded_sent, delta.topk_sharded_sent);
  bump(slot.inter_node_baseline, delta.inter_node_baseline);
  bump(slot.inter_node_sent, delta.inter_node_sent);
  bump(slot.intra_node_baseline, delta.intra_node_baseline);
  bump(slot.intra_node_sent, delta.intra_node_sent);
  bump(slot.auto_probe_calls, delta.auto_probe_calls);
  bump(slot.auto_switches, delta.auto_switches);
  bump(slot.auto_waits, delta.auto_waits);
  bump(slot.adaptive_gentle, delta.adaptive_gentle);
  bump(slot.adaptive_hard, delta.adaptive_hard);
  bump(slot.adaptive_switches, delta.adaptive_switches);
}

Counters CounterBoard::total() const {
  std::lock_guard lock(mutex_);
  Counters sum;
  for (const auto& slot : slots_) {
    constexpr auto relaxed = std::memory_order_relaxed;
    Counters part;
    part.compressed = slot->compressed.load(relaxed);
    part.passed_through = slot->passed_through.load(relaxed);
    part.intercepted = part.compressed + part.passed_through;
    part.warmup = slot->warmup.load(relaxed);
    part.ef_cap_fallback = slot->ef_cap_fallback.load(relaxed);
    part.input_bytes = slot->input_bytes.load(relaxed);
    part.wire_baseline = slot->wire_baseline.load(relaxed);
    part.wire_sent = slot->wire_sent.load(relaxed);
    part.ef_resets = slot->ef_resets.load(relaxed);
    part.ef_evicted = slot->ef_evicted.load(relaxed);
    part.auto_probe_calls = slot->auto_probe_calls.load(relaxed);
    part.auto_switches = slot->auto_switches.load(relaxed);
    part.auto_waits = slot->auto_waits.load(relaxed);
    part.adaptive_gentle = slot->adaptive_gentle.load(relaxed);
    part.adaptive_hard = slot->adaptive_hard.load(relaxed);
    part.adaptive_switches = slot->adaptive_switches.load(relaxed);
    part.overflow_rescued = slot->overflow_rescued.load(relaxed);
    part.iallreduce = slot->iallreduce.load(relaxed);
    part.fused_batches = slot->fused_batches.load(relaxed);
    part.fused_tensors = slot->fused_tensors.load(relaxed);
    part.partitions = slot->partitions.load(relaxed);
    part.topk_gathered = slot->topk_gathered.load(relaxed);
    part.topk_sharded = slot->topk_sharded.load(relaxed);
    part.topk_gathered_sent = slot->topk_gathered_sent.load(relaxed);
    part.topk_sharded_sent = slot->topk_sharded_sent.load(relaxed);
    part.inter_node_baseline = slot->inter_node_baseline.load(relaxed);
    part.inter_node_sent = slot->inter_node_sent.load(relaxed);
    part.intra_node_baseline = slot->intra_node_baseline.load(relaxed);
    part.intra_node_sent = slot->intra_node_sent.load(relaxed);
    sum += part;
  }
  return sum;
}

namespace {

// The node split's keys, after wire_sent, when the report carries them.
std::string node_keys(const Counters& c, const ReportContext& context) {
  if (!context.node_bytes) return {};
  char text[256];
  std::snprintf(text, sizeof text,
                ", \"inter_node_baseline\": %.0f, \"inter_node_sent\": %.0f"
                ", \"intra_node_baseline\": %.0f, \"intra_node_sent\": %.0f",
                c.inter_node_baseline, c.inter_node_sent, c.intra_node_baseline, c.intra_node_sent);
  return text;
}

}  // namespace

std::string report_json(const Counters& c, const ReportContext& context) {
  char text[1024];
  std::snprintf(
      text, sizeof text,
      "{\"rank\": %d, \"world_size\": %d, \"compressor\": \"%s\",\n"
      " \"calls\": {\"intercepted\": %" PRIu64 ", \"compressed\": %" PRIu64
      ", \"passed_through\": %" PRIu64 ", \"warmup\": %" PRIu64 ", \"ef_cap_fallback\": %" PRIu64
      ", \"ef_resets\": %" PRIu64 ", \"overflow_rescued\": %" PRIu64 ", \"iallreduce\": %" PRIu64
      ", \"fused_batches\": %" PRIu64 ", \"fused_tensors\": %" PRIu64 ", \"partitions\": %" PRIu64
      ", \"topk_gathered\": %" PRIu64 ", \"topk_sharded\": %" PRIu64 ", \"ef_evicted\": %" PRIu64
      "},\n"
      " \"bytes\": {\"input\": %" PRIu64
      ", \"wire_baseline\": %.0f, \"wire_sent\": %.0f%s"
      ", \"topk_gathered_sent\": %.0f, \"topk_sharded_sent\": %.0f},\n"
      " \"savings\": %.6f",
      context.rank, context.world_size, context.compressor.c_str(), c.intercepted, c.compressed,
      c.passed_through, c.warmup, c.ef_cap_fallback, c.ef_resets, c.overflow_rescued, c.iallreduce,
      c.fused_batches, c.fused_tensors, c.partitions, c.topk_gathered, c.topk_sharded, c.ef_evicted,
      c.input_bytes, c.wire_baseline, c.wire_sent, node_keys(c, context).c_str(),
      c.topk_gathered_sent, c.topk_sharded_sent, c.savings());
  return text + auto_json(c, context) + levels_json(c, context) + "}\n";
}

std::optional<double> report_value(const Counters& c, std::string_view key) {
  const std::pair<std::string_view, double> values[] = {
      {"calls.intercepted", double(c.intercepted)},
      {"calls.compressed", double(c.compressed)},
      {"calls.passed_through", double(c.passed_through)},
      {"calls.warmup", double(c.warmup)},
      {"calls.ef_cap_fallback", double(c.ef_cap_fallback)},
      {"calls.ef_resets", double(c.ef_resets)},
      {"calls.overflow_rescued", double(c.overflow_rescued)},
      {"calls.iallreduce", double(c.iallreduce)},
      {"calls.fused_batches", double(c.fused_batches)},
      {"calls.fused_tensors", double(c.fused_tensors)},
      {"calls.partitions", double(c.partitions)},
      {"calls.topk_gathered", double(c.topk_gathered)},
      {"calls.topk_sharded", double(c.topk_sharded)},
      {"calls.ef_evicted", double(c.ef_evicted)},
      {"auto.probe_calls", double(c.auto_probe_calls)},
      {"auto.switches", double(c.auto_switches)},
      {"auto.waits", double(c.auto_waits)},
      {"adaptive.calls_gentle", double(c.adaptive_gentle)},
      {"adaptive.calls_hard", double(c.adaptive_hard)},
      {"adaptive.switches", double(c.adaptive_switches)},
      {"bytes.input", double(c.input_bytes)},
      {"bytes.wire_baseline", c.wire_baseline},
      {"bytes.wire_sent", c.wire_sent},
      {"bytes.inter_node_baseline", c.inter_node_baseline},
      {"bytes.inter_node_sent", c.inter_node_sent},
      {"bytes.intra_node_baseline", c.intra_node_baseline},
      {"bytes.intra_node_sent", c.intra_node_sent},
      {"bytes.topk_gathered_sent", c.topk_gathered_sent},
      {"bytes.topk_sharded_sent", c.topk_sharded_sent},
      {"savings", c.savings()},
  };
  for (const auto& [name, value] : values) {
    if (name == key) return value;
  }
  return std::nullopt;
}

std::string report_table(const Counters& t, const ReportContext& context) {
  constexpr double kMiB = 1024.0 * 1024.0;
  char scope[96];
  if (context.summed_over_ranks) {
    std::snprintf(scope, sizeof scope, "%d ranks (sums over ranks)", context.world_size);
  } else {
    std::snprintf(scope, sizeof scope, "rank %d of %d (this rank alone)", context.rank,
                  context.world_size);
  }
  char text[1024];
  std::snprintf(text, sizeof text,
                "SlimReduce report: compressor %s, %s\n"
                "  calls      intercepted %12" PRIu64 "  compressed %10" PRIu64
                "  passed through %8" PRIu64 " (warm-up %" PRIu64 ")  residual cap reached %" PRIu64
                "\n"
                "  bytes      input %12.1f MiB  wire baseline %12.1f MiB  wire sent %12.1f MiB\n"
                "  savings    %.1f%%\n",
                context.compressor.c_str(), scope, t.intercepted, t.compressed, t.passed_through,
                t.warmup, t.ef_cap_fallback, t.input_bytes / kMiB, t.wire_baseline / kMiB,
                t.wire_sent / kMiB, 100.0 * t.savings());
  std::string table = text;
  if (t.overflow_rescued > 0) {
    std::snprintf(text, sizeof text,
                  "  overflow   %" PRIu64 " fp16 calls rescued with bf16 (a sum beyond 65504)\n",
                  t.overflow_rescued);
    table += text;
  }
  if (t.iallreduce > 0 || t.fused_batches > 0) {
    std::snprintf(text, sizeof text,
                  "  fusion     %" PRIu64 " MPI_Iallreduce calls; %" PRIu64
                  " fused batches carried %" PRIu64 " reductions\n",
                  t.iallreduce, t.fused_batches, t.fused_tensors);
    table += text;
  }
  if (t.partitions > 0) {
    std::snprintf(text, sizeof text,
                  "  partitions %" PRIu64
                  " pieces of calls larger than SLIMREDUCE_PARTITION_BYTES\n",
                  t.partitions);
    table += text;
  }
  if (t.topk_gathered > 0 || t.topk_sharded > 0) {
    std::snprintf(text, sizeof text,
                  "  top-k      gathered %" PRIu64 " calls, sent %12.1f MiB   sharded %" PRIu64
                  " calls, sent %12.1f MiB\n",
                  t.topk_gathered, t.topk_gathered_sent / kMiB, t.topk_sharded,
                  t.topk_sharded_sent / kMiB);
    table += text;
  }
  if (context.chooses) table += auto_table(t, context);
  if (!context.levels.empty()) table += levels_table(t, context);
  if (context.node_bytes) {
    std::snprintf(text, sizeof text,
                  "  nodes      across: baseline %12.1f MiB  sent %12.1f MiB   inside: "
                  "baseline %12.1f MiB  sent %12.1f MiB\n",
                  t.inter_node_baseline / kMiB, t.inter_node_sent / kMiB,
                  t.intra_node_baseline / kMiB, t.intra_node_sent / kMiB);
    table += text;
  }
  return table;
}

}  // namespace slimreduce
