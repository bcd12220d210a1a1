/* The dense ring's summation order, bit for bit (docs/architecture.md, "Dense
 * (fp16, bf16)"): chunk c of [floor(n*c/p), floor(n*(c+1)/p)) starts from rank
 * c's 16-bit value and adds ranks c+1, c+2, ... (mod p), each add in fp32 and
 * rounded back to 16 bits. Every rank draws every rank's input, computes that
 * order here in plain C (fp16 through the compiler's _Float16, bf16 rounded by
 * hand), and requires MPI_Allreduce to give exactly those bits. The inputs span
 * wide magnitudes, so the order matters: the ring walked the other way (c, c-1,
 * ...) must differ somewhere for p >= 3, or a wrong order could pass unseen.
 * Run under LD_PRELOAD with SLIMREDUCE_COMPRESSOR=fp16 or bf16,
 * SLIMREDUCE_MIN_BYTES=4, SLIMREDUCE_ERROR_FEEDBACK=0.
 * Exit 0: all match; 1: a mismatch; 2: bad usage. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interpose/slimreduce.h"

typedef enum { kFp16, kBf16 } Format;

static Format format;
static int rank, ranks;

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* bf16: round to nearest, ties to even, on the bit pattern (no NaN arises here). */
static uint16_t bf16_round(float f) {
  const uint32_t u = bits_of(f);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static uint16_t round16(float f) {
  if (format == kBf16) return bf16_round(f);
  const _Float16 h = (_Float16)f; /* one IEEE rounding, to nearest even */
  uint16_t u;
  memcpy(&u, &h, sizeof u);
  return u;
}

static float widen(uint16_t u) {
  if (format == kBf16) return float_of((uint32_t)u << 16);
  _Float16 h;
  memcpy(&h, &u, sizeof h);
  return (float)h;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Rank r's element i of the call with this seed: random sign and mantissa.
 * Magnitudes range widely from element to element (fp16: 2^-25, in its
 * subnormals, to 2^12, so that no sum of 4 ranks overflows; bf16: 2^-28 to
 * 2^21), but the ranks' values of one element lie within a few binades of each
 * other (of the format's precision): there, which two meet first changes the
 * rounding, so most elements tell one summation order from another. */
static float input_of(int r, uint64_t seed, size_t i) {
  const uint64_t element = splitmix64(seed ^ splitmix64((uint64_t)i));
  const uint64_t h = splitmix64(element ^ splitmix64((uint64_t)r << 40));
  const int low = format == kFp16 ? -14 : -20, high = format == kFp16 ? 11 : 20;
  const int spread = format == kFp16 ? 12 : 9;
  const int base = low + (int)((element >> 32) % (uint64_t)(high - low + 1));
  const int exponent = base - (int)((h >> 32) % (uint64_t)spread);
  const uint32_t mantissa = (uint32_t)h & 0x7fffffu;
  const uint32_t sign = (uint32_t)(h >> 63) << 31;
  return float_of(sign | (uint32_t)(exponent + 127) << 23 | mantissa);
}

static size_t chunk_begin(size_t n, int c) { return (size_t)((uint64_t)n * c / ranks); }

/* Element i of chunk c, summed from rank c in direction step (+1: the
 * documented ring; -1: the other way round). */
static float reduced(uint64_t seed, size_t i, int c, int step) {
  uint16_t sum = round16(input_of(c, seed, i));
  for (int hop = 1; hop < ranks; ++hop) {
    const int r = ((c + step * hop) % ranks + ranks) % ranks;
    sum = round16(widen(sum) + widen(round16(input_of(r, seed, i))));
  }
  return widen(sum);
}

typedef struct {
  size_t mismatches;  /* result bits != the documented order's bits */
  size_t order_tells; /* elements where the two directions differ */
} Tally;

static Tally check(const float* got, size_t n, uint64_t seed) {
  Tally t = {0, 0};
  for (int c = 0; c < ranks; ++c) {
    for (size_t i = chunk_begin(n, c); i < chunk_begin(n, c + 1); ++i) {
      const float want = reduced(seed, i, c, +1);
      if (bits_of(got[i]) != bits_of(want) && t.mismatches++ == 0) {
        printf("rank %d: n %zu element %zu (chunk %d): got %a (0x%08x), want %a (0x%08x)\n", rank,
               n, i, c, got[i], bits_of(got[i]), want, bits_of(want));
      }
      t.order_tells += bits_of(reduced(seed, i, c, -1)) != bits_of(want);
    }
  }
  return t;
}

/* One MPI_Allreduce of n elements (in place or not), checked; returns the failures. */
static int one_call(size_t n, int in_place, uint64_t seed) {
  float* send = malloc(n * sizeof(float));
  float* recv = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) send[i] = input_of(rank, seed, i);
  if (in_place) memcpy(recv, send, n * sizeof(float));
  MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const Tally t = check(recv, n, seed);
  free(send);
  free(recv);
  /* Only where enough elements make the rounding order show for certain. */
  const int order_blind = ranks >= 3 && n >= 4099 && t.order_tells == 0;
  if (rank == 0 || t.mismatches) {
    printf("rank %d: n %zu%s: %zu mismatches, %zu elements where the order shows\n", rank, n,
           in_place ? " (in place)" : "", t.mismatches, t.order_tells);
  }
  if (order_blind) printf("rank %d: n %zu: the inputs cannot tell the order\n", rank, n);
  return (t.mismatches != 0) + order_blind;
}

static int compressed_calls(void) {
  typedef int (*Get)(slimreduce_counters*);
  const Get get = (Get)dlsym(RTLD_DEFAULT, "slimreduce_get_counters");
  slimreduce_counters counters = {0};
  return get && get(&counters) == 0 ? (int)counters.compressed : -1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const char* name = getenv("SLIMREDUCE_COMPRESSOR");
  if (!name || (strcmp(name, "fp16") != 0 && strcmp(name, "bf16") != 0)) {
    if (rank == 0) printf("usage: SLIMREDUCE_COMPRESSOR must be fp16 or bf16\n");
    MPI_Finalize();
    return 2;
  }
  format = strcmp(name, "fp16") == 0 ? kFp16 : kBf16;
  /* Counts not divisible by the ranks, and smaller than them (empty chunks). */
  const size_t counts[] = {1000003, 4099, 4096, 7, 2, 1};
  const int calls = sizeof counts / sizeof counts[0] + 1;
  const int compressed_before = compressed_calls();
  int failed = 0;
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
    failed += one_call(counts[k], 0, 1000 + k);
  }
  failed += one_call(4099, 1, 2000);
  /* Each call must have gone through the ring: a pass-through would not match anyway,
   * but this says why. */
  const int compressed = compressed_calls() - compressed_before;
  if (compressed != calls) {
    printf("rank %d: %d of %d calls compressed\n", rank, compressed, calls);
    ++failed;
  }
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("ring_order_job: %d ranks, %s: %d calls, %d failed checks\n", ranks, name, calls,
           failed);
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}
