// Hopper's warpgroup MMA (wgmma.mma_async, sm_90a) on the bf16 slab layout of scan_mma.cuh:
// a warpgroup (four warps, 128 threads) multiplies a 64-row operand A by a 32-row operand B,
// both read by the tensor cores straight from shared memory.
//
// Why: mma.sync needs every warp to load its own fragments with ldmatrix, and in the staged
// bf16 pass (list_mma_kernel, 64 x 64 tiles, eight warps of 32 x 16) a query fragment was loaded
// by four warps and a row fragment by two: ncu at d 960 had the L1/shared pipes 96% busy and the
// SM's issue slots 36% (H200, bench/RESULTS.md, session 52). A wgmma reads each operand once per
// warpgroup, asynchronously, so the next slice's staging overlaps the products.
//
// The slab layout is the canonical K-major layout with 64-byte swizzling: rows of 64 bytes (32
// bf16), 16-byte chunk c of row r at chunk c ^ ((r / 2) % 4), which is the hardware's XOR of
// address bits 4-5 with bits 7-8 once a slab starts on a 512-byte boundary. A k step of 16
// dimensions is 32 bytes into the rows: its descriptor starts 32 bytes on, as the swizzle is
// applied to the whole address.
//
// Only sm_90a code has the instruction: elsewhere (the compute_90 PTX that later GPUs compile)
// these functions trap, and the host launches the kernels that use them only where the build
// has sm_90a code and the device is a compute capability 9.0 part (wgmma_usable, scan.cu).
#pragma once

#include <cstdint>
#include <type_traits>

namespace ivfgpu::cuda::scan_detail {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define IVFGPU_DEVICE_WGMMA 1
#endif

// The shared-memory descriptor of a K-major operand whose first row (of a group of eight)
// starts at shared address `at`: STRIDE bytes between groups of eight rows, SWIZZLE the mode (1:
// 128-byte, 2: 64-byte); the leading offset is unused by swizzled K-major operands.
template <uint64_t STRIDE, uint64_t SWIZZLE>
__device__ __forceinline__ uint64_t wgmma_desc(uint32_t at) {
  constexpr uint64_t kLeading = 1;
  return static_cast<uint64_t>((at & 0x3FFFF) >> 4) | (kLeading << 16) | ((STRIDE >> 4) << 32) | (SWIZZLE << 62);
}
// The same descriptor from its low word (static_cast<uint32_t>(wgmma_desc(at))): that of
// at + 16 j is lo + j, every shared address being below 256 KiB (the start address field's 14
// bits of at / 16), so a loop over k steps and ring stages steps its descriptors with one add
// each instead of rebuilding them (the tf32 ring's slab loop spent ~55 of its ~150 instructions
// a warp on that; ncu, session 57).
template <uint64_t STRIDE, uint64_t SWIZZLE>
__device__ __forceinline__ uint64_t wgmma_desc_of_lo(uint32_t lo) {
  return (wgmma_desc<STRIDE, SWIZZLE>(0) & 0xFFFFFFFF00000000ull) | lo;
}

// A bf16 (or int8) operand in the slab layout: 64-byte rows, 64-byte swizzling, eight rows of 64
// bytes (512) between groups of eight rows.
__device__ __forceinline__ uint64_t wgmma_slab_desc(uint32_t at) { return wgmma_desc<512, 2>(at); }
__device__ __forceinline__ uint32_t wgmma_slab_lo(uint32_t at) { return static_cast<uint32_t>(wgmma_slab_desc(at)); }
__device__ __forceinline__ uint64_t wgmma_slab_of_lo(uint32_t lo) { return wgmma_desc_of_lo<512, 2>(lo); }

// A K-major operand of 128-byte rows (32 fp32) with 128-byte swizzling: 16-byte chunk c of row r
// at chunk c ^ (r % 8), the hardware's XOR of address bits 4-6 with bits 7-9 once the operand
// starts on a 1,024-byte boundary; 1,024 bytes between groups of eight rows (the fp32 pass,
// scan_staged_tf32.cuh). A k step of 8 tf32 is 32 bytes into the rows.
__device__ __forceinline__ uint64_t wgmma_sw128_desc(uint32_t at) { return wgmma_desc<1024, 1>(at); }
__device__ __forceinline__ uint32_t wgmma_sw128_lo(uint32_t at) { return static_cast<uint32_t>(wgmma_sw128_desc(at)); }
__device__ __forceinline__ uint64_t wgmma_sw128_of_lo(uint32_t lo) { return wgmma_desc_of_lo<1024, 1>(lo); }

// The thread's warp in its block, broadcast from lane 0: warp-uniform to the compiler, so that
// the wgmma descriptors derived from it stay in uniform registers instead of being moved there
// before every wgmma (the tf32 ring gained 2-4% so, session 57; CUTLASS does the same).
__device__ __forceinline__ int uniform_warp_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
}

// Orders this thread's earlier shared-memory stores before later wgmma reads of them (the
// tensor cores read through the async proxy); a barrier then orders them across threads.
__device__ __forceinline__ void wgmma_stores_visible() {
#ifdef IVFGPU_DEVICE_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Before the first wgmma of a batch: the accumulators' registers as the threads left them.
__device__ __forceinline__ void wgmma_fence() {
#ifdef IVFGPU_DEVICE_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#ifdef IVFGPU_DEVICE_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits for every committed batch: the accumulators are final and their operands' shared
// memory may be written again.
__device__ __forceinline__ void wgmma_wait_all() {
#ifdef IVFGPU_DEVICE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}

// Waits until at most N committed batches are still running (the older ones are final).
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#ifdef IVFGPU_DEVICE_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

// Code without wgmma (compute_90 PTX) never runs these kernels: a launch there is a bug.
template <class... Args>
__device__ __forceinline__ void wgmma_unavailable(const Args&...) {
  __trap();
}
// A pass's WG build (template flag WG) in code without wgmma: it never launches there
// (wgmma_usable), so it traps and the kernel returns before a body that could not compile:
// `if (wgmma_build_missing<WG>()) return;` first thing in the kernel.
template <bool WG>
__device__ __forceinline__ bool wgmma_build_missing() {
#ifndef IVFGPU_DEVICE_WGMMA
  if constexpr (WG) {
    __trap();
    return true;
  }
#endif
  return false;
}

// Both m64n32 forms' instruction: the opcode, the 16 accumulators (constraint c: "+f" for fp32,
// "+r" for int32), the two descriptors, then the predicate that keeps them (scale-d) and the rest
// of the operands, `tail`.
#define IVFGPU_WGMMA_64x32(op, c, tail)                                                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n" op                                               \
               " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p" tail ";\n}\n" \
               : c(acc[0][0][0]), c(acc[0][0][1]), c(acc[0][0][2]), c(acc[0][0][3]), c(acc[0][1][0]),           \
                 c(acc[0][1][1]), c(acc[0][1][2]), c(acc[0][1][3]), c(acc[0][2][0]), c(acc[0][2][1]),           \
                 c(acc[0][2][2]), c(acc[0][2][3]), c(acc[0][3][0]), c(acc[0][3][1]), c(acc[0][3][2]),           \
                 c(acc[0][3][3])                                                                               \
               : "l"(a), "l"(b), "r"(1))

// acc += A (64 x 16, descriptor a) times B (32 x 16, descriptor b) transposed, both bf16 (F16:
// both f16), fp32 accumulation. Warp w of the warpgroup holds rows 16 w + lane / 4 (+ 8: h = 1)
// of the 64 x 32 result, columns 8 ni + 2 (lane % 4) + e, as acc[0][ni][2 h + e]: each warp's
// share has the layout of four mma.sync m16n8 accumulators side by side.
template <bool F16 = false>
__device__ __forceinline__ void wgmma_m64n32k16(float (&acc)[1][4][4], uint64_t a, uint64_t b) {
#ifdef IVFGPU_DEVICE_WGMMA
  if constexpr (F16)
    IVFGPU_WGMMA_64x32("wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16", "+f", ", 1, 1, 0, 0");
  else
    IVFGPU_WGMMA_64x32("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16", "+f", ", 1, 1, 0, 0");
#else
  wgmma_unavailable(acc, a, b);
#endif
}

// The 32 fp32 accumulators of a warpgroup's m64n64 result as asm operands (read and written).
#define IVFGPU_WGMMA_ACC_64x64(acc)                                                                           \
  "+f"(acc[0][0][0]), "+f"(acc[0][0][1]), "+f"(acc[0][0][2]), "+f"(acc[0][0][3]), "+f"(acc[0][1][0]),        \
      "+f"(acc[0][1][1]), "+f"(acc[0][1][2]), "+f"(acc[0][1][3]), "+f"(acc[0][2][0]), "+f"(acc[0][2][1]),    \
      "+f"(acc[0][2][2]), "+f"(acc[0][2][3]), "+f"(acc[0][3][0]), "+f"(acc[0][3][1]), "+f"(acc[0][3][2]),    \
      "+f"(acc[0][3][3]), "+f"(acc[0][4][0]), "+f"(acc[0][4][1]), "+f"(acc[0][4][2]), "+f"(acc[0][4][3]),    \
      "+f"(acc[0][5][0]), "+f"(acc[0][5][1]), "+f"(acc[0][5][2]), "+f"(acc[0][5][3]), "+f"(acc[0][6][0]),    \
      "+f"(acc[0][6][1]), "+f"(acc[0][6][2]), "+f"(acc[0][6][3]), "+f"(acc[0][7][0]), "+f"(acc[0][7][1]),    \
      "+f"(acc[0][7][2]), "+f"(acc[0][7][3])
// Both m64n64 forms' instruction text: the opcode, the 32 accumulators, the two descriptors, then
// the predicate that keeps them (scale-d) and the rest of the operands, `tail`.
#define IVFGPU_WGMMA_64x64_TEXT(op, tail)                                                                     \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" op                                                          \
  " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                         \
  "%32, %33, p" tail ";\n}\n"

// The same with 64 rows of B (a 64 x 64 result): columns 8 ni + 2 (lane % 4) + e for ni < 8, as
// acc[0][ni][2 h + e] (the staged pass's 128-row steps, scan_staged_pair.cuh).
__device__ __forceinline__ void wgmma_m64n64k16_bf16(float (&acc)[1][8][4], uint64_t a, uint64_t b) {
#ifdef IVFGPU_DEVICE_WGMMA
  asm volatile(IVFGPU_WGMMA_64x64_TEXT("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", ", 1, 1, 0, 0")
               : IVFGPU_WGMMA_ACC_64x64(acc)
               : "l"(a), "l"(b), "r"(1));
#else
  wgmma_unavailable(acc, a, b);
#endif
}

// acc += A (64 x 8) times B (64 x 8) transposed, both fp32 read as tf32 (the top 19 bits), fp32
// accumulation; the accumulators' layout is m64n64k16_bf16's. tf32 operands are K-major only.
__device__ __forceinline__ void wgmma_m64n64k8_tf32(float (&acc)[1][8][4], uint64_t a, uint64_t b) {
#ifdef IVFGPU_DEVICE_WGMMA
  asm volatile(IVFGPU_WGMMA_64x64_TEXT("wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32", ", 1, 1")
               : IVFGPU_WGMMA_ACC_64x64(acc)
               : "l"(a), "l"(b), "r"(1));
#else
  wgmma_unavailable(acc, a, b);
#endif
}
#undef IVFGPU_WGMMA_64x64_TEXT
#undef IVFGPU_WGMMA_ACC_64x64

// acc += A (64 x 32 bytes) times B (32 x 32 bytes) transposed, integers of T (uint8_t or int8_t,
// both operands), int32 accumulation: exact. The accumulators' layout is the bf16 one's.
template <class T>
__device__ __forceinline__ void wgmma_m64n32k32_int8(int (&acc)[1][4][4], uint64_t a, uint64_t b) {
#ifdef IVFGPU_DEVICE_WGMMA
  if constexpr (std::is_same_v<T, uint8_t>)
    IVFGPU_WGMMA_64x32("wgmma.mma_async.sync.aligned.m64n32k32.s32.u8.u8", "+r", "");
  else
    IVFGPU_WGMMA_64x32("wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8", "+r", "");
#else
  wgmma_unavailable(acc, a, b);
#endif
}
#undef IVFGPU_WGMMA_64x32

// One 64-byte slab (two k steps of 16 bf16 dimensions) of a warpgroup's 64 x 32 tile: the query
// slab at shared address q, the warpgroup's 32 rows of the row slab at x. The caller fences
// before and commits after (a slice's slabs go as one batch). F16: f16 slabs (the native pass on
// f16 rows, scan_resident.cuh).
template <bool F16>
struct Wgmma16 {
  __device__ static __forceinline__ void slab(float (&acc)[1][4][4], uint32_t q, uint32_t x) {
    const uint32_t q_lo = wgmma_slab_lo(q), x_lo = wgmma_slab_lo(x);
#pragma unroll
    for (int s = 0; s < 2; ++s)
      wgmma_m64n32k16<F16>(acc, wgmma_slab_of_lo(q_lo + 2 * s), wgmma_slab_of_lo(x_lo + 2 * s));
  }
};
using WgmmaBf16 = Wgmma16<false>;
// The same for the int8 pass (scan_imma.cuh): a slab is 64 dimensions there, two k steps of 32.
template <class T>
struct WgmmaInt8 {
  __device__ static __forceinline__ void slab(int (&acc)[1][4][4], uint32_t q, uint32_t x) {
    const uint32_t q_lo = wgmma_slab_lo(q), x_lo = wgmma_slab_lo(x);
#pragma unroll
    for (int s = 0; s < 2; ++s)
      wgmma_m64n32k32_int8<T>(acc, wgmma_slab_of_lo(q_lo + 2 * s), wgmma_slab_of_lo(x_lo + 2 * s));
  }
};

}  // namespace ivfgpu::cuda::scan_detail
