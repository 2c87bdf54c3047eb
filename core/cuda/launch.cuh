// Launch arithmetic shared by every kernel file: grid sizes, grid-stride loops and radix-sort
// bit counts. One copy, so a limit (the 2^20-block cap, 64-bit strides) is fixed in one place.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace ivfgpu::cuda {

constexpr int kDefaultThreads = 256;
// Grid-stride kernels never need more blocks than this to fill any current GPU.
constexpr int64_t kMaxGridBlocks = int64_t{1} << 20;

// Blocks for `work` items at `threads` per block (at least 1, at most kMaxGridBlocks): kernels
// launched with it loop grid-stride over the rest.
inline unsigned grid_for(int64_t work, int threads = kDefaultThreads) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((work + threads - 1) / threads, kMaxGridBlocks)));
}

// As grid_for, capped at `per_sm` blocks per SM: for grid-stride kernels whose blocks each
// loop long enough that more blocks than the GPU holds at once only add scheduling.
inline unsigned grid_for_sms(int64_t work, int threads, int sm_count, int per_sm = 32) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t(sm_count) * per_sm)));
}

// Bits a radix sort needs for keys in [0, count).
inline int radix_end_bit(int64_t count) {
  int bits = 1;
  while ((int64_t{1} << bits) < count) ++bits;
  return bits;
}

// The first index and stride of a 64-bit grid-stride loop over threads (or warps).
__device__ __forceinline__ int64_t global_thread() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ int64_t thread_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
__device__ __forceinline__ int64_t global_warp() {
  return blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32;
}
__device__ __forceinline__ int64_t warp_stride() { return static_cast<int64_t>(gridDim.x) * (blockDim.x / 32); }

}  // namespace ivfgpu::cuda
