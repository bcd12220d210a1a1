// The extern "C" boundary for MPI: in both MPI families (Open MPI, MPICH) the
// MPI_* are weak aliases of PMPI_*, so defining them here (LD_PRELOAD) sees
// every call. Each shim classifies nothing itself: it hands the call to the
// engine, or forwards it unchanged when there is no engine. No exception
// crosses this boundary.
#include "interpose/shim_common.h"

using namespace slimreduce::interpose;

SR_EXPORT int MPI_Init(int* argc, char*** argv) {
  Runtime& runtime = mpi_runtime_or_exit();
  return start_engine(PMPI_Init(argc, argv), runtime);
}

SR_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  Runtime& runtime = mpi_runtime_or_exit();
  return start_engine(PMPI_Init_thread(argc, argv, required, provided), runtime);
}

namespace slimreduce::interpose {

[[gnu::noinline]] int allreduce_through_engine(const void* sendbuf, void* recvbuf, int count,
                                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  Engine* engine = engine_or_null();
  if (!engine) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  return guarded_on(comm, "MPI_Allreduce",
                    [&] { return engine->allreduce(sendbuf, recvbuf, count, datatype, op, comm); });
}

int iallreduce_through_engine(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                              MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  Engine* engine = engine_or_null();
  if (!engine) return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  return guarded_on(comm, "MPI_Iallreduce", [&] {
    return engine->iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  });
}

}  // namespace slimreduce::interpose

SR_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm) {
  // A call that passes through is counted and handed over with no frame of
  // ours left on the stack (a tail call): interposition must not be seen.
  if (Engine::counted_pass_through(count, datatype, op, comm)) [[likely]] {
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  }
  return allreduce_through_engine(sendbuf, recvbuf, count, datatype, op, comm);
}

SR_EXPORT int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return iallreduce_through_engine(sendbuf, recvbuf, count, datatype, op, comm, request);
}

SR_EXPORT int MPI_Finalize() {
  if (Engine* engine = Engine::get()) {
    const int rc = guarded([&] {
      engine->finish();
      return MPI_SUCCESS;
    });
    if (rc != MPI_SUCCESS) std::fprintf(stderr, "slimreduce: error: report failed (%d)\n", rc);
  }
  return PMPI_Finalize();
}
