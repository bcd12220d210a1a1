// One compressed allreduce of host buffers (or of fp32 staged through pinned
// host memory), with the algorithm the compressor's aggregation picks:
// algorithms/cast_ring.h for a summable one, algorithms/gathered.h for a
// gathered one, algorithms/powersgd.h for a low-rank one (never cut into
// partitions: one matrix, one Q), algorithms/sharded.h for a sharded one or
// where the compressor prefers it (top-k, by its cost model), over the
// communicator's transport. The same choice on every rank: it reads only the
// compressor, the count and the rank count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/transport.h"
#include "compressors/compressor.h"
#include "core/mpi/comm_state.h"
#include "scheduler/partition.h"
#include "scheduler/pipeline.h"
#include "scheduler/plan.h"

namespace slimreduce {

struct AllreduceCall {
  const float* input;  // sendbuf, or recvbuf for MPI_IN_PLACE
  float* output;
  std::size_t count;
  float* residual;  // nullptr: no error feedback
  // The key's compressor state (core/runtime/residuals.h), nullptr: none kept.
  std::vector<float>* state = nullptr;
  std::size_t rows = 0;  // the tensor's real row count (the native API's), or 0
  // The call's number among its shape's and this rank's (CallDecision's
  // shape_call, the communicator's rank): a stochastic quantizer's draw.
  compressors::CallDraw draw = {};
};

// What a compressed call did, for the report.
struct Reduced {
  double wire_sent = 0;           // bytes this rank handed to the transport
  bool overflow_rescued = false;  // rerun with a wider wire (algorithms/rescued_cast_ring.h)
  std::size_t partitions = 1;     // the pieces it was reduced in (scheduler/partition.h)
  bool sharded = false;           // by algorithms/sharded.h (else by the compressor's aggregation)
};

// How a call is cut and run (docs/architecture.md, "Partitions and pipelining").
struct RunOptions {
  std::uint64_t partition_bytes = 0;             // 0: never cut
  scheduler::HelperPool* helpers = nullptr;      // nullptr: partitions one after another
  scheduler::PhaseObserver* observer = nullptr;  // the timeline's, or nullptr
  // Flat even on a communicator that spans nodes (CallDecision::flat).
  bool flat = false;
};

// Whether a flat call of count values over `ranks` goes sharded
// (algorithms/sharded.h): the compressor's answer, the same on every rank.
bool reduces_sharded(compressors::Compressor& compressor, std::size_t count, int ranks);

// The pieces a flat call of count values is reduced in (scheduler/partition.h):
// cut by partition_bytes (0: never), never a low-rank call (one matrix, one
// Q). Host- and device-buffer calls are cut alike, so that their ranks run the
// same collectives and get the same bits.
std::vector<scheduler::Partition> pieces_of(std::size_t count,
                                            const compressors::Compressor& compressor,
                                            std::uint64_t partition_bytes);

// Where each sharded piece's owner-side residual lies in the key's state
// (the pieces' owned shards back to back; zeroed when the layout is new):
// nullptr each without error feedback or a key.
std::vector<float*> owner_residuals(std::vector<float>* state, bool feeds_back,
                                    const compressors::ShardedCodec& codec, int ranks, int rank,
                                    const std::vector<std::size_t>& counts);

// Runs a call's plan (its pieces' steps, host or device buffers alike):
// pipelined where options.helpers gives a helper thread and every step's
// compress and finish are local, else step after step (the same bits), its
// phases told to options.observer; *reduced gets the bytes handed to the
// transport, whether an overflow was rescued, and the pieces.
Status run_plan(const scheduler::Plan& plan, const RunOptions& options, Reduced* reduced);

// Leaves the sum in call.output, bit-identical on every rank. Workspace is
// the communicator's, all taken before the first compress step writes a
// residual. A call larger than options.partition_bytes is reduced in
// partitions (not on a hierarchical communicator: its phases communicate
// inside the node, so they stay on the caller's thread, whole).
Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, const RunOptions& options,
                      Reduced* reduced);
// The same, whole and unobserved.
Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, Reduced* reduced);

}  // namespace slimreduce
