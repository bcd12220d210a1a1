// The Fortran entry points of queued MPI_Iallreduce calls (docs/architecture.md,
// "Fusion"): Open MPI's Fortran bindings call PMPI_* directly, so the C shims
// never see a Fortran job's MPI_IALLREDUCE, waits or tests; these do, for
// `mpif.h` and `use mpi` (each compiler's mangling) and for `mpi_f08` (Open
// MPI's ompi_*_f). MPI_IALLREDUCE goes to the same queue as C's; a wait, test
// or free first flushes what its requests wait for, then the real Fortran
// binding runs with the caller's own arguments (its statuses, its handles).
#include <vector>

#include "interpose/fortran_common.h"
#include "interpose/shim_common.h"

using namespace slimreduce::interpose;

namespace {

using Until = Engine::Until;

// flush_before (interpose/shim_common.h) for Fortran handles; *ierr gets a failure.
bool flushed_for(const MPI_Fint* handles, MPI_Fint count, Until until, const char* call,
                 MPI_Fint* ierr) {
  if (!queued() || !handles || count <= 0) return true;
  std::vector<MPI_Request> requests(static_cast<std::size_t>(count));
  for (MPI_Fint i = 0; i < count; ++i) requests[i] = PMPI_Request_f2c(handles[i]);
  const int rc = flush_before(requests.data(), count, until, call);
  if (rc != MPI_SUCCESS) *ierr = rc;
  return rc == MPI_SUCCESS;
}

using WaitFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*);
using WaitallFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using WaitanyFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using WaitsomeFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using TestFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using TestallFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using TestanyFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using FreeFn = void (*)(MPI_Fint*, MPI_Fint*);

}  // namespace

SR_EXPORT void mpi_iallreduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                               MPI_Fint* op, MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  const CSendRecv buffers = c_buffers(sendbuf, recvbuf);
  const MPI_Datatype c_datatype = PMPI_Type_f2c(*datatype);
  const MPI_Op c_op = PMPI_Op_f2c(*op);
  const MPI_Comm c_comm = PMPI_Comm_f2c(*comm);
  MPI_Request c_request = MPI_REQUEST_NULL;
  Engine* engine = engine_or_null();
  if (!engine) {
    *ierr =
        PMPI_Iallreduce(buffers.send, buffers.recv, *count, c_datatype, c_op, c_comm, &c_request);
  } else {
    *ierr = guarded_on(c_comm, "MPI_IALLREDUCE", [&] {
      return engine->iallreduce(buffers.send, buffers.recv, *count, c_datatype, c_op, c_comm,
                                &c_request);
    });
  }
  if (*ierr == MPI_SUCCESS) *request = PMPI_Request_c2f(c_request);
}

SR_EXPORT void mpi_wait_(MPI_Fint* request, MPI_Fint* status, MPI_Fint* ierr) {
  static const auto real = real_fortran<WaitFn>("pmpi_wait_");
  if (flushed_for(request, 1, Until::all_done, "MPI_WAIT", ierr)) real(request, status, ierr);
}

SR_EXPORT void mpi_waitall_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* statuses,
                            MPI_Fint* ierr) {
  static const auto real = real_fortran<WaitallFn>("pmpi_waitall_");
  if (flushed_for(requests, *count, Until::all_done, "MPI_WAITALL", ierr))
    real(count, requests, statuses, ierr);
}

SR_EXPORT void mpi_waitany_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* index, MPI_Fint* status,
                            MPI_Fint* ierr) {
  static const auto real = real_fortran<WaitanyFn>("pmpi_waitany_");
  if (flushed_for(requests, *count, Until::one_done, "MPI_WAITANY", ierr))
    real(count, requests, index, status, ierr);
}

SR_EXPORT void mpi_waitsome_(MPI_Fint* incount, MPI_Fint* requests, MPI_Fint* outcount,
                             MPI_Fint* indices, MPI_Fint* statuses, MPI_Fint* ierr) {
  static const auto real = real_fortran<WaitsomeFn>("pmpi_waitsome_");
  if (flushed_for(requests, *incount, Until::one_done, "MPI_WAITSOME", ierr))
    real(incount, requests, outcount, indices, statuses, ierr);
}

SR_EXPORT void mpi_test_(MPI_Fint* request, MPI_Fint* flag, MPI_Fint* status, MPI_Fint* ierr) {
  static const auto real = real_fortran<TestFn>("pmpi_test_");
  if (flushed_for(request, 1, Until::one_pass, "MPI_TEST", ierr)) real(request, flag, status, ierr);
}

SR_EXPORT void mpi_testall_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* flag, MPI_Fint* statuses,
                            MPI_Fint* ierr) {
  static const auto real = real_fortran<TestallFn>("pmpi_testall_");
  if (flushed_for(requests, *count, Until::one_pass, "MPI_TESTALL", ierr))
    real(count, requests, flag, statuses, ierr);
}

SR_EXPORT void mpi_testany_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* index, MPI_Fint* flag,
                            MPI_Fint* status, MPI_Fint* ierr) {
  static const auto real = real_fortran<TestanyFn>("pmpi_testany_");
  if (flushed_for(requests, *count, Until::one_pass, "MPI_TESTANY", ierr))
    real(count, requests, index, flag, status, ierr);
}

SR_EXPORT void mpi_testsome_(MPI_Fint* incount, MPI_Fint* requests, MPI_Fint* outcount,
                             MPI_Fint* indices, MPI_Fint* statuses, MPI_Fint* ierr) {
  static const auto real = real_fortran<WaitsomeFn>("pmpi_testsome_");
  if (flushed_for(requests, *incount, Until::one_pass, "MPI_TESTSOME", ierr))
    real(incount, requests, outcount, indices, statuses, ierr);
}

SR_EXPORT void mpi_request_free_(MPI_Fint* request, MPI_Fint* ierr) {
  static const auto real = real_fortran<FreeFn>("pmpi_request_free_");
  if (flushed_for(request, 1, Until::all_done, "MPI_REQUEST_FREE", ierr)) real(request, ierr);
}

// Other compilers' manglings, and Open MPI's mpi_f08 names (interpose/mpi_fortran_shim.cc).
#define SR_FORTRAN_NAMES(lower, upper, f08)                                  \
  SR_EXPORT decltype(lower##_) lower __attribute__((alias(#lower "_")));     \
  SR_EXPORT decltype(lower##_) lower##__ __attribute__((alias(#lower "_"))); \
  SR_EXPORT decltype(lower##_) upper __attribute__((alias(#lower "_")));     \
  SR_EXPORT decltype(lower##_) f08 __attribute__((alias(#lower "_")));
SR_FORTRAN_NAMES(mpi_iallreduce, MPI_IALLREDUCE, ompi_iallreduce_f)
SR_FORTRAN_NAMES(mpi_wait, MPI_WAIT, ompi_wait_f)
SR_FORTRAN_NAMES(mpi_waitall, MPI_WAITALL, ompi_waitall_f)
SR_FORTRAN_NAMES(mpi_waitany, MPI_WAITANY, ompi_waitany_f)
SR_FORTRAN_NAMES(mpi_waitsome, MPI_WAITSOME, ompi_waitsome_f)
SR_FORTRAN_NAMES(mpi_test, MPI_TEST, ompi_test_f)
SR_FORTRAN_NAMES(mpi_testall, MPI_TESTALL, ompi_testall_f)
SR_FORTRAN_NAMES(mpi_testany, MPI_TESTANY, ompi_testany_f)
SR_FORTRAN_NAMES(mpi_testsome, MPI_TESTSOME, ompi_testsome_f)
SR_FORTRAN_NAMES(mpi_request_free, MPI_REQUEST_FREE, ompi_request_free_f)
