#include "scratch_arena.hpp"

#include "check.hpp"

namespace ivfgpu::cuda {

namespace {

constexpr std::size_t kAlign = 256;  // as the pool's blocks: vector loads and cuBLAS need it

thread_local const DeviceContext* tl_ctx = nullptr;
thread_local ScratchArena* tl_arena = nullptr;

}  // namespace

bool ScratchArena::reserve(const DeviceContext& ctx, std::size_t bytes, cudaStream_t stream) {
  if (bytes <= region_.size() && region_.data() != nullptr) return false;
  region_.reset();
  region_ = DeviceBuffer<unsigned char>(ctx, bytes, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(region_.data(), 0, region_.bytes(), stream));
  return true;
}

void* ScratchArena::take(std::size_t bytes) {
  const std::size_t at = used_;
  used_ += (bytes + kAlign - 1) / kAlign * kAlign;
  return region_.data() + (used_ <= region_.size() ? at : 0);
}

bool ScratchArena::owns(const void* p) const {
  const auto* c = static_cast<const unsigned char*>(p);
  return region_.data() != nullptr && c >= region_.data() && c < region_.data() + region_.size();
}

ArenaScope::ArenaScope(const DeviceContext& ctx, ScratchArena& arena) : saved_ctx_(tl_ctx), saved_arena_(tl_arena) {
  arena.restart();
  tl_ctx = &ctx;
  tl_arena = &arena;
}

ArenaScope::~ArenaScope() {
  tl_ctx = saved_ctx_;
  tl_arena = saved_arena_;
}

ScratchArena* active_arena(const DeviceContext& ctx) noexcept { return tl_ctx == &ctx ? tl_arena : nullptr; }

}  // namespace ivfgpu::cuda
