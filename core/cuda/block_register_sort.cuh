// A block's bitonic sort of 256 to 16 x blockDim keys with the keys in registers (block_sort):
// the wide settle's sort of its k best (scan_prune.cuh). block_bitonic_sort (warp_sort.cuh) reads
// and writes both keys of every pair in shared memory at each of a sort's stages: 78 stages at
// 4,096 keys, bound by shared-memory bandwidth (the wide settle at k 4096 took 3.6 ms of a 12 ms
// batch, H100, session 74). Here thread t holds keys t E .. t E + E - 1 (E = m / blockDim) in
// registers: a stage whose pairs lie under E apart is a compare-exchange in registers, one whose
// pairs lie in one warp a shuffle, and only the stages reaching across warps (6 of 78 at 4,096
// keys) go through shared memory, where thread t's r-th key sits at r x blockDim + t so that a
// warp's lanes touch consecutive words. The sorted keys land at a[i] as block_bitonic_sort leaves
// them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "warp_sort.cuh"

namespace ivfgpu::cuda {

namespace register_sort_detail {

// 64-bit shared-memory words by address: the sorts are out of line (one copy per key count, not
// one per kernel that sorts), where a generic pointer would not be known to be shared.
__device__ __forceinline__ unsigned long long load_shared(uint32_t at) {
  unsigned long long v;
  asm volatile("ld.shared.u64 %0, [%1];" : "=l"(v) : "r"(at) : "memory");
  return v;
}
__device__ __forceinline__ void store_shared(uint32_t at, unsigned long long v) {
  asm volatile("st.shared.u64 [%0], %1;" ::"r"(at), "l"(v) : "memory");
}

// Keeps the smaller of x and y where keep_min, else the larger.
__device__ __forceinline__ unsigned long long keep_of(unsigned long long x, unsigned long long y, bool keep_min) {
  return (x < y) == keep_min ? x : y;
}

// The stages of one merge size whose pairs lie in one thread (strides under E): keys first + r.
template <int E>
__device__ __forceinline__ void merge_in_registers(unsigned long long (&v)[E], int size, int first) {
#pragma unroll
  for (int s = E / 2; s > 0; s /= 2) {
    if (s >= size) continue;  // a merge of `size` keys starts at stride size / 2
#pragma unroll
    for (int r = 0; r < E; ++r) {
      if ((r & s) != 0) continue;
      const bool ascending = ((first + r) & size) == 0;
      const unsigned long long x = v[r], y = v[r | s];
      v[r] = keep_of(x, y, ascending);
      v[r | s] = keep_of(x, y, !ascending);
    }
  }
}

// Thread t's keys rotated by r0 = (t / (16 / E)) mod E before they are stored at a[t E + (j + r0)
// mod E]: each 16 lanes then write 16 different 8-byte bank pairs (a whole 128-byte line), where
// unrotated they would all write words E apart (E = 16: one bank pair, 16 ways conflicted).
template <int E>
__device__ __forceinline__ int store_rotation() {
  return E == 1 ? 0 : static_cast<int>(threadIdx.x / (16 / E)) % E;
}
template <int E>
__device__ __forceinline__ void rotate_left(unsigned long long (&v)[E], int by) {
#pragma unroll
  for (int b = 1; b < E; b *= 2) {
    if ((by & b) == 0) continue;
    unsigned long long w[E];
#pragma unroll
    for (int j = 0; j < E; ++j) w[j] = v[(j + b) % E];
#pragma unroll
    for (int j = 0; j < E; ++j) v[j] = w[j];
  }
}

// Sorts a[0, m) ascending, m = E x blockDim.x (blockDim a multiple of 32 and a power of two).
// Out of line, one copy per E: the settle instantiates it from every one of its kernels.
template <int E>
__device__ __noinline__ void register_sort(unsigned long long* a, int m) {
  const int t = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(a));
  unsigned long long v[E];
  // Any placement of the unsorted keys will do: r x blockDim + t reads consecutive words.
#pragma unroll
  for (int r = 0; r < E; ++r) v[r] = load_shared(base + 8u * static_cast<uint32_t>(r * threads + t));
  for (int size = 2; size <= m; size *= 2) {
    for (int s = size / 2; s >= E; s /= 2) {  // pairs in two threads: t and t ^ x
      const int x = s / E;
      const bool keep_min = ((t & x) == 0) == (((t * E) & size) == 0);
      if (x < 32) {
#pragma unroll
        for (int r = 0; r < E; ++r) v[r] = keep_of(v[r], __shfl_xor_sync(0xffffffffu, v[r], x), keep_min);
      } else {
        __syncthreads();  // every thread has read a (the keys, or the previous exchange)
#pragma unroll
        for (int r = 0; r < E; ++r) store_shared(base + 8u * static_cast<uint32_t>(r * threads + t), v[r]);
        __syncthreads();
#pragma unroll
        for (int r = 0; r < E; ++r)
          v[r] = keep_of(v[r], load_shared(base + 8u * static_cast<uint32_t>(r * threads + (t ^ x))), keep_min);
      }
    }
    merge_in_registers<E>(v, size, t * E);
  }
  const int r0 = store_rotation<E>();
  rotate_left<E>(v, r0);  // v[j] is now key t E + (j + r0) mod E
  __syncthreads();        // every thread has read a
#pragma unroll
  for (int j = 0; j < E; ++j) store_shared(base + 8u * static_cast<uint32_t>(t * E + (j + r0) % E), v[j]);
  __syncthreads();
}

}  // namespace register_sort_detail

// Sorts a[0, m) ascending (shared memory), m a power of two, with every thread of the block (a
// power of two, at least 32 threads). The caller has synchronised after writing a; the block is
// synchronised on return. From blockDim to 16 x blockDim keys the keys are sorted in registers
// (above); shorter or longer lists by block_bitonic_sort.
__device__ inline void block_sort(unsigned long long* a, int m) {
  const int threads = static_cast<int>(blockDim.x);
  using namespace register_sort_detail;
  if (threads < 32 || (threads & (threads - 1)) != 0 || m < threads || m > 16 * threads) {
    block_bitonic_sort(a, m);
    return;
  }
  switch (m / threads) {
    case 1: register_sort<1>(a, m); break;
    case 2: register_sort<2>(a, m); break;
    case 4: register_sort<4>(a, m); break;
    case 8: register_sort<8>(a, m); break;
    default: register_sort<16>(a, m); break;
  }
}

}  // namespace ivfgpu::cuda
