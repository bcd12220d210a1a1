// PowerSGD: rank-r low-rank compression (Vogels et al., NeurIPS 2019) with
// error feedback and warm start; the steps are kernels/low_rank.h's, the two
// sums and their order algorithms/powersgd.h's. The two products through a
// private OpenBLAS when there is one (settings: SLIMREDUCE_POWERSGD_BLAS),
// faster than our loops at the shapes PowerSGD sees (docs/performance.md,
// "PowerSGD (CPU)").
#include <memory>
#include <string>

#include "compressors/registry.h"
#include "kernels/blas_loader.h"
#include "kernels/device.h"
#include "kernels/low_rank.h"

namespace slimreduce::compressors {
namespace {

using kernels::LowRankShape;

class PowerSgdCompressor final : public LowRankCompressor {
 public:
  explicit PowerSgdCompressor(const CompressorOptions& options)
      : rank_(static_cast<std::size_t>(options.powersgd_rank > 0 ? options.powersgd_rank : 1)),
        min_compression_(options.powersgd_min_compression),
        products_(options.powersgd_products) {}

  std::string_view name() const override { return "powersgd"; }
  // Rank r keeps little of each tensor: without error feedback what it
  // leaves out is lost for good (the paper's Algorithm 2 always carries it).
  bool default_error_feedback() const override { return true; }
  // Its steps on the GPU where cuBLAS can be loaded for the products.
  DeviceKernels device_kernels() const override {
    return kernels::device::low_rank_available(nullptr) ? DeviceKernels::low_rank
                                                        : DeviceKernels::none;
  }
  // The two factors of one rank; a tensor not worth compressing is sent whole.
  std::size_t compressed_bytes(std::size_t n) const override {
    const LowRankShape s = shape(n, 0);
    return s.rank == 0 ? n * sizeof(float) : (s.p_floats() + s.q_floats()) * sizeof(float);
  }

  LowRankShape shape(std::size_t n, std::size_t rows) const override {
    return kernels::low_rank_shape(n, rank_, min_compression_, rows);
  }
  void seed(const LowRankShape& shape, float* q) const override {
    kernels::low_rank_seed(shape, q);
  }
  void project(const float* m, const LowRankShape& shape, const float* q, float* p) const override {
    if (const kernels::PrivateBlas* blas = this->blas()) {
      kernels::low_rank_project_blas(*blas, m, shape, q, p);
    } else {
      kernels::low_rank_project(m, shape, q, p);
    }
  }
  void orthonormalise(float* p, const LowRankShape& shape) const override {
    kernels::orthonormalise(p, shape.rows, shape.rank);
  }
  void back_project(const float* m, const LowRankShape& shape, const float* p,
                    float* q) const override {
    if (const kernels::PrivateBlas* blas = this->blas()) {
      kernels::low_rank_back_project_blas(*blas, m, shape, p, q);
    } else {
      kernels::low_rank_back_project(m, shape, p, q);
    }
  }
  void finish(const float* m, const LowRankShape& shape, const float* p, const float* q_sum,
              const float* q_local, float* out, float* residual) const override {
    kernels::low_rank_finish(m, shape, p, q_sum, q_local, out, residual);
  }
  int device_add(const float* input, const float* residual, float* m, std::size_t n,
                 void* stream) const override {
    return kernels::device::low_rank_add(input, residual, m, n, stream);
  }
  int device_project(const float* m, const LowRankShape& shape, const float* q, float* p,
                     void* stream) const override {
    return kernels::device::low_rank_project(m, shape, q, p, stream);
  }
  int device_orthonormalise(float* p, const LowRankShape& shape, void* stream) const override {
    return kernels::device::orthonormalise(p, shape.rows, shape.rank, stream);
  }
  int device_back_project(const float* m, const LowRankShape& shape, const float* p, float* q,
                          void* stream) const override {
    return kernels::device::low_rank_back_project(m, shape, p, q, stream);
  }
  int device_finish(const float* m, const LowRankShape& shape, const float* p, const float* q_sum,
                    const float* q_local, float* out, float* residual,
                    void* stream) const override {
    return kernels::device::low_rank_finish(m, shape, p, q_sum, q_local, out, residual, stream);
  }
  int device_flag_not_finite(const float* v, std::size_t n, unsigned* bad,
                             void* stream) const override {
    return kernels::device::flag_not_finite(v, n, bad, stream);
  }
  int device_settle(const unsigned* bad, float* out, float* residual, std::size_t n, int divisor,
                    const float* q_sum, float* q_state, std::size_t q_floats,
                    void* stream) const override {
    return kernels::device::low_rank_settle(bad, out, residual, n, divisor, q_sum, q_state,
                                            q_floats, stream);
  }
  std::string products() const override {
    if (const kernels::PrivateBlas* blas = this->blas())
      return "cblas_sgemm of a private " + blas->description();
    std::string loops = std::string("our loops (") + kernels::isa_name(kernels::best_isa()) + ")";
    if (products_ == PowerSgdProducts::builtin) return loops;
    return loops + ", no private OpenBLAS: " + kernels::PrivateBlas::process_failure();
  }

 private:
  // The process's private copy (loaded at the first product), or nullptr for our loops.
  const kernels::PrivateBlas* blas() const {
    return products_ == PowerSgdProducts::builtin ? nullptr : kernels::PrivateBlas::process();
  }

  std::size_t rank_;
  double min_compression_;
  PowerSgdProducts products_;
};

}  // namespace

std::unique_ptr<Compressor> make_powersgd_compressor(const CompressorOptions& options) {
  return std::make_unique<PowerSgdCompressor>(options);
}

}  // namespace slimreduce::compressors
