#include "core/mpi/ucx_advice.h"

#include <dirent.h>
#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace slimreduce::ucx_advice {
namespace {

// The variables that choose UCX's rendezvous, any one of which the user may
// have set on purpose: the line stays quiet then.
constexpr const char* kRendezvousVariables[] = {"UCX_RNDV_THRESH", "UCX_RNDV_SCHEME",
                                                "UCX_PROTO_ENABLE", "UCX_TCP_PUT_ENABLE"};

enum class Kind { tcp, shared_memory, rdma, other };

// A UCX_TLS entry's kind, by UCX's transport and alias names.
Kind kind_of(std::string_view name) {
  if (name == "tcp") return Kind::tcp;
  for (std::string_view shm : {"sm", "shm", "mm", "posix", "sysv", "cma", "knem", "xpmem"})
    if (name == shm) return Kind::shared_memory;
  // ib, and the verbs transports rc, rc_v, rc_x, rc_verbs, rc_mlx5, ud_*, dc_*.
  if (name == "ib" || name.starts_with("rc") || name.starts_with("ud") || name.starts_with("dc"))
    return Kind::rdma;
  return Kind::other;
}

std::vector<std::string_view> entries(std::string_view list) {
  std::vector<std::string_view> names;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    names.push_back(list.substr(0, comma));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return names;
}

// Which kinds of transport UCX_TLS lets UCX use: every kind where it is unset
// or "all"; a list names those it allows, a list after '^' those it excludes.
struct Allowed {
  bool tcp = true, shared_memory = true, rdma = true;
};

Allowed allowed_by(const std::optional<std::string>& tls) {
  if (!tls || *tls == "all" || tls->empty()) return {};
  std::string_view list = *tls;
  const bool excluding = list.front() == '^';
  if (excluding) list.remove_prefix(1);
  Allowed named{false, false, false};
  for (std::string_view name : entries(list)) {
    if (name == "all") named = {true, true, true};
    switch (kind_of(name)) {
      case Kind::tcp:
        named.tcp = true;
        break;
      case Kind::shared_memory:
        named.shared_memory = true;
        break;
      case Kind::rdma:
        named.rdma = true;
        break;
      case Kind::other:
        break;
    }
  }
  if (!excluding) return named;
  // An excluded alias or transport takes its kind away: UCX has the others of
  // a kind, but a job that excludes one rarely means to keep the rest.
  return {!named.tcp, !named.shared_memory, !named.rdma};
}

bool library_names(const char* fragment) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  return PMPI_Get_library_version(version, &length) == MPI_SUCCESS &&
         std::strstr(version, fragment) != nullptr;
}

bool any_rdma_device() {
  DIR* folder = opendir("/sys/class/infiniband");
  if (!folder) return false;
  bool found = false;
  while (const dirent* entry = readdir(folder)) found = found || entry->d_name[0] != '.';
  closedir(folder);
  return found;
}

}  // namespace

bool tcp_carries_traffic(const std::optional<std::string>& tls, unsigned ranks_on_node,
                         bool spans_nodes, bool rdma_device) {
  const Allowed allowed = allowed_by(tls);
  if (!allowed.tcp) return false;
  const bool inside_node = ranks_on_node > 1 && !allowed.shared_memory;
  const bool between_nodes = spans_nodes && !(rdma_device && allowed.rdma);
  return inside_node || between_nodes;
}

std::optional<std::string> rendezvous_advice(const TransportFacts& facts) {
  const bool before_v2_default = facts.ucx_major == 1 && facts.ucx_minor < 16;  // 0.0: unknown
  if (!facts.mpich_over_ucx || !before_v2_default || facts.rendezvous_set) return std::nullopt;
  if (!tcp_carries_traffic(facts.tls, facts.ranks_on_node, facts.spans_nodes, facts.rdma_device))
    return std::nullopt;
  char line[640];
  std::snprintf(line, sizeof line,
                "MPICH sends over TCP here through UCX %u.%u, whose rendezvous (protocol v1, the "
                "default before UCX 1.16) makes each large message wait on the link before its "
                "data flows: fp16 calls lost up to 17%% of their time to it at 1 Gbit/s, int8 "
                "calls 45%%. "
                "UCX_RNDV_THRESH=1M gave it all back (docs/performance.md section 14); setting it, "
                "UCX_RNDV_SCHEME, UCX_PROTO_ENABLE or UCX_TCP_PUT_ENABLE quiets this line",
                facts.ucx_major, facts.ucx_minor);
  return std::string(line);
}

TransportFacts gather(unsigned ranks_on_node, int world_size) {
  TransportFacts facts;
  facts.mpich_over_ucx = library_names("ch4:ucx");
  // MPICH's UCX is its dependency, so in the process's global scope by now.
  using VersionFn = void (*)(unsigned*, unsigned*, unsigned*);
  if (auto get_version = reinterpret_cast<VersionFn>(dlsym(RTLD_DEFAULT, "ucp_get_version"))) {
    unsigned release = 0;
    get_version(&facts.ucx_major, &facts.ucx_minor, &release);
  }
  for (const char* name : kRendezvousVariables)
    facts.rendezvous_set = facts.rendezvous_set || std::getenv(name) != nullptr;
  if (const char* tls = std::getenv("UCX_TLS")) facts.tls = tls;
  facts.ranks_on_node = ranks_on_node;
  facts.spans_nodes = static_cast<int>(ranks_on_node) < world_size;
  facts.rdma_device = any_rdma_device();
  return facts;
}

}  // namespace slimreduce::ucx_advice
