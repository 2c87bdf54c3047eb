#include "group_pairs.hpp"

#include <algorithm>

#include "check.hpp"
#include "device_buffer.hpp"
#include "launch.cuh"
#include "scan_dispatch.hpp"
#include "small_scan.cuh"

namespace ivfgpu::cuda {

namespace {

constexpr int kThreads = 256;
// A block counts its pairs, and claims their places, in shared memory (two words a list), so a
// list takes one global atomic a block rather than one a pair: pairs meeting at one global
// counter queue on it. At nprobe 64 a 10,000-query search's two groupings (its first probes'
// 10,000 pairs, then the rest's 630,000; 1M x 128 mixture, whose popular lists most queries
// probe) took 74 us in all to count and 96 to place with an atomic each, 25 and 47 in shared
// memory (ncu, H100: bench/RESULTS.md). Shared memory is for batches of at least
// kSharedGroupMinPairs pairs over at most kSharedGroupMaxLists lists: fewer pairs make few
// blocks, each of which still clears and sweeps every list's counter (at nprobe 16, with 10,000
// and 150,000 pairs, the two groupings took 59 us that way against 48), and more lists would
// not fit.
constexpr int64_t kSharedGroupMaxLists = 4096;
constexpr int64_t kSharedGroupMinPairs = int64_t{1} << 18;
// Pairs a thread takes in the shared-memory kernels (a block: 4,096, so a list's global atomics
// number at most pairs / 4,096).
constexpr int kPairsPerThread = 16;

// In-range pair i of r = hi - lo ranks a query: query i / r, rank lo + i % r, as q * nprobe + rank.
__device__ __forceinline__ int64_t pair_at(int64_t i, int64_t r, int64_t lo, int64_t nprobe) {
  return (i / r) * nprobe + lo + i % r;
}

__global__ void __launch_bounds__(kThreads)
    count_pairs_shared_kernel(const int32_t* probes, int64_t n, int64_t r, int64_t lo, int64_t nprobe, int nlist,
                              int32_t* count) {
  extern __shared__ int32_t hist[];  // nlist
  for (int l = threadIdx.x; l < nlist; l += kThreads) hist[l] = 0;
  __syncthreads();
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kPairsPerThread + threadIdx.x;
#pragma unroll 4
  for (int m = 0; m < kPairsPerThread; ++m) {
    const int64_t i = first + int64_t{m} * kThreads;
    if (i < n) atomicAdd(&hist[probes[pair_at(i, r, lo, nprobe)]], 1);
  }
  __syncthreads();
  for (int l = threadIdx.x; l < nlist; l += kThreads)
    if (hist[l] != 0) atomicAdd(&count[l], hist[l]);
}

// Pair i goes into its list's group. The order inside a group does not matter: every pair
// writes to its own place in the candidate rows.
__global__ void __launch_bounds__(kThreads)
    group_pairs_shared_kernel(const int32_t* probes, int64_t n, int64_t r, int64_t lo, int64_t nprobe, int nlist,
                              int32_t* cursor, int32_t* grouped) {
  extern __shared__ int32_t hist[];  // nlist counts, then nlist bases
  int32_t* base = hist + nlist;
  for (int l = threadIdx.x; l < nlist; l += kThreads) hist[l] = 0;
  __syncthreads();
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kPairsPerThread + threadIdx.x;
  int32_t list[kPairsPerThread], rank[kPairsPerThread];
#pragma unroll
  for (int m = 0; m < kPairsPerThread; ++m) {
    const int64_t i = first + int64_t{m} * kThreads;
    list[m] = i < n ? probes[pair_at(i, r, lo, nprobe)] : -1;
    if (list[m] >= 0) rank[m] = atomicAdd(&hist[list[m]], 1);
  }
  __syncthreads();
  for (int l = threadIdx.x; l < nlist; l += kThreads)
    if (hist[l] != 0) base[l] = atomicAdd(&cursor[l], hist[l]);
  __syncthreads();
#pragma unroll
  for (int m = 0; m < kPairsPerThread; ++m) {
    const int64_t i = first + int64_t{m} * kThreads;
    if (list[m] >= 0) grouped[base[list[m]] + rank[m]] = static_cast<int32_t>(pair_at(i, r, lo, nprobe));
  }
}

// A list's pair count, as the small scan reads it.
struct PairCountAt {
  const int32_t* count;
  __device__ int32_t operator()(int64_t l) const { return count[l]; }
};

// Fewer pairs or more lists: one global atomic a pair (the in-range pairs only).
__global__ void count_pairs_kernel(const int32_t* probes, int64_t n, int64_t r, int64_t lo, int64_t nprobe,
                                   int32_t* count) {
  for (int64_t i = global_thread(); i < n; i += thread_stride())
    atomicAdd(&count[probes[pair_at(i, r, lo, nprobe)]], 1);
}

__global__ void group_pairs_kernel(const int32_t* probes, int64_t n, int64_t r, int64_t lo, int64_t nprobe,
                                   int32_t* cursor, int32_t* grouped) {
  for (int64_t i = global_thread(); i < n; i += thread_stride()) {
    const int64_t pair = pair_at(i, r, lo, nprobe);
    grouped[atomicAdd(&cursor[probes[pair]], 1)] = static_cast<int32_t>(pair);
  }
}

}  // namespace

ScanGroups group_probe_range(const DeviceContext& ctx, cudaStream_t stream, const int32_t* probes, int64_t nq,
                             int64_t nprobe, int64_t nlist, int64_t lo, int64_t hi) {
  const int64_t r = hi - lo, n = nq * r;
  ScanGroups g;
  g.tile_q = scan_detail::query_tile(nq, r, nlist);
  g.pair_count = DeviceBuffer<int32_t>(ctx, nlist, stream);
  g.pair_begin = DeviceBuffer<int32_t>(ctx, nlist, stream);
  g.grouped = DeviceBuffer<int32_t>(ctx, std::max<int64_t>(1, n), stream);
  DeviceBuffer<int32_t> cursor(ctx, nlist, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(g.pair_count.data(), 0, g.pair_count.bytes(), stream));
  const bool shared = nlist <= kSharedGroupMaxLists && n >= kSharedGroupMinPairs;
  const auto shared_blocks = static_cast<unsigned>(std::max<int64_t>(1, (n + kThreads * kPairsPerThread - 1) /
                                                                            (kThreads * kPairsPerThread)));
  const int lists = static_cast<int>(nlist);
  if (n > 0) {
    if (shared)
      count_pairs_shared_kernel<<<shared_blocks, kThreads, nlist * sizeof(int32_t), stream>>>(
          probes, n, r, lo, nprobe, lists, g.pair_count.data());
    else
      count_pairs_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(probes, n, r, lo, nprobe,
                                                                         g.pair_count.data());
    IVF_CUDA_CHECK_LAUNCH();
  }
  // The places, and the cursors that start at them (small_scan.cuh: one launch for a few
  // thousand lists).
  exclusive_scan(ctx, stream, nlist, nlist, PairCountAt{g.pair_count.data()}, g.pair_begin.data(),
                 n > 0 ? cursor.data() : nullptr);
  if (n == 0) return g;
  if (shared)
    group_pairs_shared_kernel<<<shared_blocks, kThreads, 2 * nlist * sizeof(int32_t), stream>>>(
        probes, n, r, lo, nprobe, lists, cursor.data(), g.grouped.data());
  else
    group_pairs_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(probes, n, r, lo, nprobe, cursor.data(),
                                                                       g.grouped.data());
  IVF_CUDA_CHECK_LAUNCH();
  return g;
}

}  // namespace ivfgpu::cuda
