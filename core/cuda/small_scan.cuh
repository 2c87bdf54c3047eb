// Exclusive prefix sums over a few thousand values (a search's per-list counts: nlist entries)
// in one block and one launch. cub::DeviceScan takes two launches for them (its tile-state
// initialisation and the scan) plus whatever fills its input and copies its output: a search's
// two groupings and two unit prefixes took ~34 us of launches that way for 1,024 lists (ncu,
// H100, 1M x 128, nprobe 16, 10,000 queries: bench/RESULTS.md, session 66), each of which does
// a few microseconds of work. Past kSmallScanMax values the callers keep cub's device-wide scan.
#pragma once

#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "check.hpp"

namespace ivfgpu::cuda {

constexpr int kSmallScanThreads = 1024;
constexpr int kSmallScanItems = 4;  // consecutive values a thread takes a round
constexpr int64_t kSmallScanRound = int64_t{kSmallScanThreads} * kSmallScanItems;
constexpr int64_t kSmallScanMax = 4 * kSmallScanRound;  // four rounds at most

// out[i] = value(0) + ... + value(i - 1) for i < outputs (outputs: n, or n + 1 with the total
// last), value(i) for i < n; also into `copy` when given. One block of kSmallScanThreads.
template <class V, class Value>
__global__ void __launch_bounds__(kSmallScanThreads)
    small_exclusive_scan_kernel(int64_t n, int64_t outputs, Value value, V* out, V* copy) {
  using Scan = cub::BlockScan<V, kSmallScanThreads>;
  __shared__ typename Scan::TempStorage storage;
  V carry = 0;  // the values before this round's
  for (int64_t i0 = 0; i0 < outputs; i0 += kSmallScanRound) {
    const int64_t first = i0 + int64_t{threadIdx.x} * kSmallScanItems;
    V v[kSmallScanItems];
#pragma unroll
    for (int j = 0; j < kSmallScanItems; ++j) v[j] = first + j < n ? value(first + j) : V{0};
    V total;
    Scan(storage).ExclusiveSum(v, v, total);
#pragma unroll
    for (int j = 0; j < kSmallScanItems; ++j)
      if (first + j < outputs) {
        out[first + j] = carry + v[j];
        if (copy != nullptr) copy[first + j] = carry + v[j];
      }
    carry += total;
    __syncthreads();  // the scan's storage is read before the next round writes it
  }
}

// The kernel above, for n <= kSmallScanMax (the caller's choice).
template <class V, class Value>
void launch_small_exclusive_scan(cudaStream_t stream, int64_t n, int64_t outputs, const Value& value, V* out,
                                 V* copy = nullptr) {
  small_exclusive_scan_kernel<V, Value><<<1, kSmallScanThreads, 0, stream>>>(n, outputs, value, out, copy);
  IVF_CUDA_CHECK_LAUNCH();
}

}  // namespace ivfgpu::cuda
