// A sharded compressor (int8) on device buffers on the MPI path
// (DeviceKernels::sharded): its parts made on the GPU and its owners'
// results decoded there, only those bytes staged through pinned memory; the
// exchange and each owner's step (decode its shard's parts, sum in rank
// order, compress again with the owner-side residual) are
// algorithms::ShardedAllreduce's communicate phase on the host, as for host
// buffers. The parts and results are the host path's bytes (the kernels give
// their CPU twins' bits), so device- and host-buffer ranks interoperate.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "algorithms/sharded.h"
#include "core/gpu/cuda_support.h"
#include "core/mpi/device_staging_internal.h"

namespace slimreduce::device_staging {
namespace {

class StagedShardedStep final : public scheduler::Step {
 public:
  // device: device_bytes() of device memory, the step's own.
  StagedShardedStep(const StagedCall& job, compressors::ShardedCompressor& compressor,
                    float* owner_residual, std::byte* wire, std::byte* scratch, std::byte* device)
      : job_(job),
        compressor_(compressor),
        sharded_(job.transport, compressor, job.call.count, owner_residual, wire, scratch,
                 job.call.draw),
        device_parts_(device),
        device_results_(device + round256(sharded_.parts_bytes())) {}

  // Device memory for a piece of n values: its parts, then every owner's
  // result (within the algorithm's wire bytes, which hold both and more).
  static std::size_t device_bytes(const compressors::ShardedCompressor& codec, std::size_t n,
                                  int ranks, int rank) {
    return round256(codec.parts_capacity(n, ranks)) +
           algorithms::ShardedAllreduce::wire_bytes(codec, n, ranks, rank);
  }

  // The parts on the GPU, then to the algorithm's pinned send buffer.
  Status compress() override {
    const DeviceGuard guard(job_.device.device);  // on the pipeline's helper too
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    const auto& bounds = sharded_.bounds();
    SLIMREDUCE_TRY(cuda_status(compressor_.device_compress_parts(
        job_.call.input, job_.residual, job_.call.count, bounds.data(), ranks(), device_parts_,
        nullptr, nullptr, stream(), sharded_.draw())));
    SLIMREDUCE_TRY(
        cuda_status(cudaMemcpyAsync(sharded_.parts(), device_parts_, sharded_.parts_bytes(),
                                    cudaMemcpyDeviceToHost, stream())));
    sharded_.parts_written(job_.residual != nullptr);
    return sync(job_);
  }
  Status communicate() override { return sharded_.communicate(); }
  // Every owner's result to the GPU, decoded into the output.
  Status finish() override {
    const DeviceGuard guard(job_.device.device);  // on the pipeline's helper too
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    const std::size_t bytes = sharded_.slot_bytes() * static_cast<std::size_t>(ranks());
    SLIMREDUCE_TRY(cuda_status(cudaMemcpyAsync(device_results_, sharded_.results(), bytes,
                                               cudaMemcpyHostToDevice, stream())));
    SLIMREDUCE_TRY(cuda_status(compressor_.device_decode_results(
        device_results_, sharded_.slot_bytes(), job_.call.count, sharded_.bounds().data(), ranks(),
        job_.call.output, 1, nullptr, stream())));
    return sync(job_);
  }
  double wire_sent() const override { return sharded_.wire_sent(); }
  // Kernels and copies alone: the exchange and the owners' step are communicate().
  bool local_phases() const override { return true; }

 private:
  cudaStream_t stream() const { return job_.stream(); }
  int ranks() const { return job_.transport.size(); }

  const StagedCall& job_;
  compressors::ShardedCompressor& compressor_;
  algorithms::ShardedAllreduce sharded_;
  std::byte* device_parts_;
  std::byte* device_results_;
};

}  // namespace

Status staged_sharded(const StagedCall& job, compressors::ShardedCompressor& compressor,
                      Reduced* reduced) {
  using algorithms::ShardedAllreduce;
  const int ranks = job.transport.size(), rank = job.transport.rank();
  const auto pieces = pieces_of(job.call.count, compressor, job.options.partition_bytes);
  std::vector<std::size_t> counts;
  for (const scheduler::Partition& piece : pieces) counts.push_back(piece.count);
  // Each piece's stretch of each buffer, and its owner-side residual: its
  // stretch of the key's state, laid out as the host path lays it (with error feedback).
  std::size_t wire_total = 0, scratch_total = 0, device_total = 0;
  const auto wire_at = piece_offsets(
      pieces,
      [&](std::size_t n) { return ShardedAllreduce::wire_bytes(compressor, n, ranks, rank); },
      &wire_total);
  const auto scratch_at = piece_offsets(
      pieces,
      [&](std::size_t n) { return ShardedAllreduce::scratch_bytes(compressor, n, ranks, rank); },
      &scratch_total);
  const auto device_at = piece_offsets(
      pieces,
      [&](std::size_t n) { return StagedShardedStep::device_bytes(compressor, n, ranks, rank); },
      &device_total);
  const std::vector<float*> owner_residuals = slimreduce::owner_residuals(
      job.call.state, job.residual != nullptr, compressor, ranks, rank, counts);
  std::byte* wire = grow(job.device.host_in, wire_total, true);
  std::byte* scratch = job.state.scratch(scratch_total);
  std::byte* device = grow(job.device.wire, device_total, false);
  if (!wire || !scratch || !device) return Status::no_memory();
  SLIMREDUCE_TRY(run_pieces(job, pieces, reduced, [&](const StagedCall& piece, std::size_t i) {
    return std::make_unique<StagedShardedStep>(piece, compressor, owner_residuals[i],
                                               wire + wire_at[i], scratch + scratch_at[i],
                                               device + device_at[i]);
  }));
  reduced->sharded = true;
  return {};
}

}  // namespace slimreduce::device_staging
