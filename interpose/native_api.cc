// The native API (interpose/slimreduce.h) of libslimreduce.so: enqueue named
// tensors, then synchronize, for a framework that integrates directly rather
// than through MPI_Iallreduce. No exception crosses this boundary.
#include "interpose/shim_common.h"
#include "interpose/slimreduce.h"

using namespace slimreduce::interpose;

SR_EXPORT int slimreduce_enqueue(const char* name, float* buffer, size_t count, MPI_Comm comm,
                                 int priority) {
  Engine* engine = engine_or_null();
  if (!engine) return MPI_ERR_OTHER;  // before MPI_Init or after MPI_Finalize
  return guarded_on(comm, "slimreduce_enqueue",
                    [&] { return engine->enqueue_named(name, buffer, count, 0, comm, priority); });
}

SR_EXPORT int slimreduce_enqueue_matrix(const char* name, float* buffer, size_t rows, size_t cols,
                                        MPI_Comm comm, int priority) {
  Engine* engine = engine_or_null();
  if (!engine) return MPI_ERR_OTHER;
  return guarded_on(comm, "slimreduce_enqueue_matrix", [&]() -> int {
    // rows x cols past size_t, or one of them 0 with the other not: an error,
    // never a wrapped count.
    if (rows == 0 || cols == 0 || rows > SIZE_MAX / cols) {
      return engine->raise(comm, MPI_ERR_COUNT, "slimreduce_enqueue_matrix");
    }
    return engine->enqueue_named(name, buffer, rows * cols, rows, comm, priority);
  });
}

SR_EXPORT int slimreduce_synchronize(MPI_Comm comm) {
  Engine* engine = engine_or_null();
  if (!engine) return MPI_ERR_OTHER;
  return guarded_on(comm, "slimreduce_synchronize", [&] { return engine->synchronize(comm); });
}
