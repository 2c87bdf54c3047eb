// What the library asks of a caller's device memory (IVF_MEMORY_DEVICE) before a call uses it:
// that the device can address it, and that the caller's work on it is done.
#pragma once

#include <cstddef>

#include "../backend.hpp"

namespace ivfgpu::cuda {

// Errc::InvalidArgument, naming r.what, unless the first and last byte of r lie in memory that
// kernels on `device` can address: an allocation of that device (cudaMalloc, cudaMallocAsync,
// a virtual-memory mapping), managed memory, or page-locked host memory mapped at the same
// address. A pageable host pointer given as device memory would otherwise fault the kernels and
// lose the device for the whole process (IVF_ERR_DEVICE_LOST).
void check_device_range(int device, const DeviceRange& r);

// Blocks until the work queued on `device`'s default streams (the legacy one, and the calling
// thread's per-thread one) is done. The library's streams are non-blocking, so they do not
// wait for it themselves, and a cudaMemcpy from pageable memory or a cudaMemset returns before
// its bytes land: a device-memory call right after one would read or write under it.
void wait_for_default_streams(int device);

// Both, as Backend::accept_device_memory asks for a backend on `device`.
void accept_device_memory(int device, std::initializer_list<DeviceRange> ranges, bool synchronous);

}  // namespace ivfgpu::cuda
