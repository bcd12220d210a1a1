#include "core/mpi/wire_check.h"

#include <cstdio>
#include <string>

#include "core/runtime/wire_agreement.h"

namespace slimreduce {

int check_wire_agreement(MPI_Comm wire, int rank, int size, const std::vector<char>& record) {
  namespace agreement = wire_agreement;
  const agreement::Fingerprint mine = agreement::fingerprint(record);
  agreement::Fingerprint reduced{};
  int rc = PMPI_Allreduce(mine.words, reduced.words, 2, MPI_UINT64_T, MPI_MAX, wire);
  if (rc != MPI_SUCCESS) return rc;
  if (agreement::all_agree(reduced)) return MPI_SUCCESS;
  // Every rank saw the same MAX, so every rank is here: gather the records.
  std::vector<char> records(agreement::kRecordBytes * static_cast<std::size_t>(size));
  rc = PMPI_Allgather(record.data(), static_cast<int>(agreement::kRecordBytes), MPI_CHAR,
                      records.data(), static_cast<int>(agreement::kRecordBytes), MPI_CHAR, wire);
  if (rc != MPI_SUCCESS) return rc;
  if (rank == 0) {
    std::string line = agreement::describe_disagreement(records, size);
    if (line.empty()) line = "ranks disagree on what shapes the wire";  // a hash, not a field
    std::fprintf(stderr, "slimreduce: %s\n", line.c_str());
    std::fflush(stderr);
    PMPI_Abort(wire, 1);
  }
  PMPI_Barrier(wire);  // rank 0 aborts the job; never passed
  return MPI_ERR_OTHER;
}

}  // namespace slimreduce
