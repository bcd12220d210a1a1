// The algorithms that carry one compressed allreduce: each takes the input,
// compresses it (with the residual, if any), moves it with the real MPI and
// leaves the sum in recvbuf, bit-identical on every rank.
#pragma once

#include <mpi.h>

#include <cstddef>

#include "compressors/compressor.h"
#include "core/comm_state.h"

namespace slimreduce {

struct AllreduceCall {
  const float* input;  // sendbuf, or recvbuf for MPI_IN_PLACE
  float* output;
  std::size_t count;
  float* residual;  // nullptr: no error feedback
};

// Returns the MPI error code; *wire_sent gets the bytes this rank handed to the transport.
using AlgorithmResult = int;

// Flat dense: compress to wire elements, ring reduce-scatter adding in fp32 at
// each hop, ring allgather of the reduced chunks, decompress.
AlgorithmResult ring_allreduce(const AllreduceCall& call,
                               compressors::SummableCompressor& compressor, CommState& comm,
                               double* wire_sent);

// Sparse: compress to a fixed-size payload, allgather, every rank accumulates
// all payloads in rank order into a zeroed output.
AlgorithmResult gather_allreduce(const AllreduceCall& call,
                                 compressors::GatheredCompressor& compressor, CommState& comm,
                                 double* wire_sent);

}  // namespace slimreduce
