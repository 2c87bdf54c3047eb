// xxHash64 (Debian's libxxhash-dev, used header-only so that no library has to be linked or
// installed where the engine is built). Private to core/io: include it from .cpp files only.
#pragma once

#include <cstddef>
#include <cstdint>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace ivfgpu::io {

// Incremental XXH64 with seed 0: update() in pieces gives the same digest as one call.
class Xxh64Stream {
 public:
  Xxh64Stream() { XXH64_reset(&state_, 0); }
  void update(const void* data, std::size_t n) { XXH64_update(&state_, data, n); }
  uint64_t digest() const { return XXH64_digest(&state_); }

 private:
  XXH64_state_t state_;
};

}  // namespace ivfgpu::io
