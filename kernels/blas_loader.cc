#include "kernels/blas_loader.h"

#include <dlfcn.h>

#include <string_view>

namespace slimreduce::kernels {
namespace {

// cblas.h's values.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

std::string last_error() {
  const char* error = dlerror();
  return error ? error : "unknown error";
}

}  // namespace

void PrivateBlas::Closer::operator()(void* handle) const { dlclose(handle); }

const char* PrivateBlas::default_path() {
#if defined(__x86_64__)
  return "/usr/lib/x86_64-linux-gnu/openblas-serial/libopenblas.so.0";
#elif defined(__aarch64__)
  return "/usr/lib/aarch64-linux-gnu/openblas-serial/libopenblas.so.0";
#else
  return "";
#endif
}

std::unique_ptr<PrivateBlas> PrivateBlas::load(const char* path, std::string* why) {
  auto fail = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return std::unique_ptr<PrivateBlas>();
  };
  if (!path || !*path) return fail("no path for this architecture");
  // A namespace of its own: the copy brings its own libgfortran, libm and
  // libc, resolves nothing against the job's objects nor they against it,
  // and the LD_PRELOAD list (SlimReduce itself) is not loaded into it.
  void* raw = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
  if (!raw) return fail(last_error());
  auto blas = std::make_unique<PrivateBlas>(Key());
  blas->handle_.reset(raw);
  blas->sgemm_ = reinterpret_cast<Sgemm>(dlsym(raw, "cblas_sgemm"));
  blas->sgemv_ = reinterpret_cast<Sgemv>(dlsym(raw, "cblas_sgemv"));
  using Text = const char* (*)();
  using Number = int (*)();
  auto config = reinterpret_cast<Text>(dlsym(raw, "openblas_get_config"));
  auto core = reinterpret_cast<Text>(dlsym(raw, "openblas_get_corename"));
  auto parallel = reinterpret_cast<Number>(dlsym(raw, "openblas_get_parallel"));
  if (!blas->sgemm_ || !blas->sgemv_ || !config || !core || !parallel)
    return fail(std::string(path) +
                " is not an OpenBLAS (no cblas_sgemm, cblas_sgemv or openblas_get_*)");
  // openblas_get_parallel: 0 serial, 1 pthreads, 2 OpenMP. A threaded one
  // would start its threads in the job and sum in an order set by their count.
  if (parallel() != 0) return fail(std::string(path) + " is a multi-threaded OpenBLAS");
  blas->description_ = std::string(config()) + ", core " + core() + ", " + path;
  return blas;
}

namespace {

struct ProcessCopy {
  std::string why;
  std::unique_ptr<PrivateBlas> blas = PrivateBlas::load(PrivateBlas::default_path(), &why);
};

// Loaded once (a thread-safe static), closed at exit.
const ProcessCopy& process_copy() {
  static const ProcessCopy copy;
  return copy;
}

}  // namespace

const PrivateBlas* PrivateBlas::process() { return process_copy().blas.get(); }

const std::string& PrivateBlas::process_failure() { return process_copy().why; }

PrivateBlas::~PrivateBlas() = default;

void PrivateBlas::sgemm(bool transpose_a, int m, int n, int k, const float* a, int lda,
                        const float* b, int ldb, float* c, int ldc) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  sgemm_(kRowMajor, transpose_a ? kTrans : kNoTrans, kNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f,
         c, ldc);
}

void PrivateBlas::sgemv(bool transpose_a, int m, int n, const float* a, int lda, const float* x,
                        float* y) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  sgemv_(kRowMajor, transpose_a ? kTrans : kNoTrans, m, n, 1.0f, a, lda, x, 1, 0.0f, y, 1);
}

}  // namespace slimreduce::kernels
