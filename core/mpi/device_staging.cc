#include "core/mpi/device_staging.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "algorithms/cast_ring.h"
#include "algorithms/gathered.h"
#include "backends/mpi_backend.h"
#include "backends/mpi_transport.h"
#include "compressors/kind.h"
#include "core/gpu/cuda_support.h"
#include "core/mpi/device_staging_internal.h"
#include "core/runtime/counters.h"
#include "core/runtime/residuals.h"
#include "scheduler/plan.h"

namespace slimreduce::device_staging {
namespace {

// The call's fp32 values through pinned memory (in_buffer, out_buffer):
// copied in, `reduce(in, out)` on the host copies, the result copied back out.
template <class Reduce>
Status through_host(PinnedBuffer& in_buffer, PinnedBuffer& out_buffer, cudaStream_t stream,
                    const AllreduceCall& call, Reduce&& reduce) {
  const std::size_t bytes = call.count * sizeof(float);
  std::byte* in = grow(in_buffer, bytes, true);
  std::byte* out = grow(out_buffer, bytes, true);
  if (!in || !out) return Status::no_memory();
  SLIMREDUCE_TRY(cuda_status(cudaMemcpyAsync(in, call.input, bytes, cudaMemcpyDefault, stream)));
  SLIMREDUCE_TRY(cuda_status(cudaStreamSynchronize(stream)));
  SLIMREDUCE_TRY(reduce(reinterpret_cast<const float*>(in), reinterpret_cast<float*>(out)));
  SLIMREDUCE_TRY(cuda_status(cudaMemcpyAsync(call.output, out, bytes, cudaMemcpyDefault, stream)));
  return cuda_status(cudaStreamSynchronize(stream));
}

// The cast route as a step (scheduler/plan.h): compress is the compressor's
// device entry point, then the wire elements to pinned memory; communicate is
// the ring (algorithms/cast_ring.h) on them, with the compressor's host adds;
// finish is the way back and the decoding kernel.
class StagedCastStep final : public scheduler::Step {
 public:
  StagedCastStep(const StagedCall& job, compressors::SummableCompressor& compressor,
                 std::byte* wire, std::byte* staged, std::byte* scratch)
      : job_(job),
        compressor_(compressor),
        bytes_(algorithms::CastRing::wire_bytes(compressor, job.call.count)),
        wire_(wire),
        staged_(staged),
        ring_(job.transport, compressor, job.call.count, staged, scratch) {}

  Status compress() override {
    const DeviceGuard guard(job_.device.device);  // on the pipeline's helper too
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    SLIMREDUCE_TRY(cuda_status(compressor_.device_compress(job_.call.input, job_.residual,
                                                           job_.call.count, wire_, stream())));
    SLIMREDUCE_TRY(
        cuda_status(cudaMemcpyAsync(staged_, wire_, bytes_, cudaMemcpyDeviceToHost, stream())));
    return sync(job_);
  }
  // The ring on the staged wire; an fp16 sum that left fp16's range is
  // rerun (algorithms/rescued_cast_ring.h), decided alike on every rank, here:
  // the rerun reduces over MPI, which only the caller's thread may call.
  Status communicate() override {
    SLIMREDUCE_TRY(ring_.communicate());
    if (compressor_.wire_finite(staged_, job_.call.count)) return {};
    rescue_ = compressor_.overflow_rescue();
    return rescue();
  }
  Status finish() override {
    const DeviceGuard guard(job_.device.device);  // on the pipeline's helper too
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    if (rescue_) return {};  // the rerun wrote the output
    SLIMREDUCE_TRY(
        cuda_status(cudaMemcpyAsync(wire_, staged_, bytes_, cudaMemcpyHostToDevice, stream())));
    SLIMREDUCE_TRY(cuda_status(
        compressor_.device_decompress(wire_, job_.call.output, job_.call.count, 1, stream())));
    return sync(job_);
  }
  double wire_sent() const override { return ring_.wire_sent() + rescue_sent_; }
  std::size_t overflow_rescued() const override { return rescue_ ? 1 : 0; }
  bool local_phases() const override { return true; }  // kernels and copies alone

 private:
  cudaStream_t stream() const { return job_.stream(); }
  // The input, untouched so far, as fp32 through pinned memory to the host
  // algorithm with the rescue's wire; the residual restarts from zero.
  Status rescue() {
    const std::size_t n = job_.call.count;
    if (job_.residual) {
      SLIMREDUCE_TRY(cuda_status(cudaMemsetAsync(job_.residual, 0, n * sizeof(float), stream())));
    }
    StagingSpace& s = job_.device;
    return through_host(s.rescue_in, s.rescue_out, stream(), job_.call,
                        [&](const float* in, float* out) {
                          Reduced rescued;
                          SLIMREDUCE_TRY(host_allreduce({in, out, n, nullptr}, *rescue_,
                                                        job_.transport, job_.state, &rescued));
                          rescue_sent_ = rescued.wire_sent;
                          return Status{};
                        });
  }

  const StagedCall& job_;
  compressors::SummableCompressor& compressor_;
  std::size_t bytes_;
  std::byte* wire_;    // device
  std::byte* staged_;  // pinned host
  algorithms::CastRing ring_;
  std::unique_ptr<compressors::SummableCompressor> rescue_;  // set: the wire overflowed
  double rescue_sent_ = 0;
};

}  // namespace

Status run_one(std::unique_ptr<scheduler::Step> step, Reduced* reduced,
               scheduler::PhaseObserver* observer) {
  scheduler::Plan plan;
  plan.add(std::move(step));
  return run_plan(plan, RunOptions{0, nullptr, observer}, reduced);
}

Status run_pieces(const StagedCall& job, const std::vector<scheduler::Partition>& pieces,
                  Reduced* reduced, const PieceStep& make_step) {
  // Deques: the steps hold references to their piece's call and job.
  std::deque<AllreduceCall> calls;
  std::deque<StagedCall> jobs;
  scheduler::Plan plan;
  const AllreduceCall& whole = job.call;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const scheduler::Partition& piece = pieces[i];
    calls.push_back({whole.input + piece.begin, whole.output + piece.begin, piece.count, nullptr,
                     whole.state, piece.count == whole.count ? whole.rows : 0,
                     whole.draw.at(piece.begin)});
    jobs.push_back({calls.back(), job.compressor, job.state, job.transport, job.device,
                    job.residual ? job.residual + piece.begin : nullptr, job.options});
    plan.add(make_step(jobs.back(), i));
  }
  return run_plan(plan, job.options, reduced);
}

namespace {

Status staged_cast(const StagedCall& job, compressors::SummableCompressor& compressor,
                   Reduced* reduced) {
  using algorithms::CastRing;
  const auto pieces = pieces_of(job.call.count, compressor, job.options.partition_bytes);
  const int ranks = job.transport.size();
  std::size_t wire_total = 0, scratch_total = 0;
  const auto wire_at = piece_offsets(
      pieces, [&](std::size_t n) { return CastRing::wire_bytes(compressor, n); }, &wire_total);
  const auto scratch_at = piece_offsets(
      pieces, [&](std::size_t n) { return CastRing::scratch_bytes(compressor, n, ranks); },
      &scratch_total);
  std::byte* wire = grow(job.device.wire, wire_total, false);
  std::byte* staged = grow(job.device.host_in, wire_total, true);
  // The rings' scratch is the workspace's, not the communicator's: a piece's
  // overflow rerun reduces through the host path, which may grow the
  // communicator's scratch and so move what later pieces hold.
  std::byte* scratch = grow(job.device.host_out, scratch_total, true);
  if (!wire || !staged || !scratch) return Status::no_memory();
  return run_pieces(job, pieces, reduced, [&](const StagedCall& piece, std::size_t i) {
    return std::make_unique<StagedCastStep>(piece, compressor, wire + wire_at[i],
                                            staged + wire_at[i], scratch + scratch_at[i]);
  });
}

// The gathered payloads from pinned memory (packed) to the device (strided).
Status gathered_to_device(const StagedCall& job, std::byte* gathered, const std::byte* packed,
                          std::size_t payload, std::size_t stride, int ranks) {
  int max_pitch = 0;
  if (cudaDeviceGetAttribute(&max_pitch, cudaDevAttrMaxPitch, job.device.device) != cudaSuccess) {
    cudaGetLastError();
    max_pitch = 0;  // unknown: one copy per rank always works
  }
  switch (gather_copy_for(payload, stride, static_cast<std::size_t>(std::max(max_pitch, 0)))) {
    case GatherCopy::contiguous:
      return cuda_status(
          cudaMemcpyAsync(gathered, packed, payload * ranks, cudaMemcpyHostToDevice, job.stream()));
    case GatherCopy::pitched:
      return cuda_status(cudaMemcpy2DAsync(gathered, stride, packed, payload, payload, ranks,
                                           cudaMemcpyHostToDevice, job.stream()));
    case GatherCopy::per_rank:
      break;
  }
  for (int r = 0; r < ranks; ++r) {
    SLIMREDUCE_TRY(cuda_status(cudaMemcpyAsync(gathered + stride * r, packed + payload * r, payload,
                                               cudaMemcpyHostToDevice, job.stream())));
  }
  return {};
}

// Buffers of the top-k route: on the wire exactly the host path's payload,
// on the device padded slots (device_slot_bytes).
struct TopkBuffers {
  std::size_t payload = 0;
  std::size_t stride = 0;
  std::byte* scratch = nullptr;   // device: the select's, then the accumulate's
  std::byte* dpayload = nullptr;  // device: this rank's payload
  std::byte* gathered = nullptr;  // device: every rank's, at stride
  std::byte* in = nullptr;        // pinned: this rank's payload
  std::byte* out = nullptr;       // pinned: every rank's, packed
};

// The top-k route as a step: compress is the select kernel, its payload to
// pinned memory; communicate is the allgather (algorithms/gathered.h);
// finish is the payloads to the device and the accumulate kernel, in rank order.
class StagedTopkStep final : public scheduler::Step {
 public:
  StagedTopkStep(const StagedCall& job, compressors::GatheredCompressor& compressor,
                 const TopkBuffers& buffers)
      : job_(job),
        compressor_(compressor),
        b_(buffers),
        gather_(job.transport, compressor, job.call.count, buffers.payload, buffers.in,
                buffers.out) {}

  Status compress() override {
    const DeviceGuard guard(job_.device.device);  // on the pipeline's helper too
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    SLIMREDUCE_TRY(cuda_status(
        compressor_.device_compress(compressors::Elem::fp32, job_.call.input, job_.residual,
                                    job_.call.count, b_.dpayload, b_.scratch, job_.stream())));
    SLIMREDUCE_TRY(cuda_status(
        cudaMemcpyAsync(b_.in, b_.dpayload, b_.payload, cudaMemcpyDeviceToHost, job_.stream())));
    return sync(job_);
  }
  Status communicate() override { return gather_.communicate(); }
  Status finish() override {
    const DeviceGuard guard(job_.device.device);  // on the pipeline's helper too
    if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
    const int ranks = job_.state.size();
    SLIMREDUCE_TRY(gathered_to_device(job_, b_.gathered, b_.out, b_.payload, b_.stride, ranks));
    SLIMREDUCE_TRY(cuda_status(compressor_.device_finish(
        b_.gathered, b_.stride, ranks, job_.call.count, compressors::Elem::fp32, job_.call.output,
        1, b_.scratch, job_.stream())));
    return sync(job_);
  }
  double wire_sent() const override { return gather_.wire_sent(); }
  bool local_phases() const override { return true; }  // kernels and copies alone

 private:
  const StagedCall& job_;
  compressors::GatheredCompressor& compressor_;
  TopkBuffers b_;
  algorithms::GatheredAllreduce gather_;
};

Status staged_topk(const StagedCall& job, compressors::GatheredCompressor& compressor,
                   Reduced* reduced) {
  StagingSpace& s = job.device;
  const auto pieces = pieces_of(job.call.count, compressor, job.options.partition_bytes);
  const auto ranks = static_cast<std::size_t>(job.state.size());
  // Each piece's stretch of each buffer (a piece's top-k is its own).
  std::size_t scratch_total = 0, slot_total = 0, gathered_total = 0, in_total = 0, out_total = 0;
  const auto scratch_at = piece_offsets(
      pieces,
      [&](std::size_t n) {
        return std::max(compressor.device_compress_scratch_bytes(n),
                        compressor.device_finish_scratch_bytes(n, static_cast<int>(ranks)));
      },
      &scratch_total);
  const auto slot_at = piece_offsets(
      pieces, [&](std::size_t n) { return compressor.device_slot_bytes(n); }, &slot_total);
  const auto gathered_at = piece_offsets(
      pieces, [&](std::size_t n) { return compressor.device_slot_bytes(n) * ranks; },
      &gathered_total);
  const auto in_at = piece_offsets(
      pieces, [&](std::size_t n) { return compressor.compressed_bytes(n); }, &in_total);
  const auto out_at = piece_offsets(
      pieces, [&](std::size_t n) { return compressor.compressed_bytes(n) * ranks; }, &out_total);
  std::byte* scratch = grow(s.scratch, scratch_total, false);
  std::byte* dpayload = grow(s.wire, slot_total, false);
  std::byte* gathered = grow(s.gathered, gathered_total, false);
  std::byte* in = grow(s.host_in, in_total, true);
  std::byte* out = grow(s.host_out, out_total, true);
  if (!scratch || !dpayload || !gathered || !in || !out) return Status::no_memory();
  return run_pieces(job, pieces, reduced, [&](const StagedCall& piece, std::size_t i) {
    TopkBuffers b;
    b.payload = compressor.compressed_bytes(piece.call.count);
    b.stride = compressor.device_slot_bytes(piece.call.count);
    b.scratch = scratch + scratch_at[i];
    b.dpayload = dpayload + slot_at[i];
    b.gathered = gathered + gathered_at[i];
    b.in = in + in_at[i];
    b.out = out + out_at[i];
    return std::make_unique<StagedTopkStep>(piece, compressor, b);
  });
}

// Any other compressor (or a host buffer on one side): fp32 through pinned
// memory and the host algorithm, with the engine's host residual.
Status staged_host(const StagedCall& job, Reduced* reduced) {
  StagingSpace& s = job.device;
  return through_host(
      s.host_in, s.host_out, job.stream(), job.call, [&](const float* in, float* out) {
        const AllreduceCall host{
            in,           out, job.call.count, job.call.residual, job.call.state, job.call.rows,
            job.call.draw};
        // Cut as a host-buffer rank cuts it, its phases observed.
        const RunOptions options{job.options.partition_bytes, nullptr, job.options.observer};
        return host_allreduce(host, job.compressor, job.transport, job.state, options, reduced);
      });
}

int device_of(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return attributes.device;
}

// A workspace of `device` (the current one) for one call: an idle one, or a
// new one. Given back when the call ends.
class Lease {
 public:
  Lease(StagingPool& pool, int device) : pool_(pool) {
    workspace_ = pool.take(device);
    if (workspace_) return;
    auto fresh = std::make_unique<StagingSpace>();
    fresh->device = device;
    cudaStream_t stream = nullptr;
    // A blocking stream (not cudaStreamNonBlocking): it starts after the work
    // already queued on the legacy default stream. A caller that filled its
    // buffer with cudaMemcpy from pageable memory (which may return before
    // the data lands) or with a kernel on that stream gets its data read.
    if (cudaStreamCreate(&stream) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    fresh->stream.reset(stream);
    workspace_ = std::move(fresh);
  }
  ~Lease() {
    if (workspace_) pool_.give_back(std::move(workspace_));
  }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  StagingSpace* get() const { return workspace_.get(); }

 private:
  StagingPool& pool_;
  std::unique_ptr<StagingSpace> workspace_;
};

// How a call runs: on the GPU through the compressor's device entry points
// (DeviceKernels cast16, topk, low_rank or sharded), or staged through its host algorithm
// (DeviceKernels::none: a compressor without them, a host buffer on one
// side, buffers on two GPUs, or a top-k beyond 32-bit indices).
compressors::DeviceKernels kernels_for(const AllreduceCall& call,
                                       compressors::Compressor& compressor, int ranks) {
  using compressors::DeviceKernels;
  if (!is_device_pointer(call.input) || !is_device_pointer(call.output)) return DeviceKernels::none;
  // Buffers on two GPUs: our kernels run on one and could not reach the other
  // (without peer access, an illegal address that ends the context).
  if (call.input != call.output && device_of(call.input) != device_of(call.output))
    return DeviceKernels::none;
  if (call.count > compressor.device_max_count()) return DeviceKernels::none;
  // Top-k that a host-buffer rank would reduce sharded (its cost model, from
  // the count and the ranks): the device route gathers, so the host
  // algorithm's sharded one runs here too, on fp32 staged through the host.
  if (compressor.device_kernels() == DeviceKernels::topk &&
      reduces_sharded(compressor, call.count, ranks))
    return DeviceKernels::none;
  return compressor.device_kernels();
}

}  // namespace

bool keeps_residual_on_device(const AllreduceCall& call, compressors::Compressor& compressor,
                              int ranks) {
  return kernels_for(call, compressor, ranks) != compressors::DeviceKernels::none;
}

namespace {

// Runs `body` with a workspace leased on the device of the call's device
// buffer (the input's, else the output's), made current for the call.
template <class Body>
Status on_leased_workspace(const AllreduceCall& call, StagingPool& pool, Body&& body) {
  const int device = device_of(is_device_pointer(call.input) ? call.input : call.output);
  if (device < 0) return Status::mpi(MPI_ERR_BUFFER);
  DeviceGuard guard(device);
  if (!guard.ok()) return Status::cuda(cudaErrorInvalidDevice);
  Lease lease(pool, device);
  if (!lease.get()) return Status::cuda(cudaErrorUnknown);  // no stream could be made
  return body(*lease.get());
}

}  // namespace

Status allreduce(const AllreduceCall& call, compressors::Compressor& compressor, CommState& state,
                 backends::Transport& transport, ResidualSlot* residual, StagingPool& pool,
                 Reduced* reduced, const RunOptions& options) {
  using compressors::DeviceKernels;
  return on_leased_workspace(call, pool, [&](StagingSpace& workspace) {
    const DeviceKernels kernels = kernels_for(call, compressor, transport.size());
    StagedCall job{call, compressor, state, transport, workspace, nullptr, options};
    // A hierarchical communicator reduces fp32 inside the node: through the
    // host algorithm, as a host-buffer rank of it does.
    if (kernels == DeviceKernels::none || state.runs_two_level(options.flat))
      return staged_host(job, reduced);
    if (residual && residual->feeds_back) {
      if (!pool.residual_memory()) return Status::no_memory();
      job.residual = residual->device_residual(*pool.residual_memory(), job.stream());
      if (!job.residual) return Status::no_memory();
    }
    // The route table of device buffers on MPI: the compressor's GPU kernels
    // are those of its kind (test_eligibility holds every compressor to it).
    using namespace compressors;
    return with_kind(
        compressor,
        Overloaded{
            [&](SummableCompressor& summable) { return staged_cast(job, summable, reduced); },
            [&](GatheredCompressor& gathered) { return staged_topk(job, gathered, reduced); },
            [&](LowRankCompressor& low_rank) { return staged_low_rank(job, low_rank, reduced); },
            [&](ShardedCompressor& sharded) { return staged_sharded(job, sharded, reduced); }});
  });
}

Status reduced_norm(const float* output, std::size_t count, StagingPool& pool, double* norm) {
  const AllreduceCall call{output, const_cast<float*>(output), count, nullptr};
  return on_leased_workspace(call, pool, [&](StagingSpace& workspace) {
    const std::size_t scratch_bytes = kernels::device::fixed_order_norm_scratch_bytes(count);
    std::byte* scratch = grow(workspace.scratch, scratch_bytes + sizeof(double), false);
    std::byte* pinned = grow(workspace.host_out, sizeof(double), true);
    if (!scratch || !pinned) return Status::no_memory();
    auto* result = reinterpret_cast<double*>(scratch + scratch_bytes);
    cudaStream_t stream = workspace.stream.get();
    SLIMREDUCE_TRY(
        cuda_status(kernels::device::fixed_order_norm(output, count, result, scratch, stream)));
    SLIMREDUCE_TRY(cuda_status(
        cudaMemcpyAsync(pinned, result, sizeof(double), cudaMemcpyDeviceToHost, stream)));
    SLIMREDUCE_TRY(cuda_status(cudaStreamSynchronize(stream)));
    std::memcpy(norm, pinned, sizeof(double));
    return Status{};
  });
}

int passed_through_allreduce(const AllreduceCall& call, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm, StagingPool& pool, int* mpi_rc) {
  *mpi_rc = MPI_SUCCESS;
  const Status status = on_leased_workspace(call, pool, [&](StagingSpace& workspace) {
    return through_host(workspace.host_in, workspace.host_out, workspace.stream.get(), call,
                        [&](const float* in, float* out) {
                          *mpi_rc = backends::mpi::allreduce(in, out, static_cast<int>(call.count),
                                                             datatype, op, comm);
                          return Status::mpi(*mpi_rc);
                        });
  });
  // MPI's own error: MPI raised it on comm already.
  return *mpi_rc != MPI_SUCCESS ? MPI_SUCCESS : backends::mpi_code(status);
}

}  // namespace slimreduce::device_staging

// ---- the pool ------------------------------------------------------------------

namespace slimreduce::device_staging {

StagingPool::StagingPool(DeviceAllocator* residual_memory) : residual_memory_(residual_memory) {}
StagingPool::~StagingPool() = default;

std::unique_ptr<StagingSpace> StagingPool::take(int device) {
  std::lock_guard lock(mutex_);
  for (auto it = idle_.begin(); it != idle_.end(); ++it) {
    if ((*it)->device == device) {
      std::unique_ptr<StagingSpace> space = std::move(*it);
      idle_.erase(it);
      return space;
    }
  }
  return nullptr;
}

void StagingPool::give_back(std::unique_ptr<StagingSpace> space) {
  std::lock_guard lock(mutex_);
  try {
    idle_.push_back(std::move(space));
  } catch (...) {
    // no memory to keep it: `space` lets it go
  }
}

}  // namespace slimreduce::device_staging
