#include "pinned_buffer.hpp"

#include <algorithm>
#include <string>

#include "../errors.hpp"
#include "check.hpp"

namespace ivfgpu::cuda {

bool PinnedBuffer::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return false;
  release();
  // Round up (by an eighth, at least 64 KiB) so that slowly growing calls do not re-pin each time.
  const std::size_t want = std::max<std::size_t>(bytes + bytes / 8, std::size_t{64} << 10);
  void* p = nullptr;
  const cudaError_t e = retry_during_capture([&] { return cudaHostAlloc(&p, want, cudaHostAllocPortable | cudaHostAllocMapped); });
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    fail(Errc::OutOfHostMemory, "search: cannot allocate " + std::to_string(want >> 10) +
                                    " KiB of pinned staging memory (" + cudaGetErrorString(e) + ")");
  }
  data_ = static_cast<unsigned char*>(p);
  capacity_ = want;
  return true;
}

void PinnedBuffer::release() noexcept {
  if (data_ != nullptr) (void)retry_during_capture([&] { return cudaFreeHost(data_); });
  data_ = nullptr;
  capacity_ = 0;
}

}  // namespace ivfgpu::cuda
