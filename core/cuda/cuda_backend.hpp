// The CUDA backend's entry points, seen by backend_factory.cpp (plain C++: no CUDA types).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../backend.hpp"
#include "../part_exchange.hpp"

namespace ivfgpu::cuda {

// CUDA devices this process can use: 0 when the driver is missing, no device exists, or cuBLAS
// (loaded on first use) cannot be loaded; *why (optional) then says which.
int usable_device_count(std::string* why = nullptr);

std::unique_ptr<Backend> make_cuda_backend(int64_t dim, const BuildParams& params);
// The backend of an index with a device budget: lists in the host tier (tiered_backend.cu).
std::unique_ptr<Backend> make_tiered_backend(int64_t dim, const BuildParams& params);
// The exchange of an index of several CUDA parts, part p on devices[p] (part_exchange.cu).
std::unique_ptr<PartExchange> make_part_exchange(std::vector<int> devices);
// Blocks until a caller's cudaStream_t (given as void*) has drained.
void wait_for_stream(void* stream);

}  // namespace ivfgpu::cuda
