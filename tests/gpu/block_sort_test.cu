// block_bitonic_sort (core/cuda/warp_sort.cuh) and block_sort (block_register_sort.cuh) against
// std::sort: every power-of-two length up to 8,192 keys with blocks of 32 to 1,024 threads, so
// that some blocks leave threads without a pair and others give a thread several pairs a stage
// (block_sort: 1 to 16 keys a thread in registers, and its fallback past those lengths or on a
// block whose size is no power of two), and keys with many duplicates and extreme values. The
// settle of the wide pass, the fused kernels' probe and tile selections and the settle's full
// scans all sort with one of them; the warp-level barriers of the first rest on which entries each
// warp touches, the second on which lanes and shared words each stage exchanges.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/cuda/block_register_sort.cuh"
#include "core/cuda/warp_sort.cuh"
#include "gpu_test_util.hpp"

namespace {

constexpr int kMaxKeys = 8192;  // 64 KiB of dynamic shared keys (opted in)

// Block b sorts keys[b * m, + m) in shared memory and writes them back, by block_sort where
// `registers`, else by block_bitonic_sort.
__global__ void __launch_bounds__(1024) sort_rows_kernel(unsigned long long* keys, int m, bool registers) {
  extern __shared__ unsigned long long a[];
  unsigned long long* const row = keys + static_cast<int64_t>(blockIdx.x) * m;
  for (int i = threadIdx.x; i < m; i += blockDim.x) a[i] = row[i];
  __syncthreads();
  if (registers)
    ivfgpu::cuda::block_sort(a, m);
  else
    ivfgpu::cuda::block_bitonic_sort(a, m);
  for (int i = threadIdx.x; i < m; i += blockDim.x) row[i] = a[i];
}

void expect_sorts_like_the_host(bool registers) {
  constexpr int kRows = 6;
  std::mt19937_64 rng(73);
  IVFGPU_CUDA_OK(cudaFuncSetAttribute(sort_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      kMaxKeys * static_cast<int>(sizeof(unsigned long long))));
  for (int threads : {32, 64, 96, 256, 512, 1024}) {
    for (int m = 1; m <= kMaxKeys; m *= 2) {
      std::vector<unsigned long long> keys(static_cast<std::size_t>(kRows) * m);
      for (int r = 0; r < kRows; ++r)
        for (int i = 0; i < m; ++i) {
          unsigned long long& k = keys[static_cast<std::size_t>(r) * m + i];
          switch (r) {
            case 0: k = rng(); break;                                      // distinct, full range
            case 1: k = rng() % 5; break;                                  // a few values, many ties
            case 2: k = static_cast<unsigned long long>(m - i); break;     // descending
            case 3: k = static_cast<unsigned long long>(i); break;         // already sorted
            case 4: k = (rng() % 2) != 0 ? ~0ull : 0ull; break;            // the extremes only
            default: k = (rng() % 3) << 32 | static_cast<uint32_t>(i); break;  // (cost, position) pairs
          }
        }
      unsigned long long* d = nullptr;
      IVFGPU_CUDA_OK(cudaMalloc(&d, keys.size() * sizeof(unsigned long long)));
      IVFGPU_CUDA_OK(cudaMemcpy(d, keys.data(), keys.size() * sizeof(unsigned long long), cudaMemcpyHostToDevice));
      sort_rows_kernel<<<kRows, threads, m * sizeof(unsigned long long)>>>(d, m, registers);
      IVFGPU_CUDA_OK(cudaGetLastError());
      std::vector<unsigned long long> got(keys.size());
      IVFGPU_CUDA_OK(cudaMemcpy(got.data(), d, got.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      IVFGPU_CUDA_OK(cudaFree(d));
      for (int r = 0; r < kRows; ++r) {
        const auto first = keys.begin() + static_cast<std::ptrdiff_t>(r) * m;
        std::sort(first, first + m);
        ASSERT_TRUE(std::equal(first, first + m, got.begin() + static_cast<std::ptrdiff_t>(r) * m))
            << (registers ? "block_sort" : "block_bitonic_sort") << ": row kind " << r << ", " << m << " keys, "
            << threads << " threads a block";
      }
    }
  }
}

TEST(BlockBitonicSort, EqualsTheHostSortForEveryLengthAndBlockSize) {
  IVFGPU_REQUIRE_GPU();
  expect_sorts_like_the_host(false);
}

TEST(BlockRegisterSort, EqualsTheHostSortForEveryLengthAndBlockSize) {
  IVFGPU_REQUIRE_GPU();
  expect_sorts_like_the_host(true);
}

// block_kth_key (warp_sort.cuh), the wide settle's radix selection: block b finds the bound of
// the k smallest of keys[b * m, + m) and writes it to last[b], given the top bits the keys below
// all ones share (common_bits of common[b]) where `shared_top`, else from the top digit.
__global__ void __launch_bounds__(256) kth_rows_kernel(const unsigned long long* keys, int m, int k,
                                                       const unsigned long long* common, const int* common_bits,
                                                       unsigned long long* last) {
  extern __shared__ unsigned long long a[];
  __shared__ unsigned hist[256];
  __shared__ ivfgpu::cuda::KthPick picked;
  const unsigned long long* const row = keys + static_cast<int64_t>(blockIdx.x) * m;
  for (int i = threadIdx.x; i < m; i += blockDim.x) a[i] = row[i];
  __syncthreads();
  const unsigned long long bound = common != nullptr
                                       ? ivfgpu::cuda::block_kth_key(a, m, k, hist, &picked, common[blockIdx.x],
                                                                     common_bits[blockIdx.x])
                                       : ivfgpu::cuda::block_kth_key(a, m, k, hist, &picked);
  if (threadIdx.x == 0) last[blockIdx.x] = bound;
}

// Every row of distinct keys (all ones aside: the settle's keys that cannot enter) has exactly k
// keys not above the bound, with and without the shared top bits given: keys spread over the
// whole range, keys of one cost (only the positions differ), costs a few units apart, keys that
// differ in their last 13 bits only, a wide spread of costs, and k + 1 keys padded with all ones.
TEST(BlockKthKey, BoundsExactlyTheKSmallestWithOrWithoutTheirSharedTopBits) {
  IVFGPU_REQUIRE_GPU();
  constexpr unsigned long long kNone = ~0ull;
  std::mt19937_64 rng(75);
  for (int m : {33, 256, 1000, 5800}) {
    for (int k : {1, 7, 32, 999, 4096}) {
      if (k >= m) continue;
      constexpr int kRows = 6;
      std::vector<unsigned long long> keys(static_cast<std::size_t>(kRows) * m);
      std::vector<unsigned long long> common(kRows);
      std::vector<int> common_bits(kRows);
      for (int r = 0; r < kRows; ++r) {
        const unsigned long long cost = 0xbf000000ull + (rng() % 1000);
        auto first = keys.begin() + static_cast<std::ptrdiff_t>(r) * m;
        for (int i = 0; i < m; ++i) {
          // Positions 0 .. m - 1 (< 2^13) in shuffled order, in the low bits: the keys are distinct.
          const auto pos = static_cast<unsigned long long>((i * 7919 + r) % m);
          switch (r) {
            case 0: first[i] = (rng() & ~(1ull << 63) & ~0x1fffull) | pos; break;  // anywhere
            case 1: first[i] = cost << 32 | pos; break;                               // one cost
            case 2: first[i] = (cost + rng() % 4) << 32 | pos; break;                 // a few costs
            case 3: first[i] = cost << 32 | 0xffffe000ull | pos; break;               // the last 13 bits
            case 4: first[i] = (cost + rng() % 65536) << 32 | pos; break;             // a spread of costs
            default: first[i] = i < k + 1 ? (cost + rng() % 256) << 32 | pos : kNone; break;  // padded
          }
        }
        unsigned long long all_and = ~0ull, all_or = 0;
        for (int i = 0; i < m; ++i)
          if (first[i] != kNone) {
            all_and &= first[i];
            all_or |= first[i];
          }
        const unsigned long long diff = all_and ^ all_or;
        common[r] = all_and;
        common_bits[r] = diff == 0 ? 64 : __builtin_clzll(diff);
      }
      unsigned long long *d_keys = nullptr, *d_common = nullptr, *d_last = nullptr;
      int* d_bits = nullptr;
      IVFGPU_CUDA_OK(cudaMalloc(&d_keys, keys.size() * sizeof(unsigned long long)));
      IVFGPU_CUDA_OK(cudaMalloc(&d_common, kRows * sizeof(unsigned long long)));
      IVFGPU_CUDA_OK(cudaMalloc(&d_last, kRows * sizeof(unsigned long long)));
      IVFGPU_CUDA_OK(cudaMalloc(&d_bits, kRows * sizeof(int)));
      IVFGPU_CUDA_OK(cudaMemcpy(d_keys, keys.data(), keys.size() * sizeof(unsigned long long), cudaMemcpyHostToDevice));
      IVFGPU_CUDA_OK(cudaMemcpy(d_common, common.data(), kRows * sizeof(unsigned long long), cudaMemcpyHostToDevice));
      IVFGPU_CUDA_OK(cudaMemcpy(d_bits, common_bits.data(), kRows * sizeof(int), cudaMemcpyHostToDevice));
      IVFGPU_CUDA_OK(cudaFuncSetAttribute(kth_rows_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          kMaxKeys * static_cast<int>(sizeof(unsigned long long))));
      for (bool shared_top : {false, true}) {
        kth_rows_kernel<<<kRows, 256, m * sizeof(unsigned long long)>>>(d_keys, m, k, shared_top ? d_common : nullptr,
                                                                        d_bits, d_last);
        IVFGPU_CUDA_OK(cudaGetLastError());
        std::vector<unsigned long long> last(kRows);
        IVFGPU_CUDA_OK(cudaMemcpy(last.data(), d_last, kRows * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        for (int r = 0; r < kRows; ++r) {
          const auto first = keys.begin() + static_cast<std::ptrdiff_t>(r) * m;
          const auto not_above = std::count_if(first, first + m, [&](unsigned long long v) { return v <= last[r]; });
          EXPECT_EQ(not_above, k) << "row kind " << r << ", " << m << " keys, k " << k
                                  << (shared_top ? ", top bits given" : ", from the top digit");
        }
      }
      IVFGPU_CUDA_OK(cudaFree(d_keys));
      IVFGPU_CUDA_OK(cudaFree(d_common));
      IVFGPU_CUDA_OK(cudaFree(d_last));
      IVFGPU_CUDA_OK(cudaFree(d_bits));
    }
  }
}

}  // namespace
