#include "caller_memory.hpp"

#include <cuda_runtime.h>

#include <string>

#include "../errors.hpp"
#include "check.hpp"
#include "device_context.hpp"

namespace ivfgpu::cuda {

namespace {

// Why the byte at p is not one kernels on `device` can address, or "" when it is.
std::string unusable_byte(int device, const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: an address the driver does not know
    return "is not CUDA device memory";
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
      if (a.device != device)
        return "is memory of CUDA device " + std::to_string(a.device) + "; the index is on device " +
               std::to_string(device);
      return "";
    case cudaMemoryTypeManaged:
      return "";
    case cudaMemoryTypeHost:
      if (a.devicePointer != p) return "is page-locked host memory not mapped at the same address on the device";
      return "";
    default:
      return "is not CUDA device memory (host memory takes IVF_MEMORY_HOST)";
  }
}

}  // namespace

void check_device_range(int device, const DeviceRange& r) {
  if (r.bytes == 0) return;
  if (r.data == nullptr) fail(Errc::InvalidArgument, std::string(r.what) + " is NULL");
  std::string why = unusable_byte(device, r.data);
  if (why.empty()) {
    why = unusable_byte(device, static_cast<const unsigned char*>(r.data) + (r.bytes - 1));
    if (!why.empty()) why = "(its last byte, " + std::to_string(r.bytes - 1) + " bytes on) " + why;
  }
  if (!why.empty()) fail(Errc::InvalidArgument, std::string(r.what) + " (IVF_MEMORY_DEVICE) " + why);
}

// Asked first, synchronised only when busy: on idle streams the query is the cheaper call
// (batch-1 device-memory searches on the H200, p50: 33 / 33-36 / 36 us with no wait, queries
// first, synchronisations only at nprobe 1; bench/RESULTS.md).
void wait_for_default_streams(int device) {
  DeviceGuard guard(device);
  for (cudaStream_t s : {cudaStreamLegacy, cudaStreamPerThread}) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) continue;
    if (e != cudaErrorNotReady) IVF_CUDA_CHECK(e);
    (void)cudaGetLastError();  // "not ready" is an answer, not an error to leave behind
    IVF_CUDA_CHECK(cudaStreamSynchronize(s));
  }
}

void accept_device_memory(int device, std::initializer_list<DeviceRange> ranges, bool synchronous) {
  for (const DeviceRange& r : ranges) check_device_range(device, r);
  if (synchronous) wait_for_default_streams(device);
}

}  // namespace ivfgpu::cuda
