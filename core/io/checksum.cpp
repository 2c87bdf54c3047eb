#include "checksum.hpp"

#include "xxhash_inline.hpp"

namespace ivfgpu::io {

uint64_t checksum64(const void* data, std::size_t n) { return XXH64(data, n, 0); }

}  // namespace ivfgpu::io
