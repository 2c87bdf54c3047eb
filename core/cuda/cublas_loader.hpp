// cuBLAS, loaded at first GPU use with dlopen instead of linked: the toolkit ships no static
// cuBLAS, and a load-time dependency on libcublas.so would stop the whole library (CPU backend
// included) from loading on a machine without the CUDA toolkit's libraries. The calls the
// engine makes go through these wrappers, which load the library on first use (once per
// process; it then stays loaded: RTLD_NODELETE, since it cannot be torn down and brought back
// cleanly) and throw Errc::Unsupported, naming the library and the loader's reason, when it
// cannot be loaded.
#pragma once

#include <cstddef>
#include <cublas_v2.h>

#include <string>

namespace ivfgpu::cuda::blas {

// True when cuBLAS is (or can be) loaded; otherwise *why says why.
bool available(std::string* why = nullptr);

cublasStatus_t create(cublasHandle_t* handle);
cublasStatus_t destroy(cublasHandle_t handle) noexcept;
cublasStatus_t set_stream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t set_math_mode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t set_workspace(cublasHandle_t handle, void* workspace, std::size_t bytes);
cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta, float* c,
                     int ldc);
const char* status_name(cublasStatus_t status) noexcept;

}  // namespace ivfgpu::cuda::blas
