// RAII for a stream-ordered device allocation of T[n] from a DeviceContext's pool.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "device_context.hpp"

namespace ivfgpu::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceContext& ctx, std::size_t n, cudaStream_t stream, MemoryUse use = MemoryUse::Scratch)
      : ctx_(&ctx), stream_(stream), n_(n),
        data_(static_cast<T*>(ctx.allocate(n * sizeof(T), stream, use))) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ctx_ = std::exchange(o.ctx_, nullptr);
      stream_ = std::exchange(o.stream_, nullptr);
      n_ = std::exchange(o.n_, 0);
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void reset() noexcept {
    if (data_ && ctx_) ctx_->deallocate(data_, stream_);
    data_ = nullptr;
    n_ = 0;
  }
  // Frees later on another stream (a buffer that outlives the call that made it).
  void set_stream(cudaStream_t s) noexcept { stream_ = s; }

  T* data() const { return data_; }
  std::size_t size() const { return n_; }
  std::size_t bytes() const { return n_ * sizeof(T); }

 private:
  const DeviceContext* ctx_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::size_t n_ = 0;
  T* data_ = nullptr;
};

}  // namespace ivfgpu::cuda
