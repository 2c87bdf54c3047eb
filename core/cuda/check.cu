#include "check.hpp"

#include "cublas_loader.hpp"

#include <chrono>
#include <string>
#include <thread>

namespace ivfgpu::cuda {

bool is_sticky(cudaError_t e) noexcept {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
    case cudaErrorCudartUnloading:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

cudaError_t retry_during_capture(cudaError_t (*call)(void*), void* arg) noexcept {
  cudaError_t e = call(arg);
  for (int tries = 0; e == cudaErrorStreamCaptureUnsupported && tries < 20000; ++tries) {
    (void)cudaGetLastError();
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    e = call(arg);
  }
  return e;
}

void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  std::string where = std::string(expr) + " (" + file + ":" + std::to_string(line) + "): " +
                      cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it and carry on
    throw Error(Errc::OutOfDeviceMemory, "out of device memory in " + where);
  }
  if (is_sticky(e)) throw Error(Errc::DeviceLost, "the CUDA device is lost: " + where);
  (void)cudaGetLastError();
  throw Error(Errc::Cuda, "CUDA error in " + where);
}

void throw_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  std::string where = std::string(expr) + " (" + file + ":" + std::to_string(line) + "): " +
                      blas::status_name(s);
  if (s == CUBLAS_STATUS_ALLOC_FAILED) {
    (void)cudaGetLastError();
    throw Error(Errc::OutOfDeviceMemory, "cuBLAS could not allocate device memory in " + where);
  }
  if (s == CUBLAS_STATUS_EXECUTION_FAILED) {
    const cudaError_t e = cudaPeekAtLastError();
    if (is_sticky(e)) throw Error(Errc::DeviceLost, "the CUDA device is lost: " + where);
  }
  (void)cudaGetLastError();
  throw Error(Errc::Cuda, "cuBLAS error in " + where);
}

}  // namespace ivfgpu::cuda
