#include "backends/nccl_coll_config.h"

#include <cstring>

namespace slimreduce {

bool nccl_coll_config_plain(const void* config) {
  if (!config) return true;
  NcclCollConfigV23200 c{};
  // The size first: only a config of exactly this layout is read whole.
  std::memcpy(&c.size, config, sizeof c.size);
  if (c.size != sizeof c) return false;
  std::memcpy(&c, config, sizeof c);
  const NcclCollConfigV23200 unset = nccl_coll_config_defaults();
  // An uninitialized config: NCCL answers it (magic first, before any pointer is read).
  if (c.magic != unset.magic) return false;
  const bool asks = c.ext != nullptr || c.minCTAs != unset.minCTAs || c.maxCTAs != unset.maxCTAs ||
                    c.nvlsCTAs != unset.nvlsCTAs || c.cgaClusterSize != unset.cgaClusterSize ||
                    c.CTAPolicy != unset.CTAPolicy || c.launchCompletionEvent != nullptr;
  if (asks) return false;
  // An automatic algorithm selection, "NULL/UNDEF/\"\"" (nccl.h), leaves
  // forceAlgSelection nothing to force. The profiler tag "does not affect
  // execution": it decides nothing, so ranks that tag differently still decide
  // alike (a compressed call's own collectives go untagged).
  return !c.algSelection || c.algSelection[0] == '\0';
}

}  // namespace slimreduce
