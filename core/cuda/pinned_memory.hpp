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

std::shared_ptr<tier::HostMemory> pinned_host_memory();

// `what` begins each error message. pinned_allocate: Errc::OutOfHostMemory. pinned_register:
// Errc::InvalidArgument where the driver refuses the range (already registered, not host
// memory), Errc::OutOfHostMemory where it cannot lock it (e.g. the memlock limit), else Cuda.
void* pinned_allocate(std::size_t bytes, const char* what);
void pinned_release(void* p) noexcept;
void pinned_register(void* p, std::size_t bytes, const char* what);
void pinned_unregister(void* p) noexcept;

}  // namespace ivfgpu::cuda
