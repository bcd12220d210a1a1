#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cuda/cublas_loader.h"

namespace slimreduce::kernels::cuda {
namespace {

// The functions' types from the header (decltype links nothing).
using Create = decltype(&cublasCreate_v2);
using Destroy = decltype(&cublasDestroy_v2);
using SetStream = decltype(&cublasSetStream_v2);
using Sgemm = decltype(&cublasSgemm_v2);
using SetMathMode = decltype(&cublasSetMathMode);

struct Library {
  void* handle = nullptr;  // never closed: handles made from it live until exit
  Create create = nullptr;
  Destroy destroy = nullptr;
  SetStream set_stream = nullptr;
  Sgemm sgemm = nullptr;
  SetMathMode set_math_mode = nullptr;
  std::string why;  // empty when loaded
};

// Where to look: the newest soname first (one already loaded, by PyTorch
// say, is found by it; else the loader's paths); the unversioned name (a
// development install); then the toolkit's own folder, which a plain CUDA
// install does not put on the loader's paths.
std::vector<std::string> candidates() {
  std::vector<std::string> names = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  std::vector<std::string> folders;
  if (const char* home = std::getenv("CUDA_HOME")) folders.push_back(std::string(home) + "/lib64");
  folders.push_back("/usr/local/cuda/lib64");
  for (const std::string& folder : folders) {
    for (const char* soname : {"libcublas.so.13", "libcublas.so.12"})
      names.push_back(folder + "/" + soname);
  }
  return names;
}

// Loaded once per process. RTLD_LOCAL: its symbols stay out of the global scope.
const Library& library() {
  static const Library lib = [] {
    Library l;
    std::string errors;
    for (const std::string& name : candidates()) {
      l.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (l.handle) break;
      const char* error = dlerror();
      errors += std::string(errors.empty() ? "" : "; ") + (error ? error : name);
    }
    if (!l.handle) {
      l.why = "cannot load cuBLAS: " + errors;
      return l;
    }
    l.create = reinterpret_cast<Create>(dlsym(l.handle, "cublasCreate_v2"));
    l.destroy = reinterpret_cast<Destroy>(dlsym(l.handle, "cublasDestroy_v2"));
    l.set_stream = reinterpret_cast<SetStream>(dlsym(l.handle, "cublasSetStream_v2"));
    l.sgemm = reinterpret_cast<Sgemm>(dlsym(l.handle, "cublasSgemm_v2"));
    l.set_math_mode = reinterpret_cast<SetMathMode>(dlsym(l.handle, "cublasSetMathMode"));
    if (!l.create || !l.destroy || !l.set_stream || !l.sgemm || !l.set_math_mode) {
      l.why =
          "cuBLAS lacks cublasCreate_v2, cublasDestroy_v2, cublasSetStream_v2, "
          "cublasSgemm_v2 or cublasSetMathMode";
      l.sgemm = nullptr;
    }
    return l;
  }();
  return lib;
}

// One handle per (device, thread): a handle's stream is state, so two threads
// sharing one would race on cublasSetStream. A failed creation is remembered
// too (its status), so it is not retried on every call.
struct Handles {
  std::mutex mutex;
  std::map<std::pair<int, std::thread::id>, std::pair<cublasHandle_t, std::string>> by_key;
};
// Its destructor at exit frees the map only: the handles themselves are
// never destroyed (cublas_loader.h says why).
Handles& handles() {
  static Handles h;
  return h;
}

// The handle of the current device and this thread (made on first use), or
// nullptr with why set.
cublasHandle_t handle_for_thread(std::string* why) {
  const Library& lib = library();
  if (!lib.why.empty()) {
    if (why) *why = lib.why;
    return nullptr;
  }
  int device = 0;
  if (const cudaError_t rc = cudaGetDevice(&device); rc != cudaSuccess) {
    if (why) *why = std::string("cudaGetDevice: ") + cudaGetErrorString(rc);
    return nullptr;
  }
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mutex);
  const auto key = std::make_pair(device, std::this_thread::get_id());
  auto found = h.by_key.find(key);
  if (found == h.by_key.end()) {
    // Default math: plain fp32 arithmetic, no TF32 tensor-core rounding of
    // the inputs (that takes CUBLAS_TF32_TENSOR_OP_MATH), so the products stay
    // within fp32 rounding of the exact ones.
    cublasHandle_t handle = nullptr;
    std::string failure;
    if (const cublasStatus_t s = lib.create(&handle); s != CUBLAS_STATUS_SUCCESS) {
      failure = "cublasCreate failed (status " + std::to_string(static_cast<int>(s)) + ")";
      handle = nullptr;
    } else if (const cublasStatus_t m = lib.set_math_mode(handle, CUBLAS_DEFAULT_MATH);
               m != CUBLAS_STATUS_SUCCESS) {
      failure = "cublasSetMathMode failed (status " + std::to_string(static_cast<int>(m)) + ")";
      lib.destroy(handle);
      handle = nullptr;
    }
    found = h.by_key.emplace(key, std::make_pair(handle, failure)).first;
  }
  if (!found->second.first && why) *why = found->second.second;
  return found->second.first;
}

}  // namespace

bool cublas_available(std::string* why) { return handle_for_thread(why) != nullptr; }

bool cublas_loadable(std::string* why) {
  const Library& lib = library();
  if (!lib.why.empty() && why) *why = lib.why;
  return lib.why.empty();
}

namespace detail {

cublasHandle_t cublas_handle(cudaStream_t stream) {
  cublasHandle_t handle = handle_for_thread(nullptr);
  if (!handle) return nullptr;
  // Only this thread uses this handle, so setting its stream needs no lock.
  if (library().set_stream(handle, stream) != CUBLAS_STATUS_SUCCESS) return nullptr;
  return handle;
}

cublasStatus_t cublas_sgemm(cublasHandle_t handle, cublasOperation_t a_op, cublasOperation_t b_op,
                            int m, int n, int k, const float* alpha, const float* a, int lda,
                            const float* b, int ldb, const float* beta, float* c, int ldc) {
  const Library& lib = library();
  if (!lib.sgemm) return CUBLAS_STATUS_NOT_INITIALIZED;
  return lib.sgemm(handle, a_op, b_op, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace detail
}  // namespace slimreduce::kernels::cuda
