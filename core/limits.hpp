// The ABI's fixed limits, in one place: the C layer checks arguments against them and the
// parameter bounds query reports them. Device-dependent limits (the largest k a CUDA index
// takes) are read from the device by the backend that has them.
#pragma once

#include <cstdint>
#include <limits>

namespace ivfgpu::limits {

constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxNlist = int64_t{1} << 30;
constexpr int64_t kMaxNprobe = std::numeric_limits<int64_t>::max();  // clamped to nlist
constexpr int64_t kMaxKmeansIters = 1000000;
constexpr int64_t kMaxPointsPerCentroid = int64_t{1} << 40;
constexpr int64_t kMaxThreads = 4096;
constexpr int64_t kMaxDevice = 1023;
constexpr int64_t kMaxShards = 1024;
// One CUDA add call appends fewer rows than this (the sort keys are 32-bit).
constexpr int64_t kMaxRowsPerDeviceAdd = (int64_t{1} << 31) - 1;

}  // namespace ivfgpu::limits
