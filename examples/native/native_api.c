/* The native API (interpose/slimreduce.h), as a framework that integrates
 * directly would use it: a least-squares model of three named parameter
 * tensors, trained data-parallel. Each step every rank computes its
 * gradients on its own shard, hands them to slimreduce_enqueue by name (the
 * framework's tensors may move between steps: their error-feedback residual
 * follows the name), and slimreduce_synchronize returns with the sums, which
 * SlimReduce compressed and fused into few collectives.
 *
 * Build: linked against libslimreduce.so ahead of MPI (examples/CMakeLists.txt).
 * Run:   SLIMREDUCE_COMPRESSOR=fp16 mpirun -np 2 ./native_api [steps]
 * Prints the loss before and after, and what was fused; exits 1 if the loss
 * did not fall to a tenth or nothing was fused. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "interpose/slimreduce.h"

enum { kTensors = 3, kSamples = 64 };
static const size_t kSizes[kTensors] = {40000, 25000, 3000};
static const char* kNames[kTensors] = {"encoder.weight", "decoder.weight", "head.bias"};

/* The target each tensor is fitted to, and a rank's sample i's noise scale. */
static float target(int t, size_t j) { return (float)sin(0.001 * (double)j + t); }

/* Mean squared distance of the parameters to their targets. */
static double loss_of(float* params[kTensors]) {
  double sum = 0;
  size_t n = 0;
  for (int t = 0; t < kTensors; ++t) {
    for (size_t j = 0; j < kSizes[t]; ++j) {
      const double d = params[t][j] - target(t, j);
      sum += d * d;
    }
    n += kSizes[t];
  }
  return sum / (double)n;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int steps = argc > 1 ? atoi(argv[1]) : 30;
  float* params[kTensors];
  for (int t = 0; t < kTensors; ++t) params[t] = calloc(kSizes[t], sizeof(float));
  const double before = loss_of(params);
  srand(1234u + (unsigned)rank);
  for (int step = 0; step < steps; ++step) {
    /* Fresh gradient buffers each step, as a framework's allocator may give. */
    float* grads[kTensors];
    for (int t = 0; t < kTensors; ++t) {
      grads[t] = malloc(kSizes[t] * sizeof(float));
      for (size_t j = 0; j < kSizes[t]; ++j) {
        const float noise = (float)(rand() % 1000 - 500) * 1e-4f; /* this rank's shard */
        grads[t][j] = (params[t][j] - target(t, j) + noise) / (float)ranks;
      }
      const int rc = slimreduce_enqueue(kNames[t], grads[t], kSizes[t], MPI_COMM_WORLD, 0);
      if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
    }
    const int rc = slimreduce_synchronize(MPI_COMM_WORLD);
    if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
    for (int t = 0; t < kTensors; ++t) {
      for (size_t j = 0; j < kSizes[t]; ++j) params[t][j] -= 0.2f * grads[t][j];
      free(grads[t]);
    }
  }
  const double after = loss_of(params);
  double batches = 0, carried = 0;
  slimreduce_get_counter("calls.fused_batches", &batches);
  slimreduce_get_counter("calls.fused_tensors", &carried);
  if (rank == 0) {
    printf("loss %.6f -> %.6f after %d steps; %.0f fused batches carried %.0f tensors on rank 0\n",
           before, after, steps, batches, carried);
  }
  for (int t = 0; t < kTensors; ++t) free(params[t]);
  MPI_Finalize();
  return after < before / 10 && batches >= 1 ? 0 : 1;
}
