#include "backends/nccl_backend.h"

#include <dlfcn.h>
#include <link.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <string>

namespace slimreduce::backends::nccl {
namespace {

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 32, 0)
// An nccl.h that declares the per-call config: our copy of its layout must be
// NCCL's, field for field (nccl_coll_config_plain reads a caller's config by it).
using Ours = slimreduce::NcclCollConfigV23200;
#define SR_SAME_FIELD(f) static_assert(offsetof(Ours, f) == offsetof(ncclCollConfig_t, f), #f)
static_assert(sizeof(Ours) == sizeof(ncclCollConfig_t));
static_assert(kNcclApiMagic == NCCL_API_MAGIC);
SR_SAME_FIELD(size);
SR_SAME_FIELD(magic);
SR_SAME_FIELD(version);
SR_SAME_FIELD(ext);
SR_SAME_FIELD(minCTAs);
SR_SAME_FIELD(maxCTAs);
SR_SAME_FIELD(nvlsCTAs);
SR_SAME_FIELD(cgaClusterSize);
SR_SAME_FIELD(algSelection);
SR_SAME_FIELD(forceAlgSelection);
SR_SAME_FIELD(CTAPolicy);
SR_SAME_FIELD(userProfilerTag);
SR_SAME_FIELD(launchCompletionEvent);
#undef SR_SAME_FIELD
#endif

thread_local int real_call_depth = 0;

// Whether fn is defined in this library (our interposers): never call it as "real".
bool is_ours(void* fn) {
  Dl_info mine{}, theirs{};
  return dladdr(reinterpret_cast<void*>(&is_ours), &mine) && dladdr(fn, &theirs) &&
         mine.dli_fbase == theirs.dli_fbase;
}

// A function of the chosen library, by its pnccl* alias first: NCCL's own
// profiling entry point, which no other interposer defines.
void* lookup(void* handle, const char* name) {
  const std::string alias = std::string("p") + name;
  for (void* fn : {dlsym(handle, alias.c_str()), dlsym(handle, name), dlsym(RTLD_NEXT, name)}) {
    if (fn && !is_ours(fn)) return fn;
  }
  return nullptr;
}

// Every loaded object, so a job that loaded NCCL privately (RTLD_LOCAL, as a
// Python extension's dependency) is found too.
int collect_object(struct dl_phdr_info* info, size_t, void* data) {
  auto* names = static_cast<std::string*>(data);
  if (info->dlpi_name && info->dlpi_name[0]) {
    names->append(info->dlpi_name);
    names->push_back('\n');
  }
  return 0;
}

// A handle on the loaded object that defines NCCL, preferring one named
// libnccl; never this library (it defines ncclAllReduce too).
void* find_loaded_nccl(std::string* path) {
  std::string names;
  dl_iterate_phdr(collect_object, &names);
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&find_loaded_nccl), &self);
  void* fallback = nullptr;
  std::string fallback_path;
  for (std::size_t at = 0, end; (end = names.find('\n', at)) != std::string::npos; at = end + 1) {
    const std::string name = names.substr(at, end - at);
    if (self.dli_fname && name == self.dli_fname) continue;
    void* handle = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (!handle) continue;
    if (dlsym(handle, "pncclAllReduce") || dlsym(handle, "ncclAllReduce")) {
      if (name.find("libnccl") != std::string::npos) {
        if (fallback) dlclose(fallback);
        *path = name;
        return handle;
      }
      if (!fallback) {
        fallback = handle;
        fallback_path = name;
        continue;
      }
    }
    dlclose(handle);
  }
  *path = fallback_path;
  return fallback;
}

template <class Fn>
void bind(Fn& slot, void* handle, const char* name) {
  slot = reinterpret_cast<Fn>(lookup(handle, name));
}

void bind_all(Api& api, void* handle) {
  bind(api.all_reduce, handle, "ncclAllReduce");
  bind(api.all_reduce_config, handle, "ncclAllReduceConfig");
  bind(api.all_gather, handle, "ncclAllGather");
  bind(api.reduce_scatter, handle, "ncclReduceScatter");
  bind(api.send, handle, "ncclSend");
  bind(api.recv, handle, "ncclRecv");
  bind(api.group_start, handle, "ncclGroupStart");
  bind(api.group_end, handle, "ncclGroupEnd");
#if SLIMREDUCE_NCCL_HAS_SIMULATE_END
  bind(api.group_simulate_end, handle, "ncclGroupSimulateEnd");
#endif
  bind(api.comm_init_rank, handle, "ncclCommInitRank");
  bind(api.comm_init_rank_config, handle, "ncclCommInitRankConfig");
  bind(api.comm_init_rank_scalable, handle, "ncclCommInitRankScalable");
  bind(api.comm_init_all, handle, "ncclCommInitAll");
  bind(api.comm_split, handle, "ncclCommSplit");
  bind(api.comm_shrink, handle, "ncclCommShrink");
  bind(api.comm_grow, handle, "ncclCommGrow");
  bind(api.comm_destroy, handle, "ncclCommDestroy");
  bind(api.comm_abort, handle, "ncclCommAbort");
  bind(api.comm_finalize, handle, "ncclCommFinalize");
  bind(api.comm_count, handle, "ncclCommCount");
  bind(api.comm_user_rank, handle, "ncclCommUserRank");
  bind(api.comm_cu_device, handle, "ncclCommCuDevice");
  bind(api.comm_get_async_error, handle, "ncclCommGetAsyncError");
}

Api resolve() {
  Api api;
  static std::string origin;
  // 1. The pnccl* aliases in the global scope: the NCCL the job linked.
  if (dlsym(RTLD_DEFAULT, "pncclAllReduce")) {
    bind_all(api, RTLD_DEFAULT);
    origin = "pnccl* in the global scope";
  } else if (dlsym(RTLD_NEXT, "ncclAllReduce")) {
    // 2. The next definition after this library (an NCCL without aliases).
    bind_all(api, RTLD_NEXT);
    origin = "RTLD_NEXT";
  } else {
    // 3. An NCCL loaded privately; the handle is kept for the life of the process.
    std::string path;
    if (void* handle = find_loaded_nccl(&path)) {
      bind_all(api, handle);
      origin = "loaded privately: " + path;
    }
  }
  if (api.all_reduce) api.origin = origin.c_str();
  return api;
}

}  // namespace

const Api& api() {
  static std::once_flag once;
  static Api table;
  std::call_once(once, [] { table = resolve(); });
  return table;
}

bool in_real_call() { return real_call_depth > 0; }

RealCall::RealCall() { ++real_call_depth; }
RealCall::~RealCall() { --real_call_depth; }

}  // namespace slimreduce::backends::nccl
