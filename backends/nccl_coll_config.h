// NCCL 2.32's per-call config (ncclAllReduceConfig and the other nccl*Config
// collectives): when it leaves every choice to NCCL, the call is the plain
// ncclAllReduce and may be compressed; when it asks for anything that changes
// how the call runs (an algorithm, a CTA count, a launch-completion event),
// the call passes through with its config. Pure logic: no NCCL header, so it is tested
// on any machine; backends/nccl_backend.cc checks the layout against an nccl.h
// that declares it.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

namespace slimreduce {

// ncclCollConfig_v23200 of NCCL 2.32's nccl.h, field for field. Versioned and
// append-only there: a later NCCL's config is larger.
struct NcclCollConfigV23200 {
  std::size_t size;
  unsigned int magic;
  unsigned int version;
  void* ext;  // ncclConfigExt_t*: vendor options, or NULL
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  const char* algSelection;
  int forceAlgSelection;
  int CTAPolicy;
  std::uint64_t userProfilerTag;
  void* launchCompletionEvent;  // cudaEvent_t
};

inline constexpr unsigned int kNcclApiMagic = 0xcafebeef;  // NCCL_API_MAGIC

// NCCL_COLLCONFIG_INITIALIZER's values (version left 0: NCCL's code there).
inline NcclCollConfigV23200 nccl_coll_config_defaults() {
  NcclCollConfigV23200 c{};
  c.size = sizeof(NcclCollConfigV23200);
  c.magic = kNcclApiMagic;
  c.ext = nullptr;
  c.minCTAs = c.maxCTAs = c.nvlsCTAs = c.cgaClusterSize = INT_MIN;  // NCCL_CONFIG_UNDEF_INT
  c.algSelection = nullptr;
  c.forceAlgSelection = 1;
  c.CTAPolicy = INT_MIN;
  c.userProfilerTag = 0;
  c.launchCompletionEvent = nullptr;
  return c;
}

// Whether a call with this config is the plain ncclAllReduce ("config == NULL
// is equivalent to the plain API", nccl.h): null, or every field that changes
// how NCCL runs the call as the initializer leaves it (the profiler tag
// changes nothing, nor forceAlgSelection without a selection). Not plain: such
// a field set, a bad magic (NCCL answers that itself), or a size other than
// this layout's (a later NCCL's config may set fields this code cannot read).
// NCCL asks every rank for the same config, so every rank decides alike.
bool nccl_coll_config_plain(const void* config);

}  // namespace slimreduce
