#include "core/nccl_sharded.h"

#include <cuda_runtime_api.h>

#include "algorithms/sharded.h"
#include "algorithms/wire_bytes.h"
#include "backends/nccl_transport.h"
#include "core/cuda_support.h"
#include "core/device_memory.h"

namespace slimreduce {
namespace {

using algorithms::ShardedAllreduce;

compressors::ShardedCompressor& sharded(compressors::Compressor& compressor) {
  return static_cast<compressors::ShardedCompressor&>(compressor);
}
const compressors::ShardedCompressor& sharded(const compressors::Compressor& compressor) {
  return static_cast<const compressors::ShardedCompressor&>(compressor);
}

// A call's region: [the algorithm's wire buffers | its scratch].
struct Region {
  std::size_t wire, scratch, bytes;
  Region(const CallPlan& p, const compressors::Compressor& compressor) {
    const auto& codec = sharded(compressor);
    const std::size_t count = p.call.count;
    wire = round256(ShardedAllreduce::wire_bytes(codec, count, p.comm->size, p.comm->rank));
    scratch = round256(ShardedAllreduce::scratch_bytes(codec, count, p.comm->size, p.comm->rank));
    bytes = wire + scratch;
  }
};

class ShardedStep final : public scheduler::Step {
 public:
  ShardedStep(const CallPlan& p, compressors::ShardedCompressor& compressor)
      : compressor_(compressor),
        input_(static_cast<const float*>(p.call.sendbuff)),
        output_(static_cast<float*>(p.call.recvbuff)),
        residual_(p.residual),
        count_(p.call.count),
        device_(p.comm->device),
        divisor_(p.call.verdict.average ? p.comm->size : 1),
        stream_(static_cast<cudaStream_t>(p.call.stream)),
        transport_(p.comm->comm, p.comm->rank, p.comm->size, stream_),
        sharded_(transport_, compressor, count_, owner_residual_of(p), p.region,
                 p.region + Region(p, compressor).wire) {
    sharded_.owner_on_device(compressor, stream_);
  }

  // Before the group's collectives: the parts, on the device.
  Status compress() override {
    DeviceGuard guard(device_);
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    sharded_.parts_written(residual_ != nullptr);
    return Status::cuda(compressor_.device_compress_parts(
        input_, residual_, count_, sharded_.bounds().data(), ranks(), sharded_.parts(), stream_));
  }
  // Nothing among the group's collectives (the header says why).
  Status communicate() override { return {}; }
  // After the group ended, in stream order: the exchange, the owners' step,
  // the allgather, and every owner's result decoded into the output.
  Status finish() override {
    DeviceGuard guard(device_);
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    SLIMREDUCE_TRY(sharded_.communicate());
    return Status::cuda(compressor_.device_decode_results(sharded_.results(), sharded_.slot_bytes(),
                                                          count_, sharded_.bounds().data(), ranks(),
                                                          output_, divisor_, stream_));
  }
  double wire_sent() const override { return sharded_.wire_sent(); }

 private:
  static float* owner_residual_of(const CallPlan& p) {
    return p.residual ? p.residual + p.call.count : nullptr;
  }
  int ranks() const { return transport_.size(); }

  compressors::ShardedCompressor& compressor_;
  const float* input_;
  float* output_;
  float* residual_;  // then the owner-side residual (sharded_key_floats)
  std::size_t count_;
  int device_;
  int divisor_;
  cudaStream_t stream_;
  backends::NcclTransport transport_;
  ShardedAllreduce sharded_;  // over transport_: declared after it
};

}  // namespace

std::size_t sharded_key_floats(const compressors::Compressor& compressor, std::size_t count,
                               int ranks, int rank) {
  return count + ShardedAllreduce::owned_count(sharded(compressor), count, ranks, rank);
}

std::size_t sharded_region_bytes(const CallPlan& p, const compressors::Compressor& compressor) {
  return Region(p, compressor).bytes;
}

double sharded_wire_sent(const CallPlan& p, const compressors::Compressor& compressor) {
  return ShardedAllreduce::fixed_wire_sent(sharded(compressor), p.call.count, p.comm->size,
                                           p.comm->rank);
}

std::unique_ptr<scheduler::Step> sharded_step(const CallPlan& p,
                                              compressors::Compressor& compressor) {
  return std::make_unique<ShardedStep>(p, sharded(compressor));
}

}  // namespace slimreduce
