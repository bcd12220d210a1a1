// One compressed allreduce of host buffers (or of fp32 staged through pinned
// host memory), with the algorithm the compressor's aggregation picks:
// algorithms/cast_ring.h for a summable one, algorithms/gathered.h for a
// gathered one, over the communicator's transport. The same choice on every
// rank: it reads only the compressor.
#pragma once

#include <cstddef>

#include "backends/transport.h"
#include "compressors/compressor.h"
#include "core/comm_state.h"
#include "scheduler/plan.h"

namespace slimreduce {

struct AllreduceCall {
  const float* input;  // sendbuf, or recvbuf for MPI_IN_PLACE
  float* output;
  std::size_t count;
  float* residual;  // nullptr: no error feedback
};

// What a compressed call did, for the report.
struct Reduced {
  double wire_sent = 0;           // bytes this rank handed to the transport
  bool overflow_rescued = false;  // rerun with a wider wire (algorithms/rescued_cast_ring.h)
};

// Leaves the sum in call.output, bit-identical on every rank. Workspace is
// the communicator's, all taken before the compress step writes the residual.
Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, Reduced* reduced);
// The same, telling `observer` (the timeline's, or nullptr) of each phase.
Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, Reduced* reduced,
                      scheduler::PhaseObserver* observer);

}  // namespace slimreduce
