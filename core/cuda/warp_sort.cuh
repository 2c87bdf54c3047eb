// Sorted 32-entry lists held across a warp's lanes (lane i holds the i-th smallest): a sort and
// merges by bitonic networks, with no shared memory and no serial insertion. The pruned pass's
// settling (scan_prune.cuh) and the fused small-batch merge (fused_search.cu) keep their k <= 32
// best this way.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ivfgpu::cuda {

// Sorts the warp's 32 keys ascending across lanes (bitonic network).
__device__ __forceinline__ uint64_t warp_sort32(uint64_t key) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int size = 2; size <= 32; size *= 2)
#pragma unroll
    for (int j = size / 2; j > 0; j /= 2) {
      const uint64_t other = __shfl_xor_sync(0xffffffffu, key, j);
      const bool ascending = (lane & size) == 0;  // size 32: the whole warp ascending
      const bool lower = (lane & j) == 0;
      key = (lower == ascending) ? (key < other ? key : other) : (key > other ? key : other);
    }
  return key;
}

// best and fresh, both sorted ascending across lanes: the 32 smallest of the two, sorted.
__device__ __forceinline__ uint64_t warp_merge_sorted32(uint64_t best, uint64_t fresh) {
  const int lane = threadIdx.x % 32;
  const uint64_t rev = __shfl_sync(0xffffffffu, fresh, 31 - lane);
  uint64_t key = best < rev ? best : rev;  // the 32 smallest, as a bitonic sequence
#pragma unroll
  for (int j = 16; j > 0; j /= 2) {
    const uint64_t other = __shfl_xor_sync(0xffffffffu, key, j);
    key = (lane & j) == 0 ? (key < other ? key : other) : (key > other ? key : other);
  }
  return key;
}

// best (sorted ascending across lanes) becomes the 32 smallest of best and fresh (any order).
__device__ __forceinline__ uint64_t warp_merge32(uint64_t best, uint64_t fresh) {
  return warp_merge_sorted32(best, warp_sort32(fresh));
}

}  // namespace ivfgpu::cuda
