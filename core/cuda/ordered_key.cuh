// Float keys as unsigned integers with the same order (smaller first; -0 before +0, NaN last),
// so that a key and a 32-bit payload pack into one 64-bit word that sorts by key, then by
// payload: what the top-k selections (select.cu, fused_search.cu) sort and radix-select on.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ivfgpu::cuda {

__device__ __forceinline__ uint32_t to_ordered(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float from_ordered(uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

// The ordered key of a distance taken as a cost, smaller first: a metric whose larger values are
// better (inner product) is negated first. Where a distance (not yet a cost) is keyed, the scans,
// seeds and select go through this one function, so that their keys agree bit for bit; values
// that are costs already (bounds, stored optimistic or exact costs) take to_ordered as they are.
__device__ __forceinline__ uint32_t cost_key(float d, bool larger_is_better) {
  return to_ordered(larger_is_better ? -d : d);
}

}  // namespace ivfgpu::cuda
