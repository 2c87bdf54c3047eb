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
  void* allocate(std::size_t bytes, void** device) override {
    void* p = pinned_allocate(bytes, "host tier");
    *device = device_address(p);
    return p;
  }
  void release(void* p) noexcept override { pinned_release(p); }
  void register_range(void* p, std::size_t bytes, void** device) override {
    pinned_register(p, bytes, "host tier: loaded lists");
    *device = device_address(p);
  }
  void unregister_range(void* p) noexcept override { pinned_unregister(p); }
};

}  // namespace

std::shared_ptr<tier::HostMemory> pinned_host_memory() { return std::make_shared<Pinned>(); }

void* pinned_allocate(std::size_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t e = retry_during_capture([&] { return cudaHostAlloc(&p, bytes, kAllocFlags); });
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    fail(Errc::OutOfHostMemory, std::string(what) + ": cannot allocate " + std::to_string(bytes) +
                                    " bytes of pinned host memory (" + cudaGetErrorString(e) + ")");
  }
  return p;
}

void pinned_release(void* p) noexcept { (void)retry_during_capture([&] { return cudaFreeHost(p); }); }

void pinned_register(void* p, std::size_t bytes, const char* what) {
  const cudaError_t e = retry_during_capture([&] { return cudaHostRegister(p, bytes, kRegisterFlags); });
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  const Errc code = e == cudaErrorHostMemoryAlreadyRegistered || e == cudaErrorInvalidValue ? Errc::InvalidArgument
                    : e == cudaErrorMemoryAllocation                                         ? Errc::OutOfHostMemory
                                                                                             : Errc::Cuda;
  fail(code, std::string(what) + ": cannot pin " + std::to_string(bytes) + " bytes of host memory (" +
                 cudaGetErrorString(e) + ")");
}

void pinned_unregister(void* p) noexcept { (void)retry_during_capture([&] { return cudaHostUnregister(p); }); }

}  // namespace ivfgpu::cuda
