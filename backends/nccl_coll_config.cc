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
  // "NULL/UNDEF/\"\" == automatic" (nccl.h): an empty selection string asks nothing.
  const bool automatic = !c.algSelection || c.algSelection[0] == '\0';
  return c.magic == unset.magic && c.ext == nullptr && c.minCTAs == unset.minCTAs &&
         c.maxCTAs == unset.maxCTAs && c.nvlsCTAs == unset.nvlsCTAs &&
         c.cgaClusterSize == unset.cgaClusterSize && automatic &&
         c.forceAlgSelection == unset.forceAlgSelection && c.CTAPolicy == unset.CTAPolicy &&
         c.userProfilerTag == 0 && c.launchCompletionEvent == nullptr;
}

}  // namespace slimreduce
