// A grow-only page-locked host buffer: the small-batch graphs' staging (small_batch.hpp). A
// graph's copy nodes need host memory that stays put and that the copy engine reads directly;
// the fused kernels (fused_search.hpp) read and write it in place (it is mapped).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace ivfgpu::cuda {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() { release(); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least `bytes` of pinned memory (contents lost when it grows). Errc::OutOfHostMemory.
  // Returns true when the buffer moved (whoever kept its address must forget it).
  bool reserve(std::size_t bytes);
  unsigned char* data() const { return data_; }
  std::size_t capacity() const { return capacity_; }

 private:
  void release() noexcept;
  unsigned char* data_ = nullptr;
  std::size_t capacity_ = 0;
};

}  // namespace ivfgpu::cuda
