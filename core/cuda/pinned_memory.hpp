// Page-locked, mapped host memory: copies reach it at full PCIe speed and kernels can read it
// in place. Two users: the host tier's lists (pinned_host_memory, whose final id lookup reads
// it from kernels) and callers' query and result buffers (ivf_host_alloc, ivf_host_register:
// core/host_buffers.cpp). Plain device-visible host memory, portable to every device: never
// managed (unified) memory, which can hang a shared GPU when oversubscribed.
#pragma once

#include <cstddef>
#include <memory>

#include "../tier/host_arena.hpp"

namespace ivfgpu::cuda {

// `what` begins each error message. allocate: Errc::OutOfHostMemory. register_range:
// Errc::InvalidArgument where the driver refuses the range (already registered, not host
// memory), Errc::OutOfHostMemory where it cannot lock it (e.g. the memlock limit), else Cuda.
std::shared_ptr<tier::HostMemory> pinned_host_memory(const char* what = "host tier");

}  // namespace ivfgpu::cuda
