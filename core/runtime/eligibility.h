// Which calls SlimReduce may compress (invariant 2 of docs/architecture.md),
// written once for both sides: each side's thin front (core/mpi/eligibility.h,
// core/nccl/eligibility.h) turns its call's arguments into CallFacts, and
// classify() reads them under the rules of its backend. Everything it passes
// through reaches the real library with the caller's arguments, bit for bit.
// Pure logic: no MPI, NCCL or CUDA header, so it is tested on any machine.
#pragma once

#include <cstdint>

#include "compressors/compressor.h"
#include "core/runtime/settings.h"
#include "scheduler/route.h"

namespace slimreduce {

enum class ElemType : std::uint8_t { fp32, fp16, bf16, other };
enum class ReduceOp : std::uint8_t { sum, average, other };  // other: MAX, a user-defined op, ...

// What a side knows about a call from its arguments alone: every rank derives
// the same facts from the same call, so every rank decides alike.
struct CallFacts {
  ElemType elem = ElemType::other;  // a predefined, contiguous type, or other
  ReduceOp op = ReduceOp::other;
  std::uint64_t count = 0;
  // Buffers we can read and write. MPI: neither null nor MPI_IN_PLACE as the
  // receive buffer, and not one buffer twice without MPI_IN_PLACE (the real
  // library reports such a call, MPI_ERR_BUFFER; ours would crash).
  bool usable_buffers = false;
  bool device_buffers = false;  // both buffers device (or managed) memory
  // A communicator we may reduce on: an intracommunicator (MPI); one we saw
  // created in blocking mode, its shape known (NCCL).
  bool comm_ready = false;
  int comm_size = 0;         // its ranks (0: not known yet)
  bool coll_config = false;  // a per-call config that asks the library for something (NCCL)

  std::uint64_t bytes() const;
};

// Where the two sides differ on purpose, as data of the one classifier (the
// table in docs/architecture.md, "Deliberate differences", lists each and why;
// test_eligibility holds the two to it).
struct BackendRules {
  const char* name;
  // The fewest ranks a compressed call has: MPI's one-rank communicator
  // (MPI_COMM_SELF) sends nothing, so compressing would only round the
  // caller's values; NCCL's compressed path at one rank is the device kernels'
  // own check, and a job on one GPU is how they are first tried.
  int fewest_ranks;
  bool takes_average;         // ncclAvg (MPI has no average op)
  bool takes_16bit_topk;      // fp16/bf16 inputs to top-k (MPI: float32 only)
  bool needs_device_buffers;  // host buffers pass through (MPI compresses both kinds)
  bool needs_device_kernels;  // a compressor without GPU kernels passes (MPI stages on the host)
  bool device_count_capped;   // over device_max_count() passes (MPI stages on the host)
};

inline constexpr BackendRules kMpiRules{"MPI", 2, false, false, false, false, false};
inline constexpr BackendRules kNcclRules{"NCCL", 1, true, true, true, true, true};

// The part of the settings and the compressor the classifier reads, taken
// once (the hot path of a pass-through call compares no strings).
struct EligibilityRule {
  bool compressing = false;                           // a compressor other than "none" is in use
  std::uint64_t min_bytes = 0;                        // SLIMREDUCE_MIN_BYTES
  ReductionPath route = ReductionPath::pass_through;  // the compressor's kind of aggregation
  compressors::DeviceKernels kernels = compressors::DeviceKernels::none;
  std::uint64_t device_max_count = UINT64_MAX;
};

// `compressor`: the policy's (nullptr: "none"). Its GPU kernels are asked only
// for a backend that needs them: PowerSGD answers by loading cuBLAS, which a
// process reducing host buffers over MPI must never load.
EligibilityRule eligibility_rule(const Settings& settings,
                                 const compressors::Compressor* compressor,
                                 const BackendRules& backend);

// The route of a compressor's kind of aggregation.
ReductionPath route_of(compressors::Aggregation aggregation);

// What to do with one call. Later steps may still pass an eligible call
// through (warm-up, residual cap, graph capture without workspace); they too
// decide from call history only.
ReductionVerdict classify(const CallFacts& facts, const EligibilityRule& rule,
                          const BackendRules& backend);

}  // namespace slimreduce
