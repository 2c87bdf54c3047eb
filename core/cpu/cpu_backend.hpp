// The CPU reference backend: the oracle for the GPU backend and the fallback without a GPU.
#pragma once

#include <memory>

#include "../backend.hpp"

namespace ivfgpu::cpu {

std::unique_ptr<Backend> make_cpu_backend(int64_t dim, const BuildParams& params);

}  // namespace ivfgpu::cpu
