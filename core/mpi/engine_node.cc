// What this rank's node gives the MPI engine: its CPUs and its ranks (for
// SLIMREDUCE_PIPELINE=auto) and its MPI's transport (one line of advice).
// Facts of this rank alone: they change no bits, so the ranks need not agree.
#include <sched.h>

#include <cstdlib>
#include <mutex>

#include "core/mpi/engine.h"
#include "core/mpi/ucx_advice.h"
#include "core/runtime/log.h"
#include "scheduler/pipeline.h"

namespace slimreduce {

namespace {

// The ranks on this node, as the launcher says (Open MPI, MPICH's Hydra);
// unknown: the whole world, as if on one node (so auto pipelines less).
unsigned ranks_on_node(int world_size) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* value = std::getenv(name)) {
      const long ranks = std::strtol(value, nullptr, 10);
      if (ranks > 0) return static_cast<unsigned>(ranks);
    }
  }
  return static_cast<unsigned>(world_size);
}

unsigned cpus_allowed() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return static_cast<unsigned>(CPU_COUNT(&set));
}

}  // namespace

// SLIMREDUCE_PIPELINE, with auto decided from this rank's CPUs (it changes no
// bits, so the ranks need not agree), said once at INFO.
bool Engine::pipelining_wanted() const {
  const Settings& settings = runtime_.settings();
  if (settings.pipeline != Pipelining::automatic) return settings.pipeline == Pipelining::on;
  const unsigned cpus = cpus_allowed(), ranks = ranks_on_node(world_size_);
  const bool wanted = scheduler::helper_pays(cpus, ranks);
  if (world_rank_ == 0) {
    log_line(settings.log_level, LogLevel::info, world_rank_,
             "pipelining of partitioned calls %s (SLIMREDUCE_PIPELINE=auto: %u CPUs for %u ranks "
             "on this node; on from 2 per rank)",
             wanted ? "on" : "off", cpus, ranks);
  }
  return wanted;
}

// At world rank 0's first compressed call, where the MPI's own transport is
// known to cost our traffic: one line (core/mpi/ucx_advice.h), no change.
void Engine::advise_on_transport() {
  if (world_rank_ != 0) return;
  std::call_once(transport_advice_, [this] {
    const auto facts = ucx_advice::gather(ranks_on_node(world_size_), world_size_);
    if (const auto line = ucx_advice::rendezvous_advice(facts))
      log_line(runtime_.settings().log_level, LogLevel::warn, world_rank_, "%s", line->c_str());
  });
}

}  // namespace slimreduce
