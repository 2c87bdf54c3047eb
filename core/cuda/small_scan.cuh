// Exclusive prefix sums over a few thousand values (a search's per-list counts: nlist entries)
// in one block and one launch. cub::DeviceScan takes two launches for them (its tile-state
// initialisation and the scan) plus whatever fills its input and copies its output: a search's
// two groupings and two unit prefixes took ~34 us of launches that way for 1,024 lists (ncu,
// H100, 1M x 128, nprobe 16, 10,000 queries: bench/RESULTS.md, session 66), each of which does
// a few microseconds of work. Past kSmallScanMax values exclusive_scan below takes cub's
// device-wide scan instead; it is the one place that chooses.
#pragma once

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cstddef>
#include <cstdint>

#include "check.hpp"
#include "device_buffer.hpp"

namespace ivfgpu::cuda {

constexpr int kSmallScanThreads = 1024;
constexpr int kSmallScanItems = 4;  // consecutive values a thread takes a round
constexpr int64_t kSmallScanRound = int64_t{kSmallScanThreads} * kSmallScanItems;
constexpr int64_t kSmallScanMax = 4 * kSmallScanRound;  // four rounds at most

// out[i] = value(0) + ... + value(i - 1) for i < outputs (outputs: n, or n + 1 with the total
// last), value(i) for i < n; also into `copy` when given. One block of kSmallScanThreads, for
// outputs <= kSmallScanMax (exclusive_scan chooses).
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

namespace small_scan_detail {
// value(i) for i < n, 0 past it: the device-wide scan's input (outputs may be n + 1).
template <class V, class Value>
struct ValueOrZero {
  Value value;
  int64_t n;
  __device__ V operator()(int64_t i) const { return i < n ? static_cast<V>(value(i)) : V{0}; }
};
}  // namespace small_scan_detail

// out[i] = value(0) + ... + value(i - 1) for i < outputs (outputs: n, or n + 1 with the total
// last), value(i) a device functor of i < n; also into `copy` when given. Up to kSmallScanMax
// outputs the one-block kernel above, in one launch; past it cub's device-wide scan reads the
// values through an iterator (its own two launches, and a copy for `copy`).
template <class V, class Value>
void exclusive_scan(const DeviceContext& ctx, cudaStream_t stream, int64_t n, int64_t outputs, const Value& value,
                    V* out, V* copy = nullptr) {
  if (outputs <= 0) return;
  if (outputs <= kSmallScanMax) {
    small_exclusive_scan_kernel<V, Value><<<1, kSmallScanThreads, 0, stream>>>(n, outputs, value, out, copy);
    IVF_CUDA_CHECK_LAUNCH();
    return;
  }
  const auto in = thrust::make_transform_iterator(thrust::counting_iterator<int64_t>(0),
                                                  small_scan_detail::ValueOrZero<V, Value>{value, n});
  std::size_t bytes = 0;
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, outputs, stream));
  DeviceBuffer<unsigned char> tmp(ctx, bytes, stream);
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp.data(), bytes, in, out, outputs, stream));
  if (copy != nullptr)
    IVF_CUDA_CHECK(cudaMemcpyAsync(copy, out, static_cast<std::size_t>(outputs) * sizeof(V),
                                   cudaMemcpyDeviceToDevice, stream));
}

}  // namespace ivfgpu::cuda
