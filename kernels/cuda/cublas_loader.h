// cuBLAS resolved at run time and privately (dlopen with RTLD_LOCAL), never
// linked: libslimreduce.so must load where there is no CUDA at all, and a job
// that links its own cuBLAS keeps its own symbols. Only the five functions the
// PowerSGD products need are looked up (kernels/cuda/low_rank.cu).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/kernels.h"

namespace slimreduce::kernels::cuda {

// cublas_available(why) is declared in kernels/cuda/kernels.h.

namespace detail {

// The handle of the current device and this thread, bound to `stream`, or
// nullptr when cuBLAS is unavailable. Handles are kept for the life of the
// process (one per device and thread that ever asked): destroying them at
// exit could run after the CUDA runtime is torn down.
cublasHandle_t cublas_handle(cudaStream_t stream);

// cublasSgemm_v2 through the loaded library; CUBLAS_STATUS_NOT_INITIALIZED
// when it is not loaded.
cublasStatus_t cublas_sgemm(cublasHandle_t handle, cublasOperation_t a_op, cublasOperation_t b_op,
                            int m, int n, int k, const float* alpha, const float* a, int lda,
                            const float* b, int ldb, const float* beta, float* c, int ldc);

}  // namespace detail
}  // namespace slimreduce::kernels::cuda
