// The MPI side's exchange for core/runtime/wire_agreement.h, run once per
// communicator when it is first used compressed, on its private duplicate.
#pragma once

#include <mpi.h>

#include <vector>

namespace slimreduce {

// MPI_SUCCESS when every rank of `wire` holds this rank's record; an MPI error
// code when the exchange itself failed. Never returns when the ranks differ:
// the communicator's rank 0 prints the line that names the difference and
// aborts the job; the other ranks wait for it, so the line is never lost.
int check_wire_agreement(MPI_Comm wire, int rank, int size, const std::vector<char>& record);

}  // namespace slimreduce
