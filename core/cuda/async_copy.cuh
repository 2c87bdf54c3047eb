// Asynchronous global-to-shared copies (cp.async, sm_80 on): the copy forms the passes use and
// the group protocol around them (commit a group, wait for all but the newest N).
#pragma once

#include <cstdint>

namespace ivfgpu::cuda {

// Copies 16 bytes from global memory (`bytes` of them, 0 or 16: 0 zero-fills) into shared address
// `to`, bypassing L1 (.cg).
__device__ __forceinline__ void copy16_async(uint32_t to, const void* from, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from), "r"(bytes) : "memory");
}
// Closes this thread's copies issued since the last commit into a group (possibly empty).
__device__ __forceinline__ void copies_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N committed groups of this thread's copies are still in flight.
template <int N>
__device__ __forceinline__ void copies_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace ivfgpu::cuda
