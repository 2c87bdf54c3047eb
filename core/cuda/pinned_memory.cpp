#include "pinned_memory.hpp"

#include <cuda_runtime.h>

#include <string>

#include "../errors.hpp"
#include "check.hpp"

namespace ivfgpu::cuda {

namespace {

constexpr unsigned kAllocFlags = cudaHostAllocPortable | cudaHostAllocMapped;
constexpr unsigned kRegisterFlags = cudaHostRegisterPortable | cudaHostRegisterMapped;

void* device_address(void* p) {
  void* d = nullptr;
  if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return p;  // unified addressing: the host pointer is the device's
  }
  return d;
}

class Pinned final : public tier::HostMemory {
 public:
  explicit Pinned(const char* what) : what_(what) {}

  void* allocate(std::size_t bytes, void** device) override {
    void* p = nullptr;
    const cudaError_t e = retry_during_capture([&] { return cudaHostAlloc(&p, bytes, kAllocFlags); });
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      fail(Errc::OutOfHostMemory, what_ + ": cannot allocate " + std::to_string(bytes) +
                                      " bytes of pinned host memory (" + cudaGetErrorString(e) + ")");
    }
    *device = device_address(p);
    return p;
  }
  void release(void* p) noexcept override { (void)retry_during_capture([&] { return cudaFreeHost(p); }); }

  void register_range(void* p, std::size_t bytes, void** device) override {
    const cudaError_t e = retry_during_capture([&] { return cudaHostRegister(p, bytes, kRegisterFlags); });
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      const Errc code = e == cudaErrorHostMemoryAlreadyRegistered || e == cudaErrorInvalidValue ? Errc::InvalidArgument
                        : e == cudaErrorMemoryAllocation                                         ? Errc::OutOfHostMemory
                                                                                                 : Errc::Cuda;
      fail(code, what_ + ": cannot pin " + std::to_string(bytes) + " bytes of host memory (" + cudaGetErrorString(e) +
                     ")");
    }
    *device = device_address(p);
  }
  void unregister_range(void* p) noexcept override {
    (void)retry_during_capture([&] { return cudaHostUnregister(p); });
  }

 private:
  std::string what_;
};

}  // namespace

std::shared_ptr<tier::HostMemory> pinned_host_memory(const char* what) { return std::make_shared<Pinned>(what); }

}  // namespace ivfgpu::cuda
