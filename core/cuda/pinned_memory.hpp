// The host tier's memory on CUDA: page-locked, mapped host memory that copies reach at full
// PCIe speed and kernels can read in place (the final id lookup). Plain device-visible host
// memory: never managed (unified) memory, which can hang a shared GPU when oversubscribed.
#pragma once

#include <memory>

#include "../tier/host_arena.hpp"

namespace ivfgpu::cuda {

std::shared_ptr<tier::HostMemory> pinned_host_memory();

}  // namespace ivfgpu::cuda
