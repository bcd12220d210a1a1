#include "core/nccl/sharded.h"

#include <cuda_runtime_api.h>

#include "algorithms/sharded.h"
#include "algorithms/wire_bytes.h"
#include "backends/nccl_transport.h"
#include "core/gpu/cuda_support.h"
#include "core/gpu/device_memory.h"

namespace slimreduce {
namespace {

using algorithms::ShardedAllreduce;

const compressors::ShardedCodec& codec_of(const compressors::Compressor& compressor) {
  return *compressor.sharded_codec();
}

// A call's region: [the algorithm's wire buffers | its scratch | the codec's device scratch].
struct Region {
  std::size_t wire, scratch, device, bytes;
  Region(const CallPlan& p, const compressors::Compressor& compressor) {
    const auto& codec = codec_of(compressor);
    const std::size_t count = p.call.count;
    const int ranks = p.comm->size;
    wire = round256(ShardedAllreduce::wire_bytes(codec, count, ranks, p.comm->rank));
    scratch = round256(ShardedAllreduce::scratch_bytes(codec, count, ranks, p.comm->rank));
    device = round256(codec.device_scratch_bytes(count, ranks));
    bytes = wire + scratch + device;
  }
};

class ShardedStep final : public scheduler::Step {
 public:
  ShardedStep(const CallPlan& p, compressors::ShardedCodec& codec, const Region& region,
              double* sent_after_run)
      : codec_(codec),
        input_(static_cast<const float*>(p.call.sendbuff)),
        output_(static_cast<float*>(p.call.recvbuff)),
        residual_(p.residual),
        count_(p.call.count),
        device_(p.comm->device),
        divisor_(p.call.verdict.average ? p.comm->size : 1),
        stream_(static_cast<cudaStream_t>(p.call.stream)),
        device_scratch_(p.place.region + region.wire + region.scratch),
        sent_after_run_(codec.part_sizes_vary() ? sent_after_run : nullptr),
        transport_(p.comm->comm, p.comm->rank, p.comm->size, stream_),
        sharded_(transport_, codec, count_, p.piece.owner_residual, p.place.region,
                 p.place.region + region.wire, p.draw) {
    sharded_.owner_on_device(codec, device_scratch_, stream_);
  }

  // Before the group's collectives: the parts (and their sizes), on the device.
  Status compress() override {
    DeviceGuard guard(device_);
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    sharded_.parts_written(residual_ != nullptr);
    return Status::cuda(codec_.device_compress_parts(
        input_, residual_, count_, sharded_.bounds().data(), ranks(), sharded_.parts(),
        sharded_.part_sizes(), device_scratch_, stream_, sharded_.draw()));
  }
  // Nothing among the group's collectives (the header says why).
  Status communicate() override { return {}; }
  // After the group ended, in stream order: the exchange (sizes that vary
  // read back first: a host wait), the owners' step, the allgather, and
  // every owner's result decoded into the output.
  Status finish() override {
    DeviceGuard guard(device_);
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    SLIMREDUCE_TRY(sharded_.communicate());
    if (sent_after_run_) *sent_after_run_ = sharded_.wire_sent();
    return Status::cuda(codec_.device_decode_results(sharded_.results(), sharded_.slot_bytes(),
                                                     count_, sharded_.bounds().data(), ranks(),
                                                     output_, divisor_, device_scratch_, stream_));
  }
  double wire_sent() const override { return sharded_.wire_sent(); }

 private:
  int ranks() const { return transport_.size(); }

  compressors::ShardedCodec& codec_;
  const float* input_;
  float* output_;
  float* residual_;  // then the owner-side residual (sharded_key_floats)
  std::size_t count_;
  int device_;
  int divisor_;
  cudaStream_t stream_;
  std::byte* device_scratch_;
  double* sent_after_run_;  // where sizes vary: the call's bytes, once known
  backends::NcclTransport transport_;
  ShardedAllreduce sharded_;  // over transport_: declared after it
};

}  // namespace

std::size_t sharded_key_floats(const compressors::Compressor& compressor,
                               const std::vector<scheduler::Partition>& pieces, int ranks,
                               int rank) {
  std::size_t floats = 0;
  for (const scheduler::Partition& piece : pieces)
    floats += piece.count + sharded_owned_floats(compressor, piece.count, ranks, rank);
  return floats;
}

std::size_t sharded_owned_floats(const compressors::Compressor& compressor, std::size_t count,
                                 int ranks, int rank) {
  return ShardedAllreduce::owned_count(codec_of(compressor), count, ranks, rank);
}

std::size_t sharded_region_bytes(const CallPlan& p, const compressors::Compressor& compressor) {
  return Region(p, compressor).bytes;
}

double sharded_wire_sent(const CallPlan& p, const compressors::Compressor& compressor) {
  const auto& codec = codec_of(compressor);
  if (codec.part_sizes_vary())
    return 0;  // counted once the sizes are known (GroupPlan::sent_after_run)
  return ShardedAllreduce::fixed_wire_sent(codec, p.call.count, p.comm->size, p.comm->rank);
}

std::unique_ptr<scheduler::Step> sharded_step(const CallPlan& p,
                                              compressors::Compressor& compressor,
                                              double* sent_after_run) {
  return std::make_unique<ShardedStep>(p, *compressor.sharded_codec(), Region(p, compressor),
                                       sent_after_run);
}

}  // namespace slimreduce
