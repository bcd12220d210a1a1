/* SlimReduce's own C API: optional. A job under LD_PRELOAD needs none of it;
 * tools and tests use it to read counters. Resolve with dlsym(RTLD_DEFAULT, ...)
 * when the library may be absent. */
#ifndef SLIMREDUCE_H_
#define SLIMREDUCE_H_

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
} slimreduce_counters;

/* "major.minor.patch". */
const char* slimreduce_version(void);

/* This rank's counters so far. Returns 0, or -1 before MPI is initialized. */
int slimreduce_get_counters(slimreduce_counters* out);

/* The compressor in effect ("none", "fp16", ...), or NULL before MPI is initialized. */
const char* slimreduce_compressor(void);

/* Switches the compressor ("none", "fp16", "bf16", "topk", ...) and drops all
 * error-feedback residuals. Collective in spirit: every rank must call it at
 * the same point of its call sequence, with no reduction of its own in flight.
 * Returns 0, or -1 for an unknown name or before MPI is initialized. The other
 * settings (ratio, thresholds) stay as the environment set them. */
int slimreduce_set_compressor(const char* name);

#ifdef __cplusplus
}
#endif

#endif /* SLIMREDUCE_H_ */
