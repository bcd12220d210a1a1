#include "core/host_allreduce.h"

#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"

namespace slimreduce {
namespace {

Status summable(const AllreduceCall& call, compressors::SummableCompressor& compressor,
                backends::Transport& transport, CommState& state, double* wire_sent) {
  using algorithms::CastRing;
  std::byte* wire = state.wire(CastRing::wire_bytes(compressor, call.count));
  std::byte* scratch =
      state.scratch(CastRing::scratch_bytes(compressor, call.count, transport.size()));
  CastRing ring(transport, compressor, call.count, wire, scratch);
  SLIMREDUCE_TRY(ring.run(call.input, call.residual, call.output));
  *wire_sent = ring.wire_sent();
  return {};
}

Status gathered(const AllreduceCall& call, compressors::GatheredCompressor& compressor,
                backends::Transport& transport, CommState& state, double* wire_sent) {
  const std::size_t payload_bytes = compressor.compressed_bytes(call.count);
  std::byte* payload = state.scratch(payload_bytes);
  std::byte* gathered = state.wire(payload_bytes * transport.size());
  algorithms::GatheredAllreduce gather(transport, compressor, call.count, payload_bytes, payload,
                                       gathered);
  SLIMREDUCE_TRY(gather.run(call.input, call.residual, call.output));
  *wire_sent = gather.wire_sent();
  return {};
}

}  // namespace

Status host_allreduce(const AllreduceCall& call, compressors::Compressor& compressor,
                      backends::Transport& transport, CommState& state, double* wire_sent) {
  if (compressor.aggregation() == compressors::Aggregation::summable) {
    return summable(call, static_cast<compressors::SummableCompressor&>(compressor), transport,
                    state, wire_sent);
  }
  return gathered(call, static_cast<compressors::GatheredCompressor&>(compressor), transport, state,
                  wire_sent);
}

}  // namespace slimreduce
