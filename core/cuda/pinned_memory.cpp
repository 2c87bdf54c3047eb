#include "pinned_memory.hpp"

#include <cuda_runtime.h>

#include <string>

#include "../errors.hpp"
#include "check.hpp"

namespace ivfgpu::cuda {

namespace {

class Pinned final : public tier::HostMemory {
 public:
  void* allocate(std::size_t bytes, void** device) override {
    void* p = nullptr;
    const cudaError_t e =
        retry_during_capture([&] { return cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped); });
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      fail(Errc::OutOfHostMemory, "host tier: cannot allocate " + std::to_string(bytes >> 20) +
                                      " MiB of pinned host memory (" + cudaGetErrorString(e) + ")");
    }
    *device = device_address(p);
    return p;
  }
  void release(void* p) noexcept override { (void)retry_during_capture([&] { return cudaFreeHost(p); }); }

  void register_range(void* p, std::size_t bytes, void** device) override {
    const cudaError_t e = retry_during_capture(
        [&] { return cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped); });
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      fail(Errc::OutOfHostMemory, "host tier: cannot pin " + std::to_string(bytes >> 20) + " MiB of loaded lists (" +
                                      cudaGetErrorString(e) + ")");
    }
    *device = device_address(p);
  }
  void unregister_range(void* p) noexcept override {
    (void)retry_during_capture([&] { return cudaHostUnregister(p); });
  }

 private:
  static void* device_address(void* p) {
    void* d = nullptr;
    if (cudaHostGetDevicePointer(&d, p, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      return p;  // unified addressing: the host pointer is the device's
    }
    return d;
  }
};

}  // namespace

std::shared_ptr<tier::HostMemory> pinned_host_memory() { return std::make_shared<Pinned>(); }

}  // namespace ivfgpu::cuda
