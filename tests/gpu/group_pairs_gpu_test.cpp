// Grouping a batch's (query, probe) pairs by list (core/cuda/group_pairs.cu) against the host:
// every list's count, its place (the exclusive prefix of the counts) and its group holding
// exactly its pairs, for a skewed batch whose popular lists most queries probe. The sizes take
// both kernels: 10,000 queries x 63 ranks (the pruned pass's rest, 630,000 pairs) count and
// claim in shared memory up to 4,096 lists; one rank (its first probes) and 5,000 lists take a
// global atomic a pair.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/cuda/device_context.hpp"
#include "core/cuda/group_pairs.hpp"
#include "gpu_test_util.hpp"

namespace {

using ivfgpu::cuda::DeviceContext;

// nq x nprobe probes: half of them among 8 popular lists, the rest anywhere.
std::vector<int32_t> skewed_probes(int64_t nq, int64_t nprobe, int64_t nlist, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> any(0, nlist - 1), hot(0, 7), coin(0, 1);
  std::vector<int32_t> probes(static_cast<std::size_t>(nq * nprobe));
  for (int32_t& l : probes) l = static_cast<int32_t>(coin(rng) ? hot(rng) * (nlist / 8) : any(rng));
  return probes;
}

void check_groups(int64_t nq, int64_t nprobe, int64_t nlist, int64_t lo, int64_t hi) {
  const std::string where = "nq " + std::to_string(nq) + " nprobe " + std::to_string(nprobe) + " nlist " +
                            std::to_string(nlist) + " ranks [" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
  const std::vector<int32_t> probes = skewed_probes(nq, nprobe, nlist, 7 + nlist + lo);
  DeviceContext ctx(0);
  DeviceContext::Lease lease(ctx, nullptr);
  cudaStream_t stream = lease.stream();
  int32_t* d_probes = nullptr;
  IVFGPU_CUDA_OK(cudaMalloc(&d_probes, sizeof(int32_t) * probes.size()));
  IVFGPU_CUDA_OK(cudaMemcpy(d_probes, probes.data(), sizeof(int32_t) * probes.size(), cudaMemcpyHostToDevice));
  const ivfgpu::cuda::ScanGroups g = ivfgpu::cuda::group_probe_range(ctx, stream, d_probes, nq, nprobe, nlist, lo, hi);
  IVFGPU_CUDA_OK(cudaStreamSynchronize(stream));
  const int64_t n = nq * (hi - lo);
  std::vector<int32_t> count(static_cast<std::size_t>(nlist)), begin(static_cast<std::size_t>(nlist)),
      grouped(static_cast<std::size_t>(n));
  IVFGPU_CUDA_OK(cudaMemcpy(count.data(), g.pair_count.data(), sizeof(int32_t) * count.size(), cudaMemcpyDeviceToHost));
  IVFGPU_CUDA_OK(cudaMemcpy(begin.data(), g.pair_begin.data(), sizeof(int32_t) * begin.size(), cudaMemcpyDeviceToHost));
  if (n > 0)
    IVFGPU_CUDA_OK(
        cudaMemcpy(grouped.data(), g.grouped.data(), sizeof(int32_t) * grouped.size(), cudaMemcpyDeviceToHost));
  IVFGPU_CUDA_OK(cudaFree(d_probes));

  std::vector<std::vector<int32_t>> want(static_cast<std::size_t>(nlist));
  for (int64_t q = 0; q < nq; ++q)
    for (int64_t r = lo; r < hi; ++r) want[probes[q * nprobe + r]].push_back(static_cast<int32_t>(q * nprobe + r));
  int32_t place = 0;
  for (int64_t l = 0; l < nlist; ++l) {
    const auto& w = want[static_cast<std::size_t>(l)];
    ASSERT_EQ(count[l], static_cast<int32_t>(w.size())) << where << ": list " << l << "'s count";
    ASSERT_EQ(begin[l], place) << where << ": list " << l << "'s place";
    std::vector<int32_t> got(grouped.begin() + place, grouped.begin() + place + count[l]);
    std::sort(got.begin(), got.end());  // a group's order is not part of the contract
    ASSERT_EQ(got, w) << where << ": list " << l << "'s pairs";
    place += count[l];
  }
  EXPECT_EQ(place, n) << where;
}

TEST(GpuGroupPairs, EveryListHoldsExactlyItsPairs) {
  IVFGPU_REQUIRE_GPU();
  for (int64_t nlist : {int64_t{1024}, int64_t{4096}, int64_t{5000}}) {
    check_groups(10000, 64, nlist, 1, 64);  // the rest of the pruned pass: shared memory to 4,096 lists
    check_groups(10000, 64, nlist, 0, 1);   // its first probes: few pairs, a global atomic each
    check_groups(10000, 64, nlist, 0, 64);  // every rank
    if (HasFailure()) return;
  }
  // The places' prefix sum: one block up to 16,384 lists (its fourth round full), cub's past it.
  check_groups(2000, 8, 16384, 0, 8);
  check_groups(2000, 8, 20000, 0, 8);
  check_groups(3, 5, 16, 0, 5);  // a batch smaller than a block
  check_groups(0, 8, 16, 0, 8);  // no queries
}

}  // namespace
