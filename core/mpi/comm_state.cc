#include "core/mpi/comm_state.h"

#include "core/runtime/counters.h"

namespace slimreduce {

CommState::CommState(std::uint64_t id, MPI_Comm user_comm)
    : shape_{id, 0, 1}, user_comm_(user_comm) {
  int inter = 0;
  PMPI_Comm_test_inter(user_comm, &inter);
  is_inter_ = inter != 0;
  if (!is_inter_) {
    PMPI_Comm_rank(user_comm, &shape_.rank);
    PMPI_Comm_size(user_comm, &shape_.size);
  }
}

CommState::~CommState() { release(); }

int CommState::private_comm(MPI_Comm* out) {
  if (private_comm_ == MPI_COMM_NULL) {
    const int rc = PMPI_Comm_dup(user_comm_, &private_comm_);
    if (rc != MPI_SUCCESS) return rc;
    // Our traffic's errors come back to us, and the engine hands them to the
    // caller's handler on the caller's communicator: an inherited handler
    // would run on a communicator the caller has never seen.
    PMPI_Comm_set_errhandler(private_comm_, MPI_ERRORS_RETURN);
  }
  *out = private_comm_;
  return MPI_SUCCESS;
}

void CommState::release() {
  int finalized = 0;
  PMPI_Finalized(&finalized);
  if (hierarchy_ && finalized) {
    // No MPI to free them with: they go with the process.
    (void)hierarchy_->node.release();
    (void)hierarchy_->cross.release();
  }
  hierarchy_.reset();  // split from the private duplicate: freed before it
  if (private_comm_ != MPI_COMM_NULL && !finalized) PMPI_Comm_free(&private_comm_);
  private_comm_ = MPI_COMM_NULL;
}

std::byte* CommState::grow(std::vector<std::byte>& buffer, std::size_t bytes) {
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}

}  // namespace slimreduce
