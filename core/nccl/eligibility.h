// The NCCL front of the shared classifier (core/runtime/eligibility.h): the
// facts of an ncclAllReduce from its arguments, and a new communicator's
// blocking mode and shape. Pure logic: no NCCL or CUDA header, so it is
// tested on any machine.
#pragma once

#include <climits>
#include <cstdint>
#include <string>

#include "compressors/compressor.h"
#include "core/runtime/eligibility.h"
#include "core/runtime/settings.h"

namespace slimreduce {

// ncclDataType_t and ncclRedOp_t values we act on (stable in nccl.h since 2.x;
// core/nccl/engine.cc checks them against the header at compile time).
inline constexpr int kNcclFloat16 = 6;
inline constexpr int kNcclFloat32 = 7;
inline constexpr int kNcclBfloat16 = 9;
inline constexpr int kNcclSum = 0;
inline constexpr int kNcclAvg = 4;
inline constexpr int kNcclConfigUndefInt = INT_MIN;  // NCCL_CONFIG_UNDEF_INT

// How a new communicator came to be, for its blocking mode.
enum class NcclParent { none, blocking, non_blocking, unknown };  // unknown: not seen by us
struct NcclModeFacts {
  const char* env_blocking = nullptr;  // NCCL_COMM_BLOCKING as read, or nullptr
  bool has_config = false;
  int config_blocking = kNcclConfigUndefInt;  // undefined also for configs before NCCL 2.14
  NcclParent parent = NcclParent::none;       // split, shrink and grow
  bool init_in_progress = false;              // the init returned ncclInProgress
};

// NCCL's rule (init.cc: parseCommConfig, copyCommConfig, envConfigOverride):
// NCCL_COMM_BLOCKING, when it reads 0 or 1, overrides everything; then the
// config's own value; a config that leaves it unset gets NCCL's default
// (blocking), even for a split; only a split, shrink or grow without a
// config inherits its parent's mode (a rank that joins a grow has none).
// An init that answered ncclInProgress is non-blocking whatever we concluded.
bool nccl_blocking_mode(const NcclModeFacts& facts);

// What the shape queries (ncclCommCount, UserRank, CuDevice) of a blocking
// communicator told. NCCL queues a communicator created inside a group until
// the outermost ncclGroupEnd and answers 0 ranks, rank 0, device 0 with
// success until then: such a size means "ask again later", not a shape.
enum class NcclShape { ready, later, never };
NcclShape nccl_shape(bool queries_ok, int size);

ElemType nccl_elem(int datatype);

// The facts of a call from its arguments; the communicator's (comm_ready: one
// we saw created in blocking mode; comm_size) and device_buffers are the
// engine's to fill.
CallFacts nccl_call_facts(int datatype, int op, std::uint64_t count, bool coll_config);

// What to do with one ncclAllReduce under `compressor` (nullptr: "none"),
// which says what GPU kernels it has: classify() under kNcclRules.
ReductionVerdict classify_nccl(const CallFacts& facts, const Settings& settings,
                               const compressors::Compressor* compressor);
// The same, with the compressor the settings name (made through the registry).
ReductionVerdict classify_nccl(const CallFacts& facts, const Settings& settings);

}  // namespace slimreduce
