// What SlimReduce saw and sent, per rank, and the report made from it
// (design notes section 5). Keys are never renamed; new ones may be added.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/wire_bytes.h"

namespace slimreduce {

// The report's ring accounting (ring_allreduce_wire_bytes,
// ring_allgather_wire_bytes) lives with the algorithms it describes.
using algorithms::ring_allgather_wire_bytes;
using algorithms::ring_allreduce_wire_bytes;

struct Counters {
  std::uint64_t intercepted = 0;  // always compressed + passed_through
  std::uint64_t compressed = 0;
  std::uint64_t passed_through = 0;
  std::uint64_t warmup = 0;  // passed through: the key is in its warm-up calls
  // Calls SLIMREDUCE_EF_MAX_BYTES changed: passed through (a tensor larger than
  // the cap), or compressed without error feedback (no room for a new key; on
  // the NCCL path also a key with no residual yet, captured into a CUDA graph).
  std::uint64_t ef_cap_fallback = 0;
  std::uint64_t input_bytes = 0;
  double wire_baseline = 0;
  double wire_sent = 0;
  // Calls whose residual key came back with another count or datatype: what was
  // carried is dropped (for example a fusion buffer that fuses other tensors).
  std::uint64_t ef_resets = 0;
  // Residual keys freed after SLIMREDUCE_EF_EVICT_CALLS calls of their
  // communicator without a use (their buffers are most likely gone).
  std::uint64_t ef_evicted = 0;
  // Compressed calls whose 16-bit sum left fp16's range and were rerun with
  // bf16 on every rank alike (algorithms/rescued_cast_ring.h).
  std::uint64_t overflow_rescued = 0;
  // MPI_Iallreduce calls, compressed (queued and fused) or passed through.
  std::uint64_t iallreduce = 0;
  // Collectives that carried two or more reductions (a fused batch: queued
  // MPI_Iallreduce calls, an NCCL group's casts), and the reductions they carried.
  std::uint64_t fused_batches = 0;
  std::uint64_t fused_tensors = 0;
  // The pieces that calls larger than SLIMREDUCE_PARTITION_BYTES were cut
  // into (scheduler/partition.h); a call reduced whole adds none.
  std::uint64_t partitions = 0;
  // Top-k calls by algorithm (SLIMREDUCE_TOPK_ALGORITHM): the payloads
  // allgathered, or sharded to owners (algorithms/sharded.h), and the bytes
  // each handed to the transport (a part of wire_sent).
  std::uint64_t topk_gathered = 0;
  std::uint64_t topk_sharded = 0;
  double topk_gathered_sent = 0;
  double topk_sharded_sent = 0;
  // With SLIMREDUCE_HIERARCHICAL=1, on communicators whose nodes are known:
  // the baseline and sent bytes above, split by whether they cross a node
  // boundary (docs/architecture.md, "Hierarchical").
  double inter_node_baseline = 0;
  double inter_node_sent = 0;
  double intra_node_baseline = 0;
  double intra_node_sent = 0;
  // SLIMREDUCE_COMPRESSOR=auto: calls of probe rounds, and agreed rounds
  // whose winner differed from the class's choice before (core/runtime/auto_choice.h).
  std::uint64_t auto_probe_calls = 0;
  std::uint64_t auto_switches = 0;
  // Host waits for auto's timings or exchange that the device had not
  // reached when they were due (the NCCL side reads them a call later,
  // core/nccl/auto_timing.h; a wait is counted, never hidden).
  std::uint64_t auto_waits = 0;
  // SLIMREDUCE_ADAPTIVE: compressed calls sent at the gentle and the hard
  // level, and the shapes' level changes (core/runtime/adaptive_levels.h).
  std::uint64_t adaptive_gentle = 0;
  std::uint64_t adaptive_hard = 0;
  std::uint64_t adaptive_switches = 0;

  // A call that reached the real library as given.
  void count_pass_through(std::uint64_t bytes, int ranks);
  // A compressed call that handed `wire_sent_bytes` to the transport.
  void count_compressed(std::uint64_t bytes, int ranks, double wire_sent_bytes);
  // Splits a call's baseline and sent bytes by node: all across when this
  // rank's ring hop crosses a node boundary, all inside otherwise.
  void count_by_node(double baseline, double sent, bool hop_crosses);
  // The same for a hierarchical call, whose baseline is a flat ring's: of what
  // it sent (wire_sent, counted already), intra_sent bytes (the fp32 shards)
  // stayed inside the node and the rest crossed.
  void count_hierarchical_by_node(double intra_sent, bool hop_crosses);
  // A compressed top-k call's algorithm and what it sent.
  void count_topk(bool sharded, double sent);
  // A compressed call sent at `level` (LevelSchedule's: 0 gentle, 1 hard).
  void count_level(int level) { (level == 0 ? adaptive_gentle : adaptive_hard) += 1; }
  double savings() const;
  Counters& operator+=(const Counters& other);

  // Every field as a number, in a fixed order (to sum over ranks), and back.
  static constexpr int kValues = 29;
  void to_values(double (&values)[kValues]) const;
  static Counters from_values(const double (&values)[kValues]);
};

// Counters without a lock: each thread adds into a slot of its own (single
// writer, relaxed atomics, so a reader on another thread sees whole values
// without a data race); readers sum the slots. Calls that simply pass
// through are counted in their thread's ThreadTally instead (the hot path).
class CounterBoard {
 public:
  CounterBoard();
  ~CounterBoard();
  CounterBoard(const CounterBoard&) = delete;
  CounterBoard& operator=(const CounterBoard&) = delete;

  // Adds delta to the calling thread's slot. delta.intercepted is not kept:
  // the total derives it as compressed + passed_through, which Counters'
  // count_* functions keep true.
  void add(const Counters& delta);
  Counters total() const;

 private:
  struct Slot;
  Slot& my_slot();

  mutable std::mutex mutex_;  // guards slots_ (registration and reading)
  std::vector<std::unique_ptr<Slot>> slots_;
  std::uint64_t id_;  // tells this board's slots from an earlier board's in a thread's cache
};

// SLIMREDUCE_COMPRESSOR=auto: one size class's agreed choice (the same on every rank).
struct AutoChoiceRow {
  std::uint64_t comm_id = 0;
  std::uint32_t size_class = 0;  // calls of 2^size_class to 2^(size_class + 1) - 1 bytes
  std::string chosen;            // "" before the first agreed round
  std::vector<std::pair<std::string, double>> medians;  // each candidate's agreed median, seconds
  std::uint64_t probe_rounds = 0;
  std::uint64_t switches = 0;
  std::uint64_t calls = 0;
  bool resetting = false;          // the last agreed window's residuals kept resetting
  std::uint64_t reset_rounds = 0;  // rounds won without the candidates that keep a residual
  // Cut after one call by a round's first pass: that call's agreed time, seconds (no median).
  std::vector<std::pair<std::string, double>> cut;
  // Left out of the last round by a prediction alone: that prediction, seconds.
  std::vector<std::pair<std::string, double>> predicted_out;
};

// SLIMREDUCE_ADAPTIVE: one size class's calls at each level (the same on every rank).
struct LevelRow {
  std::uint64_t comm_id = 0;
  std::uint32_t size_class = 0;  // calls of 2^size_class to 2^(size_class + 1) - 1 fp32 bytes
  std::uint64_t gentle = 0;
  std::uint64_t hard = 0;
  std::uint64_t windows = 0;
  std::uint64_t critical = 0;
  std::uint64_t switches = 0;
};

struct ReportContext {
  int rank = 0;
  int world_size = 1;
  std::string compressor;
  // The counters are every rank's, summed (MPI_Finalize with MPI to sum over);
  // otherwise they are this rank's alone, and the table says so.
  bool summed_over_ranks = false;
  // SLIMREDUCE_HIERARCHICAL=1: the report carries the node split.
  bool node_bytes = false;
  // SLIMREDUCE_COMPRESSOR=auto: the report carries the choice table.
  bool chooses = false;
  std::vector<AutoChoiceRow> auto_choices;
  // SLIMREDUCE_ADAPTIVE: the report carries the levels ("gentle,hard" as
  // set) and each class's calls at them.
  std::string levels;  // "": levels do not adapt
  std::vector<LevelRow> level_rows;
};

std::string report_json(const Counters& counters, const ReportContext& context);
// A choice's agreed medians as the table and the log print them, then the candidates
// cut after one call, then those a prediction left out: "fp16 0.900 ms, int8 0.500 ms, none
// cut after one call at 1.600 ms" or "..., none left out, predicted at 3.200 ms".
std::string auto_medians_text(const AutoChoiceRow& row);
// The value the report gives `key` ("calls.compressed", "bytes.inter_node_sent",
// "savings", ...), or nothing for a key the report does not have.
std::optional<double> report_value(const Counters& counters, std::string_view key);
// A short human-readable table of the counters (summed over all ranks, or this rank's).
std::string report_table(const Counters& total, const ReportContext& context);

}  // namespace slimreduce
