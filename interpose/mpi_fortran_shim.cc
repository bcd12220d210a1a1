// The Fortran MPI entry points. Open MPI's Fortran bindings call PMPI_*
// directly, so the C shims never see a Fortran job: these do, for the
// `mpif.h` and `use mpi` bindings (gfortran's single-underscore names and the
// other manglings), and for the `mpi_f08` module, whose procedures call Open
// MPI's ompi_*_f functions (the same arguments, handles as integers) across
// libraries, where our definitions come first.
#include <dlfcn.h>

#include "interpose/fortran_common.h"
#include "interpose/shim_common.h"

using namespace slimreduce::interpose;

namespace {

using InitFn = void (*)(MPI_Fint*);
using InitThreadFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*);
using FinalizeFn = void (*)(MPI_Fint*);

}  // namespace

SR_EXPORT void mpi_init_(MPI_Fint* ierr) {
  Runtime& runtime = mpi_runtime_or_exit();
  static const auto real = real_fortran<InitFn>("pmpi_init_");
  real(ierr);
  start_engine(*ierr, runtime);
}

SR_EXPORT void mpi_init_thread_(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {
  Runtime& runtime = mpi_runtime_or_exit();
  static const auto real = real_fortran<InitThreadFn>("pmpi_init_thread_");
  real(required, provided, ierr);
  start_engine(*ierr, runtime);
}

SR_EXPORT void mpi_allreduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                              MPI_Fint* op, MPI_Fint* comm, MPI_Fint* ierr) {
  // The same call in C terms: what Open MPI's own binding does before PMPI_Allreduce.
  const CSendRecv buffers = c_buffers(sendbuf, recvbuf);
  const void* c_sendbuf = buffers.send;
  void* c_recvbuf = buffers.recv;
  const MPI_Datatype c_datatype = PMPI_Type_f2c(*datatype);
  const MPI_Op c_op = PMPI_Op_f2c(*op);
  const MPI_Comm c_comm = PMPI_Comm_f2c(*comm);
  // The C shim's hot path, for a call that passes through.
  if (Engine::counted_pass_through(*count, c_datatype, c_op, c_comm)) {
    *ierr = PMPI_Allreduce(c_sendbuf, c_recvbuf, *count, c_datatype, c_op, c_comm);
    return;
  }
  Engine* engine = engine_or_null();
  if (!engine) {
    *ierr = PMPI_Allreduce(c_sendbuf, c_recvbuf, *count, c_datatype, c_op, c_comm);
    return;
  }
  *ierr = guarded_on(c_comm, "MPI_ALLREDUCE", [&] {
    return engine->allreduce(c_sendbuf, c_recvbuf, *count, c_datatype, c_op, c_comm);
  });
}

SR_EXPORT void mpi_finalize_(MPI_Fint* ierr) {
  if (Engine* engine = Engine::get()) {
    guarded([&] {
      engine->finish();
      return MPI_SUCCESS;
    });
  }
  static const auto real = real_fortran<FinalizeFn>("pmpi_finalize_");
  real(ierr);
}

// Other compilers' manglings of the same entry points.
#define SR_FORTRAN_ALIASES(lower, upper)                                     \
  SR_EXPORT decltype(lower##_) lower __attribute__((alias(#lower "_")));     \
  SR_EXPORT decltype(lower##_) lower##__ __attribute__((alias(#lower "_"))); \
  SR_EXPORT decltype(lower##_) upper __attribute__((alias(#lower "_")));
SR_FORTRAN_ALIASES(mpi_init, MPI_INIT)
SR_FORTRAN_ALIASES(mpi_init_thread, MPI_INIT_THREAD)
SR_FORTRAN_ALIASES(mpi_allreduce, MPI_ALLREDUCE)
SR_FORTRAN_ALIASES(mpi_finalize, MPI_FINALIZE)

// Open MPI's mpi_f08 module (libmpi_usempif08) reaches these by name.
#define SR_OMPI_F08_ALIAS(name) \
  SR_EXPORT decltype(mpi_##name##_) ompi_##name##_f __attribute__((alias("mpi_" #name "_")));
SR_OMPI_F08_ALIAS(init)
SR_OMPI_F08_ALIAS(init_thread)
SR_OMPI_F08_ALIAS(allreduce)
SR_OMPI_F08_ALIAS(finalize)
