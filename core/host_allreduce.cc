#include "core/host_allreduce.h"

#include <memory>

#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "scheduler/host_step.h"
#include "scheduler/plan.h"

namespace slimreduce {
namespace {

using scheduler::HostStep;

std::unique_ptr<scheduler::Step> summable(const AllreduceCall& call,
                                          compressors::SummableCompressor& compressor,
                                          backends::Transport& transport, CommState& state) {
  using algorithms::CastRing;
  std::byte* wire = state.wire(CastRing::wire_bytes(compressor, call.count));
  std::byte* scratch =
      state.scratch(CastRing::scratch_bytes(compressor, call.count, transport.size()));
  return std::make_unique<HostStep<CastRing>>(call.input, call.residual, call.output, transport,
                                              compressor, call.count, wire, scratch);
}

std::unique_ptr<scheduler::Step> gathered(const AllreduceCall& call,
                                          compressors::GatheredCompressor& compressor,
                                          backends::Transport& transport, CommState& state) {
  const std::size_t payload_bytes = compressor.compressed_bytes(call.count);
  std::byte* payload = state.scratch(payload_bytes);
  std::byte* gathered = state.wire(payload_bytes * transport.size());
  return std::make_unique<HostStep<algorithms::GatheredAllreduce>>(
      call.input, call.residual, call.output, transport, compressor, call.count, payload_bytes,
      payload, gathered);
}

}  // namespace

// A plan of one step, run as every blocking plan is.
Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, double* wire_sent) {
  scheduler::Plan plan;
  if (compressor.aggregation() == compressors::Aggregation::summable) {
    plan.add(summable(call, static_cast<compressors::SummableCompressor&>(compressor), transport,
                      state));
  } else {
    plan.add(gathered(call, static_cast<compressors::GatheredCompressor&>(compressor), transport,
                      state));
  }
  SLIMREDUCE_TRY(scheduler::run_blocking(plan));
  *wire_sent = plan.wire_sent();
  return {};
}

}  // namespace slimreduce
