#include "core/nccl/low_rank.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "algorithms/powersgd.h"
#include "algorithms/wire_bytes.h"
#include "backends/nccl_transport.h"
#include "compressors/kind.h"
#include "core/gpu/cuda_support.h"

namespace slimreduce {
namespace {

using kernels::LowRankShape;

const compressors::LowRankCompressor& low_rank(const compressors::Compressor& compressor) {
  return compressors::kind_cast<compressors::LowRankCompressor>(compressor);
}

// Where a call's floats lie in its region, in bytes from its start.
struct Region {
  LowRankShape shape;
  algorithms::LowRankSums sums;  // NCCL sums P and Q only: M is never summed exactly here
  std::size_t p_padded, q_padded;
  std::size_t m, p, q_sum, q_local, scratch, flag, q_seed, bytes;
  Region(const CallPlan& c, const compressors::Compressor& compressor)
      : shape(low_rank(compressor).shape(c.call.count, 0)),
        sums(shape, c.comm->size),
        p_padded(sums.p_padded),
        q_padded(sums.q_padded) {
    m = 0;
    p = m + round256(shape.count * sizeof(float));
    q_sum = p + round256(p_padded * sizeof(float));
    q_local = q_sum + round256(q_padded * sizeof(float));
    scratch = q_local + round256(shape.q_floats() * sizeof(float));
    flag = scratch + round256(sums.factor_block * sizeof(float));
    q_seed = flag + 256;  // the seeded Q of a call without a key's
    bytes = q_seed + round256(shape.q_floats() * sizeof(float));
  }
};

Status cuda(cudaError_t rc) { return Status::cuda(rc); }
Status cuda(int rc) { return Status::cuda(static_cast<cudaError_t>(rc)); }

class LowRankStep final : public scheduler::Step {
 public:
  LowRankStep(const CallPlan& p, compressors::LowRankCompressor& compressor)
      : compressor_(compressor),
        r_(p, compressor),
        input_(static_cast<const float*>(p.call.sendbuff)),
        output_(static_cast<float*>(p.call.recvbuff)),
        residual_(p.residual),
        q_state_(p.q_state),
        device_(p.comm->device),
        divisor_(p.call.verdict.average ? p.comm->size : 1),
        stream_(static_cast<cudaStream_t>(p.call.stream)),
        transport_(p.comm->comm, p.comm->rank, p.comm->size, stream_),
        wire_sent_(low_rank_wire_sent(p, compressor)) {
    auto at = [&](std::size_t offset) { return reinterpret_cast<float*>(p.place.region + offset); };
    m_ = at(r_.m), p_ = at(r_.p), q_sum_ = at(r_.q_sum), q_local_ = at(r_.q_local);
    scratch_ = at(r_.scratch), q_seed_ = at(r_.q_seed);
    flag_ = reinterpret_cast<unsigned*>(p.place.region + r_.flag);
    if (!q_state_) {
      seed_.resize(r_.shape.q_floats());
      compressor_.seed(r_.shape, seed_.data());
    }
  }

  // Before the group's collectives: M = input + residual, P = M Q, zeros after P.
  Status compress() override {
    DeviceGuard guard(device_);
    if (!guard.ok()) return cuda(cudaErrorInvalidDevice);
    SLIMREDUCE_TRY(cuda(cudaMemsetAsync(flag_, 0, sizeof(unsigned), stream_)));
    SLIMREDUCE_TRY(cuda(compressor_.device_add(input_, residual_, m_, r_.shape.count, stream_)));
    if (!q_state_) {  // from pageable memory: copied out before this returns
      SLIMREDUCE_TRY(cuda(cudaMemcpyAsync(q_seed_, seed_.data(), seed_.size() * sizeof(float),
                                          cudaMemcpyHostToDevice, stream_)));
    }
    const float* q = q_state_ ? q_state_ : q_seed_;
    SLIMREDUCE_TRY(cuda(compressor_.device_project(m_, r_.shape, q, p_, stream_)));
    return zeros_after(p_, r_.shape.p_floats(), r_.p_padded);
  }
  // Among the group's collectives: P's reduce-scatter.
  Status communicate() override {
    return transport_.reduce_scatter_sum(p_, scratch_, r_.p_padded / ranks());
  }
  // After the group ended, in stream order: the rest.
  Status finish() override {
    DeviceGuard guard(device_);
    if (!guard.ok()) return cuda(cudaErrorInvalidDevice);
    SLIMREDUCE_TRY(transport_.allgather(scratch_, r_.p_padded / ranks() * sizeof(float), p_));
    SLIMREDUCE_TRY(
        cuda(compressor_.device_flag_not_finite(p_, r_.shape.p_floats(), flag_, stream_)));
    SLIMREDUCE_TRY(cuda(compressor_.device_orthonormalise(p_, r_.shape, stream_)));
    SLIMREDUCE_TRY(cuda(compressor_.device_back_project(m_, r_.shape, p_, q_local_, stream_)));
    SLIMREDUCE_TRY(cuda(cudaMemcpyAsync(q_sum_, q_local_, r_.shape.q_floats() * sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream_)));
    SLIMREDUCE_TRY(zeros_after(q_sum_, r_.shape.q_floats(), r_.q_padded));
    SLIMREDUCE_TRY(transport_.reduce_scatter_sum(q_sum_, scratch_, r_.q_padded / ranks()));
    SLIMREDUCE_TRY(transport_.allgather(scratch_, r_.q_padded / ranks() * sizeof(float), q_sum_));
    SLIMREDUCE_TRY(
        cuda(compressor_.device_flag_not_finite(q_sum_, r_.shape.q_floats(), flag_, stream_)));
    SLIMREDUCE_TRY(cuda(compressor_.device_finish(m_, r_.shape, p_, q_sum_, q_local_, output_,
                                                  residual_, stream_)));
    return cuda(compressor_.device_settle(flag_, output_, residual_, r_.shape.count, divisor_,
                                          q_sum_, q_state_, r_.shape.q_floats(), stream_));
  }
  double wire_sent() const override { return wire_sent_; }

 private:
  int ranks() const { return transport_.size(); }
  Status zeros_after(float* v, std::size_t used, std::size_t padded) {
    if (padded == used) return {};
    return cuda(cudaMemsetAsync(v + used, 0, (padded - used) * sizeof(float), stream_));
  }

  compressors::LowRankCompressor& compressor_;
  Region r_;
  const float* input_;
  float* output_;
  float* residual_;
  float* q_state_;  // the key's Q on the device, or nullptr: seed_ for this call
  int device_;
  int divisor_;
  cudaStream_t stream_;
  backends::NcclTransport transport_;
  double wire_sent_;
  float *m_, *p_, *q_sum_, *q_local_, *scratch_, *q_seed_;
  unsigned* flag_;
  std::vector<float> seed_;
};

}  // namespace

bool low_rank_compresses(const compressors::Compressor& compressor, std::size_t count,
                         bool capturing) {
  return !capturing && low_rank(compressor).shape(count, 0).rank > 0;
}

float* key_q_on_device(ResidualSlot& slot, const compressors::Compressor& compressor,
                       std::size_t count, void* stream, DeviceAllocator& allocator) {
  const LowRankShape shape = low_rank(compressor).shape(count, 0);
  const std::size_t bytes = shape.q_floats() * sizeof(float);
  if (slot.device_state.get() && slot.device_state.bytes() == bytes)
    return static_cast<float*>(slot.device_state.get());
  slot.device_state.release(stream);
  void* made = allocator.allocate(bytes, stream, false);
  if (!made) return nullptr;
  slot.device_state = DeviceBlock(&allocator, made, bytes);
  std::vector<float> seed(shape.q_floats());
  low_rank(compressor).seed(shape, seed.data());
  // From pageable memory: copied out of `seed` before this returns.
  if (cudaMemcpyAsync(made, seed.data(), bytes, cudaMemcpyHostToDevice,
                      static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    cudaGetLastError();
    slot.device_state.release(stream);
    return nullptr;
  }
  return static_cast<float*>(made);
}

std::size_t low_rank_region_bytes(const CallPlan& p, const compressors::Compressor& compressor) {
  return Region(p, compressor).bytes;
}

double low_rank_wire_sent(const CallPlan& p, const compressors::Compressor& compressor) {
  const Region r(p, compressor);
  return algorithms::ring_allreduce_wire_bytes(r.p_padded * sizeof(float), p.comm->size) +
         algorithms::ring_allreduce_wire_bytes(r.q_padded * sizeof(float), p.comm->size);
}

std::unique_ptr<scheduler::Step> low_rank_step(const CallPlan& p,
                                               compressors::Compressor& compressor) {
  return std::make_unique<LowRankStep>(
      p, compressors::kind_cast<compressors::LowRankCompressor>(compressor));
}

}  // namespace slimreduce
