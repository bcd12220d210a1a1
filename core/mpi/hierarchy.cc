#include "core/mpi/hierarchy.h"

#include <vector>

namespace slimreduce {
namespace {

// This rank's node, named by a number every rank of the node derives alike.
Status node_color(MPI_Comm comm, int rank, int world_rank, std::optional<int> local_size,
                  int* color) {
  if (local_size) {
    *color = world_rank / *local_size;
    return {};
  }
  MPI_Comm shared = MPI_COMM_NULL;
  SLIMREDUCE_TRY(
      Status::mpi(PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared)));
  // The node's lowest rank names it.
  const int rc = PMPI_Allreduce(&rank, color, 1, MPI_INT, MPI_MIN, shared);
  PMPI_Comm_free(&shared);
  return Status::mpi(rc);
}

}  // namespace

Status make_hierarchy(MPI_Comm comm, backends::Transport& transport, int world_rank,
                      std::optional<int> local_size, Hierarchy* out) {
  *out = Hierarchy{};
  int color = 0;
  SLIMREDUCE_TRY(node_color(comm, transport.rank(), world_rank, local_size, &color));
  std::vector<int> colors(transport.size());
  SLIMREDUCE_TRY(Status::mpi(PMPI_Allgather(&color, 1, MPI_INT, colors.data(), 1, MPI_INT, comm)));
  out->split = split_by_node(colors, transport.rank());
  if (out->split.flat()) return {};
  std::unique_ptr<backends::Transport> node;
  std::unique_ptr<backends::Transport> cross;
  SLIMREDUCE_TRY(split_transports(transport, out->split, &node, &cross));
  out->node = std::move(node);
  out->cross = std::move(cross);
  return {};
}

}  // namespace slimreduce
