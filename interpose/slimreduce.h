/* SlimReduce's own C API: optional. A job under LD_PRELOAD needs none of it;
 * tools and tests use it to read counters. Resolve with dlsym(RTLD_DEFAULT, ...)
 * when the library may be absent. */
#ifndef SLIMREDUCE_H_
#define SLIMREDUCE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct slimreduce_counters {
  uint64_t intercepted;
  uint64_t compressed;
  uint64_t passed_through;
  uint64_t warmup;
  uint64_t ef_cap_fallback;
  uint64_t input_bytes;
  double wire_baseline;
  double wire_sent;
  uint64_t ef_resets; /* residuals dropped because a key's count or datatype changed */
} slimreduce_counters;

/* The NCCL side's counters alone (CUDA builds; an MPI job's report and
 * slimreduce_get_counters already include them). 0, or -1 before any NCCL call. */
int slimreduce_nccl_get_counters(slimreduce_counters* out);

/* "major.minor.patch". */
const char* slimreduce_version(void);

/* Each function below works once SlimReduce's runtime is up: made by MPI_Init,
 * or in a job that uses NCCL without MPI (torchrun, DDP) by the first NCCL
 * call. Before that they return -1 or NULL. One runtime serves both, so a
 * change applies to MPI and NCCL calls alike.
 *
 * This rank's counters so far (MPI and NCCL calls together).
 * Returns 0, or -1 before the runtime is up. */
int slimreduce_get_counters(slimreduce_counters* out);

/* One of this rank's counters by its report key (docs/configuration.md):
 * "calls.compressed", "calls.overflow_rescued", "bytes.wire_sent",
 * "bytes.inter_node_sent", ...: every key of the JSON report, including those
 * added after slimreduce_counters was fixed. Returns 0, or -1 for an unknown
 * key or before the runtime is up. */
int slimreduce_get_counter(const char* key, double* value);

/* The compressor in effect ("none", "fp16", ...), or NULL before the runtime is up. */
const char* slimreduce_compressor(void);

/* Switches the compressor ("none", "fp16", "bf16", "topk", ...) and drops all
 * error-feedback residuals. Collective in spirit: every rank must call it at
 * the same point of its call sequence, with no reduction of its own in flight.
 * Returns 0, or -1 for an unknown name or before the runtime is up. The other
 * settings (ratio, thresholds) stay as the environment set them. */
int slimreduce_set_compressor(const char* name);

/* Sets the top-k ratio (0 < ratio <= 1) for the calls that follow, with the
 * same rule as slimreduce_set_compressor (every rank, same point; residuals
 * dropped). With SLIMREDUCE_ADAPTIVE, top-k has this one level from then on.
 * Returns 0, or -1 for a ratio out of range or before the runtime is up. */
int slimreduce_set_topk_ratio(double ratio);

/* Sets PowerSGD's rank (1 <= rank <= 64) for the calls that follow, with the
 * same rule (every rank, same point; residuals and warm-start state dropped);
 * with SLIMREDUCE_ADAPTIVE, PowerSGD has this one level from then on.
 * Returns 0, or -1 for a rank out of range or before the runtime is up. */
int slimreduce_set_powersgd_rank(int rank);

/* The effective value of setting `name` (for example "SLIMREDUCE_MIN_BYTES"),
 * as the INFO log shows it, copied into value[size]. Returns 0, or -1 for an
 * unknown name, a too-small buffer, or before the runtime is up. */
int slimreduce_get_setting(const char* name, char* value, size_t size);

/* ---- The native API, for a framework that integrates directly (libslimreduce.so
 * only; declared when <mpi.h> is included first). ----
 *
 * Queues an in-place float32 SUM allreduce of `count` values at `buffer` over
 * `comm`, as MPI_Iallreduce(MPI_IN_PLACE, ...) would, under `name`: the
 * tensor's error-feedback residual is keyed by (comm, name), not by the
 * buffer's address, so a framework may hand over a different buffer each
 * step. Eligible calls are compressed and fused with the other queued ones
 * (docs/architecture.md, "Fusion"); the others pass through. A flush reduces
 * higher `priority` first (0 is MPI_Iallreduce's), then by SLIMREDUCE_PRIORITY
 * (call order, or reversed), and completes each fused buffer's tensors as soon
 * as it ran. Every rank must
 * enqueue the same tensors in the same order. `buffer` must stay untouched
 * until slimreduce_synchronize returns. Returns 0 (MPI_SUCCESS) or an MPI
 * error code. */
#ifdef MPI_VERSION
int slimreduce_enqueue(const char* name, float* buffer, size_t count, MPI_Comm comm, int priority);

/* The same for a tensor of `rows` x `cols` floats, row-major (a layer's
 * weights: rows = its first dimension, cols = the product of the others).
 * A low-rank compressor (SLIMREDUCE_COMPRESSOR=powersgd) views it as that
 * matrix rather than choosing a view of rows x cols flat floats
 * (docs/architecture.md, "Low rank"); other compressors see rows x cols
 * floats. Every rank must pass the same shape. rows or cols 0: MPI_ERR_COUNT. */
int slimreduce_enqueue_matrix(const char* name, float* buffer, size_t rows, size_t cols,
                              MPI_Comm comm, int priority);

/* Completes every tensor enqueued on `comm`: their sums are in their buffers
 * on return. Collective over `comm`. Returns 0 or an MPI error code. */
int slimreduce_synchronize(MPI_Comm comm);
#endif

#ifdef __cplusplus
}
#endif

#endif /* SLIMREDUCE_H_ */
