// Block-per-segment radix select: four 8-bit histogram passes find the exact k-th key, one
// ordered gather (block scan, so the result does not depend on thread timing) collects the
// winners, and a bitonic sort in shared memory orders them. Shared memory is sized by k only
// (never by the segment length or nprobe x k); short segments are cached in shared memory.
#include "select.hpp"

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <string>

#include "../errors.hpp"
#include "check.hpp"

namespace ivfgpu::cuda {

namespace {

constexpr int kThreads = 256;
// Up to this much shared memory per block for caching a short segment (keeps occupancy).
constexpr std::size_t kCacheBytes = 32 * 1024;

__device__ __forceinline__ uint32_t to_ordered(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_ordered(uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}

__global__ void __launch_bounds__(kThreads)
    block_select_kernel(SelectInput in, int64_t nseg, int k, bool larger, int cache_cap, SelectOutput out) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int k2 = k <= 1 ? 1 : 1 << (32 - __clz(k - 1));
  uint64_t* sel = reinterpret_cast<uint64_t*>(smem_raw);
  uint32_t* cache = reinterpret_cast<uint32_t*>(sel + k2);
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  __shared__ int hist[256];
  __shared__ uint32_t s_prefix;
  __shared__ int s_need;
  const int tid = threadIdx.x;

  for (int64_t s = blockIdx.x; s < nseg; s += gridDim.x) {
    const float* keys = in.keys + s * in.stride;
    const int64_t len = in.lens ? in.lens[s] : in.fixed_len;
    const int kk = static_cast<int>(len < k ? len : k);
    auto load = [&](int64_t i) -> uint32_t {
      float f = keys[i];
      if (in.addend) f += in.addend[i];
      return to_ordered(larger ? -f : f);
    };
    const bool cached = len <= cache_cap;
    __syncthreads();  // the previous segment is done with cache/sel
    if (cached)
      for (int64_t i = tid; i < len; i += kThreads) cache[i] = load(i);
    __syncthreads();
    auto get = [&](int64_t i) -> uint32_t { return cached ? cache[i] : load(i); };

    const bool take_all = kk == len;
    uint32_t prefix = 0, mask = 0;
    int need = 0;
    if (!take_all && kk > 0) {
      need = kk;
      for (int shift = 24; shift >= 0; shift -= 8) {
        for (int b = tid; b < 256; b += kThreads) hist[b] = 0;
        __syncthreads();
        for (int64_t i = tid; i < len; i += kThreads) {
          const uint32_t u = get(i);
          if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1);
        }
        __syncthreads();
        if (tid < 32) {
          int local[8], sum = 0;
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            local[j] = hist[tid * 8 + j];
            sum += local[j];
          }
          int incl = sum;
#pragma unroll
          for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(0xffffffffu, incl, o);
            if (tid >= o) incl += v;
          }
          const int excl = incl - sum;
          const unsigned hit = __ballot_sync(0xffffffffu, excl < need && need <= incl);
          if (tid == __ffs(hit) - 1) {
            int c = excl;
            for (int j = 0; j < 8; ++j) {
              if (c + local[j] >= need) {
                s_prefix = prefix | (static_cast<uint32_t>(tid * 8 + j) << shift);
                s_need = need - c;
                break;
              }
              c += local[j];
            }
          }
        }
        __syncthreads();
        prefix = s_prefix;
        need = s_need;
        mask |= 255u << shift;
      }
    }
    // Ordered gather: every key < prefix, then the first `need` keys == prefix by position.
    const int n_lt = kk - need;
    int base_lt = 0, base_eq = 0;
    for (int64_t c0 = 0; c0 < len && (base_lt < n_lt || base_eq < need); c0 += kThreads) {
      const int64_t i = c0 + tid;
      const uint32_t u = i < len ? get(i) : 0xffffffffu;
      const int lt = i < len && (take_all || u < prefix);
      const int eq = i < len && !take_all && u == prefix;
      int excl, total;
      Scan(scan_tmp).ExclusiveSum(lt | (eq << 16), excl, total);
      const uint64_t packed = (static_cast<uint64_t>(u) << 32) | static_cast<uint32_t>(i);
      if (lt) sel[base_lt + (excl & 0xffff)] = packed;
      if (eq) {
        const int r = base_eq + (excl >> 16);
        if (r < need) sel[n_lt + r] = packed;
      }
      base_lt += total & 0xffff;
      base_eq += total >> 16;
      __syncthreads();  // scan_tmp reuse
    }
    const int n2 = kk <= 1 ? 1 : 1 << (32 - __clz(kk - 1));
    for (int i = kk + tid; i < n2; i += kThreads) sel[i] = ~uint64_t{0};
    __syncthreads();
    // Bitonic sort of sel[0, n2).
    for (int size = 2; size <= n2; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int t = tid; t < n2 / 2; t += kThreads) {
          const int i = 2 * t - (t & (stride - 1));
          const int j = i + stride;
          const uint64_t a = sel[i], b = sel[j];
          const bool up = (i & size) == 0;
          if ((a > b) == up) {
            sel[i] = b;
            sel[j] = a;
          }
        }
        __syncthreads();
      }
    }
    for (int j = tid; j < kk; j += kThreads) {
      const uint64_t v = sel[j];
      out.pos[s * k + j] = static_cast<int32_t>(v & 0xffffffffu);
      if (out.key) {
        const float f = from_ordered(static_cast<uint32_t>(v >> 32));
        out.key[s * k + j] = larger ? -f : f;
      }
    }
    if (tid == 0) out.count[s] = kk;
  }
}

std::size_t sort_bytes(int64_t k) {
  int64_t k2 = 1;
  while (k2 < k) k2 <<= 1;
  return static_cast<std::size_t>(k2) * sizeof(uint64_t);
}

}  // namespace

int64_t select_max_k(const DeviceLimits& limits) {
  int64_t k = 1;
  while (sort_bytes(k * 2) + 8 * 1024 <= limits.smem_per_block_optin) k *= 2;
  return k;
}

void select_topk(const DeviceLimits& limits, cudaStream_t stream, const SelectInput& in, int64_t nseg,
                 int64_t k, bool larger_is_better, const SelectOutput& out) {
  if (nseg == 0) return;
  if (k > select_max_k(limits))
    fail(Errc::Unsupported, "k = " + std::to_string(k) + " exceeds the largest k this device can select (" +
                                std::to_string(select_max_k(limits)) + ")");
  const std::size_t sel = sort_bytes(k);
  std::size_t cache_cap = 0;
  const std::size_t room = std::min<std::size_t>(limits.smem_per_block_optin - 8 * 1024, sel + kCacheBytes);
  if (room > sel) cache_cap = (room - sel) / sizeof(uint32_t);
  cache_cap = std::min<std::size_t>(cache_cap, static_cast<std::size_t>(std::max<int64_t>(in.max_len, 0)));
  const std::size_t smem = sel + cache_cap * sizeof(uint32_t);
  IVF_CUDA_CHECK(cudaFuncSetAttribute(block_select_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  const int64_t grid = std::min<int64_t>(nseg, int64_t{1} << 30);
  block_select_kernel<<<static_cast<unsigned>(grid), kThreads, smem, stream>>>(
      in, nseg, static_cast<int>(k), larger_is_better, static_cast<int>(cache_cap), out);
  IVF_CUDA_CHECK_LAUNCH();
}

}  // namespace ivfgpu::cuda
