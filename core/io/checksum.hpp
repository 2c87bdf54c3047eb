// The checksum of the native file format: XXH64 with seed 0 (docs/file-format.md).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ivfgpu::io {

uint64_t checksum64(const void* data, std::size_t n);

}  // namespace ivfgpu::io
