// A private OpenBLAS (Debian's libopenblas0-serial) for PowerSGD's two skinny
// products, resolved at run time: never a load-time dependency of
// libslimreduce.so, and loaded into a link-map namespace of its own
// (dlmopen(LM_ID_NEWLM)), so its symbols, its buffers and its settings are
// invisible to the job: a job's numpy or PyTorch that loads the very same
// file gets its own copy, as it would without SlimReduce
// (docs/architecture.md, "Low rank", "A private BLAS").
#pragma once

#include <memory>
#include <mutex>
#include <string>

namespace slimreduce::kernels {

class PrivateBlas {
 public:
  // Where Debian's serial OpenBLAS lies on this machine's multiarch path (the
  // single-threaded flavour: no threads started in the job's process, one
  // order of adds run to run). Other flavours are never loaded.
  static const char* default_path();

  // The process's private copy, loaded from default_path() at the first call
  // (once, thread-safe) and kept until exit; nullptr when it cannot be loaded
  // (not installed, or no dlmopen), and then callers use their own loops.
  static const PrivateBlas* process();
  // Why process() is nullptr (the loader's message), or "" when it is not.
  static const std::string& process_failure();

  // A private copy of the OpenBLAS at path, in a namespace of its own;
  // nullptr (with the loader's reason in *why) when it cannot be loaded.
  static std::unique_ptr<PrivateBlas> load(const char* path, std::string* why = nullptr);

  struct Key {  // only load() makes one
   private:
    friend class PrivateBlas;
    Key() = default;
  };
  explicit PrivateBlas(Key) {}
  ~PrivateBlas();
  PrivateBlas(const PrivateBlas&) = delete;
  PrivateBlas& operator=(const PrivateBlas&) = delete;

  // Row-major C (m x n) = op(A) B, op(A) = A (m x k, lda) or A^T (A: k x m,
  // lda), B k x n (ldb): cblas_sgemm with alpha 1, beta 0. Calls are
  // serialised (one at a time in the process), as the serial flavour's
  // buffers may not be shared by threads.
  void sgemm(bool transpose_a, int m, int n, int k, const float* a, int lda, const float* b,
             int ldb, float* c, int ldc) const;

  // y (m or n) = op(A) x with A row-major m x n (lda): cblas_sgemv with
  // alpha 1, beta 0; op(A) = A^T takes x of m and gives y of n. Serialised.
  void sgemv(bool transpose_a, int m, int n, const float* a, int lda, const float* x,
             float* y) const;

  // "OpenBLAS 0.3.21 ... SINGLE_THREADED, core SkylakeX, /usr/lib/.../libopenblas.so.0".
  const std::string& description() const { return description_; }

 private:
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
  struct Closer {
    void operator()(void* handle) const;
  };
  std::unique_ptr<void, Closer> handle_;
  using Sgemv = void (*)(int, int, int, int, float, const float*, int, const float*, int, float,
                         float*, int);
  Sgemm sgemm_ = nullptr;
  Sgemv sgemv_ = nullptr;
  std::string description_;
  mutable std::mutex mutex_;
};

}  // namespace slimreduce::kernels
