// One checking family for CUDA and cuBLAS calls: every failure becomes an ivfgpu::Error.
//   cudaErrorMemoryAllocation / CUBLAS_STATUS_ALLOC_FAILED -> Errc::OutOfDeviceMemory (cleared)
//   sticky errors (illegal address, launch failure, ...)  -> Errc::DeviceLost
//   anything else                                         -> Errc::Cuda (cleared)
// The backend turns the first DeviceLost into a permanent state (see cuda_backend.cu).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "../errors.hpp"

namespace ivfgpu::cuda {

// True for errors that leave the CUDA context unusable for the rest of the process.
bool is_sticky(cudaError_t e) noexcept;

// Runs a call that may synchronise the whole device (pinned allocation, registration and
// release) and so be refused with cudaErrorStreamCaptureUnsupported while another thread
// captures a search graph (small_batch.hpp; cudaDeviceSynchronize was seen refused): retried
// every 50 us until the capture has ended (a capture takes well under a millisecond), for at
// most a second. Returns the call's last result.
cudaError_t retry_during_capture(cudaError_t (*call)(void*), void* arg) noexcept;
template <class F>
cudaError_t retry_during_capture(F&& f) noexcept {
  using Fn = std::remove_reference_t<F>;
  return retry_during_capture([](void* a) { return (*static_cast<Fn*>(a))(); }, static_cast<void*>(&f));
}

[[noreturn]] void throw_cuda(cudaError_t e, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* expr, const char* file, int line);

}  // namespace ivfgpu::cuda

#define IVF_CUDA_CHECK(expr)                                                              \
  do {                                                                                    \
    const cudaError_t ivf_e_ = (expr);                                                    \
    if (ivf_e_ != cudaSuccess) ::ivfgpu::cuda::throw_cuda(ivf_e_, #expr, __FILE__, __LINE__); \
  } while (0)

#define IVF_CUBLAS_CHECK(expr)                                                                  \
  do {                                                                                          \
    const cublasStatus_t ivf_s_ = (expr);                                                       \
    if (ivf_s_ != CUBLAS_STATUS_SUCCESS) ::ivfgpu::cuda::throw_cublas(ivf_s_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch-configuration errors are reported here, faults later.
#define IVF_CUDA_CHECK_LAUNCH() IVF_CUDA_CHECK(cudaPeekAtLastError())
