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

}  // namespace
