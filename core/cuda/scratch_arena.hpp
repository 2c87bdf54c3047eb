// A linear scratch region that stands in for the pool while a search is captured into a CUDA
// graph (small_batch.hpp). A graph replays the addresses it was captured with, so its scratch
// must stay where it was: every DeviceBuffer made on the capturing thread for the arena's
// context takes the next piece of the arena instead of a pool block, and freeing it is a no-op.
// Nothing runs during a capture, so a capture that asks for more than the arena holds is simply
// captured again once the arena has grown to what it asked (the pieces handed out past the end
// alias the arena's start meanwhile: valid memory, never used).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "device_buffer.hpp"
#include "device_context.hpp"

namespace ivfgpu::cuda {

class ScratchArena {
 public:
  // At least `bytes`, zero-filled when it grows (on `stream`). Returns true when it moved.
  bool reserve(const DeviceContext& ctx, std::size_t bytes, cudaStream_t stream);
  std::size_t capacity() const { return region_.size(); }
  void* base() const { return region_.data(); }
  void release() noexcept { region_.reset(); }

  // Bump allocation while a capture runs.
  void restart() { used_ = 0; }
  void* take(std::size_t bytes);
  std::size_t needed() const { return used_; }
  bool overflowed() const { return used_ > region_.size(); }
  bool owns(const void* p) const;

 private:
  DeviceBuffer<unsigned char> region_;
  std::size_t used_ = 0;
};

// While alive, allocations for `ctx` on this thread come from `arena` (restarted here).
class ArenaScope {
 public:
  ArenaScope(const DeviceContext& ctx, ScratchArena& arena);
  ~ArenaScope();
  ArenaScope(const ArenaScope&) = delete;
  ArenaScope& operator=(const ArenaScope&) = delete;

 private:
  const DeviceContext* saved_ctx_;
  ScratchArena* saved_arena_;
};

// The arena allocations for `ctx` come from on this thread, or null (DeviceContext::allocate).
ScratchArena* active_arena(const DeviceContext& ctx) noexcept;

}  // namespace ivfgpu::cuda
