// PowerSGD on device buffers on the MPI path (DeviceKernels::low_rank): the
// compressor's device steps run on the GPU (M = input + residual, the two
// products through cuBLAS, the orthonormalisation, P Q^T and the residual),
// and only the two factors (or M, where a call is summed exactly) are staged
// through pinned memory for the sums, which algorithms::sum_low_rank does as
// for host buffers. Every step after a sum reads summed bits, and the GPU's
// orthonormalisation and finish give their CPU twins' bits, so a device- and
// a host-buffer rank of one communicator hold the same output.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "algorithms/powersgd.h"
#include "core/mpi/device_staging_internal.h"
#include "kernels/low_rank.h"

namespace slimreduce::device_staging {
namespace {

using kernels::LowRankShape;

// floats rounded up so that the next region starts 256 bytes on.
std::size_t aligned(std::size_t floats) { return round256(floats * sizeof(float)) / sizeof(float); }

// Where one call's floats lie, in floats.
struct Layout {
  algorithms::LowRankSums sums;  // P and Q padded to whole blocks; a sum's block of one rank
  std::size_t m, p, q, q_local;  // device: M, P, Q, Q_local
  Layout(const LowRankShape& s, int ranks)
      : sums(s, ranks),
        m(aligned(s.count)),
        p(aligned(sums.p_padded)),
        q(aligned(sums.q_padded)),
        q_local(aligned(s.q_floats())) {}
  std::size_t device_floats() const { return m + p + q + q_local; }
};

struct Buffers {
  float *m, *p, *q, *q_local;      // device (q: the key's Q, then the summed Q)
  float *host_p, *host_q;          // pinned: the factors as they are summed
  std::size_t p_padded, q_padded;  // their floats with the zeros after them
  algorithms::SumScratch sums{};   // host
};

class StagedLowRankStep final : public scheduler::Step, public algorithms::LowRankStages {
 public:
  StagedLowRankStep(const StagedCall& job, compressors::LowRankCompressor& compressor,
                    const LowRankShape& shape, const Buffers& buffers)
      : job_(job), compressor_(compressor), shape_(shape), b_(buffers) {
    if (shape_.rank > 0) q_ = algorithms::warm_start(compressor_, shape_, job.call.state, own_q_);
  }

  Status compress() override {
    SLIMREDUCE_TRY(cuda_status(
        compressor_.device_add(job_.call.input, job_.residual, b_.m, shape_.count, stream())));
    if (shape_.rank == 0) return sync(job_);
    SLIMREDUCE_TRY(to_device(b_.q, q_->data(), shape_.q_floats()));
    SLIMREDUCE_TRY(cuda_status(compressor_.device_project(b_.m, shape_, b_.q, b_.p, stream())));
    SLIMREDUCE_TRY(to_host(b_.host_p, b_.p, shape_.p_floats()));
    // The zeros after P, up to whole blocks: one reduce-scatter (sum_low_rank).
    std::fill(b_.host_p + shape_.p_floats(), b_.host_p + b_.p_padded, 0.0f);
    return sync(job_);
  }
  Status communicate() override {
    return algorithms::sum_low_rank(job_.transport, *this, b_.sums, &wire_sent_);
  }
  Status finish() override {
    if (exact_) {
      SLIMREDUCE_TRY(to_device(job_.call.output, exact_m_, shape_.count));
      if (job_.residual) {  // all of M was sent
        SLIMREDUCE_TRY(
            cuda_status(cudaMemsetAsync(job_.residual, 0, shape_.count * sizeof(float), stream())));
      }
    } else {
      SLIMREDUCE_TRY(cuda_status(compressor_.device_finish(
          b_.m, shape_, b_.p, b_.q, b_.q_local, job_.call.output, job_.residual, stream())));
    }
    return sync(job_);
  }
  double wire_sent() const override { return wire_sent_; }

  std::span<float> p_summand() override {
    if (shape_.rank == 0) return {};
    return {b_.host_p, shape_.p_floats()};
  }
  // Every rank holds the same summed bits, so every rank decides alike.
  Status p_summed(bool* finite) override {
    *finite = kernels::all_finite(b_.host_p, shape_.p_floats());
    if (!*finite) return {};
    SLIMREDUCE_TRY(to_device(b_.p, b_.host_p, shape_.p_floats()));
    SLIMREDUCE_TRY(cuda_status(compressor_.device_orthonormalise(b_.p, shape_, stream())));
    SLIMREDUCE_TRY(
        cuda_status(compressor_.device_back_project(b_.m, shape_, b_.p, b_.q_local, stream())));
    SLIMREDUCE_TRY(to_host(b_.host_q, b_.q_local, shape_.q_floats()));
    std::fill(b_.host_q + shape_.q_floats(), b_.host_q + b_.q_padded, 0.0f);
    return sync(job_);
  }
  std::span<float> q_summand() override { return {b_.host_q, shape_.q_floats()}; }
  Status q_summed(bool* finite) override {
    *finite = kernels::all_finite(b_.host_q, shape_.q_floats());
    if (!*finite) return {};
    std::copy_n(b_.host_q, shape_.q_floats(), q_->data());  // the next call's start
    // The summed Q for finish, which waits for the copy (host_q is not written before).
    return to_device(b_.q, b_.host_q, shape_.q_floats());
  }
  Status exact_summand(std::span<float>* m) override {
    exact_ = true;
    const std::size_t bytes = shape_.count * sizeof(float);
    exact_m_ = reinterpret_cast<float*>(grow(job_.device.host_out, bytes, true));
    if (!exact_m_) return Status::no_memory();
    SLIMREDUCE_TRY(to_host(exact_m_, b_.m, shape_.count));
    SLIMREDUCE_TRY(sync(job_));
    *m = {exact_m_, shape_.count};
    return {};
  }

 private:
  cudaStream_t stream() const { return job_.stream(); }
  Status to_device(float* to, const float* from, std::size_t floats) {
    return cuda_status(
        cudaMemcpyAsync(to, from, floats * sizeof(float), cudaMemcpyHostToDevice, stream()));
  }
  Status to_host(float* to, const float* from, std::size_t floats) {
    return cuda_status(
        cudaMemcpyAsync(to, from, floats * sizeof(float), cudaMemcpyDeviceToHost, stream()));
  }

  const StagedCall& job_;
  compressors::LowRankCompressor& compressor_;
  LowRankShape shape_;
  Buffers b_;
  std::vector<float> own_q_;  // without a key's state
  std::vector<float>* q_ = nullptr;
  float* exact_m_ = nullptr;  // pinned: M, summed exactly
  bool exact_ = false;
  double wire_sent_ = 0;
};

}  // namespace

Status staged_low_rank(const StagedCall& job, compressors::LowRankCompressor& compressor,
                       Reduced* reduced) {
  const LowRankShape shape = compressor.shape(job.call.count, job.call.rows);
  const int ranks = job.transport.size();
  const Layout layout(shape, ranks);
  auto* device = reinterpret_cast<float*>(
      grow(job.device.wire, layout.device_floats() * sizeof(float), false));
  auto* pinned = reinterpret_cast<float*>(
      grow(job.device.host_in, (layout.p + layout.q) * sizeof(float), true));
  auto* host = reinterpret_cast<float*>(
      job.state.scratch((layout.sums.block + static_cast<std::size_t>(ranks)) * sizeof(float)));
  if (!device || !pinned || !host) return Status::no_memory();
  Buffers b;
  b.m = device;
  b.p = b.m + layout.m;
  b.q = b.p + layout.p;
  b.q_local = b.q + layout.q;
  b.host_p = pinned;
  b.host_q = pinned + layout.p;
  b.p_padded = layout.sums.p_padded;
  b.q_padded = layout.sums.q_padded;
  b.sums = {host, host + layout.sums.block};
  return run_one(std::make_unique<StagedLowRankStep>(job, compressor, shape, b), reduced,
                 job.options.observer);
}

}  // namespace slimreduce::device_staging
