// The waits and tests, for queued MPI_Iallreduce calls (docs/architecture.md,
// "Fusion"): a compressed MPI_Iallreduce hands the caller a generalized
// request that only a flush completes, so a wait, a test or a free on one
// flushes its communicator's queue first; then the real function runs on the
// caller's whole array (their own requests too, each completed once). While
// nothing is queued, each shim is one load and a tail call.
#include "interpose/shim_common.h"

using namespace slimreduce::interpose;

namespace {

using Until = Engine::Until;

}  // namespace

SR_EXPORT int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (queued()) {
    if (const int rc = flush_before(request, 1, Until::all_done, "MPI_Wait")) return rc;
  }
  return PMPI_Wait(request, status);
}

SR_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (queued()) {
    if (const int rc = flush_before(requests, count, Until::all_done, "MPI_Waitall")) return rc;
  }
  return PMPI_Waitall(count, requests, statuses);
}

SR_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  if (queued()) {
    if (const int rc = flush_before(requests, count, Until::one_done, "MPI_Waitany")) return rc;
  }
  return PMPI_Waitany(count, requests, index, status);
}

SR_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                           MPI_Status statuses[]) {
  if (queued()) {
    if (const int rc = flush_before(requests, incount, Until::one_done, "MPI_Waitsome")) return rc;
  }
  return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}

// A test flushes once: the calls every rank has queued run (a collective,
// so it waits for the other ranks to flush too), and the test then says
// whether the caller's request was among them.
SR_EXPORT int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (queued()) {
    if (const int rc = flush_before(request, 1, Until::one_pass, "MPI_Test")) return rc;
  }
  return PMPI_Test(request, flag, status);
}

SR_EXPORT int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (queued()) {
    if (const int rc = flush_before(requests, count, Until::one_pass, "MPI_Testall")) return rc;
  }
  return PMPI_Testall(count, requests, flag, statuses);
}

SR_EXPORT int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag,
                          MPI_Status* status) {
  if (queued()) {
    if (const int rc = flush_before(requests, count, Until::one_pass, "MPI_Testany")) return rc;
  }
  return PMPI_Testany(count, requests, index, flag, status);
}

SR_EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                           MPI_Status statuses[]) {
  if (queued()) {
    if (const int rc = flush_before(requests, incount, Until::one_pass, "MPI_Testsome")) return rc;
  }
  return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

// Freeing a queued request: its reduction runs first (the caller gave up the
// request, not the reduction, which every rank takes part in).
SR_EXPORT int MPI_Request_free(MPI_Request* request) {
  if (queued()) {
    if (const int rc = flush_before(request, 1, Until::all_done, "MPI_Request_free")) return rc;
  }
  return PMPI_Request_free(request);
}
