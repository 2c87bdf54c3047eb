// block_bitonic_sort (core/cuda/warp_sort.cuh) against std::sort: every power-of-two length up to
// 4,096 keys with blocks of 32 to 1,024 threads, so that some blocks leave threads without a pair
// and others give a thread several pairs a stage, and keys with many duplicates and extreme values.
// The settle of the wide pass, the fused kernels' probe and tile selections and the settle's full
// scans all sort with it, and its warp-level barriers rest on which entries each warp touches.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/cuda/warp_sort.cuh"
#include "gpu_test_util.hpp"

namespace {

constexpr int kMaxKeys = 4096;  // 32 KiB of shared keys: no opt-in needed

// Block b sorts keys[b * m, + m) in shared memory and writes them back.
__global__ void sort_rows_kernel(unsigned long long* keys, int m) {
  __shared__ unsigned long long a[kMaxKeys];
  unsigned long long* const row = keys + static_cast<int64_t>(blockIdx.x) * m;
  for (int i = threadIdx.x; i < m; i += blockDim.x) a[i] = row[i];
  __syncthreads();
  ivfgpu::cuda::block_bitonic_sort(a, m);
  for (int i = threadIdx.x; i < m; i += blockDim.x) row[i] = a[i];
}

TEST(BlockBitonicSort, EqualsTheHostSortForEveryLengthAndBlockSize) {
  IVFGPU_REQUIRE_GPU();
  constexpr int kRows = 6;
  std::mt19937_64 rng(73);
  for (int threads : {32, 64, 96, 256, 1024}) {
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
      sort_rows_kernel<<<kRows, threads>>>(d, m);
      IVFGPU_CUDA_OK(cudaGetLastError());
      std::vector<unsigned long long> got(keys.size());
      IVFGPU_CUDA_OK(cudaMemcpy(got.data(), d, got.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      IVFGPU_CUDA_OK(cudaFree(d));
      for (int r = 0; r < kRows; ++r) {
        const auto first = keys.begin() + static_cast<std::ptrdiff_t>(r) * m;
        std::sort(first, first + m);
        ASSERT_TRUE(std::equal(first, first + m, got.begin() + static_cast<std::ptrdiff_t>(r) * m))
            << "row kind " << r << ", " << m << " keys, " << threads << " threads a block";
      }
    }
  }
}

}  // namespace
