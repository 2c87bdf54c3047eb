#include "id_set.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "../errors.hpp"
#include "check.hpp"
#include "launch.cuh"
#include "id_bitset.cuh"

namespace ivfgpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr double kHashSetLoad = 0.875;

unsigned grid_for(int64_t n, const DeviceContext& ctx) { return grid_for_sms(n, kThreads, ctx.limits().sm_count); }

__global__ void min_max_kernel(const int64_t* ids, int64_t n, long long* min_max) {
  long long lo = std::numeric_limits<long long>::max(), hi = std::numeric_limits<long long>::min();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    lo = min(lo, static_cast<long long>(ids[i]));
    hi = max(hi, static_cast<long long>(ids[i]));
  }
  atomicMin(min_max, lo);
  atomicMax(min_max + 1, hi);
}

__global__ void set_bits_kernel(const int64_t* ids, int64_t n, int64_t base, uint32_t* words) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t off = static_cast<uint64_t>(ids[i]) - static_cast<uint64_t>(base);
    atomicOr(words + (off >> 5), 1u << (off & 31u));
  }
}

__global__ void contains_kernel(IdSetView set, const int64_t* ids, int64_t n, uint8_t* out) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = set.contains(ids[i]) ? 1 : 0;
}

}  // namespace

IdFilterKind choose_id_filter(int64_t count, int64_t min_id, int64_t max_id) {
  if (count <= 0) return IdFilterKind::Bitset;
  if (max_id < min_id) return IdFilterKind::HashSet;
  const uint64_t span = static_cast<uint64_t>(max_id) - static_cast<uint64_t>(min_id);  // bits - 1
  if (span == std::numeric_limits<uint64_t>::max()) return IdFilterKind::HashSet;
  const uint64_t bits = span + 1;
  const uint64_t words64 = bits / 64 + (bits % 64 != 0);  // range <= 64 * count, without overflow
  return words64 <= static_cast<uint64_t>(count) ? IdFilterKind::Bitset : IdFilterKind::HashSet;
}

IdSet IdSet::build(const DeviceContext& ctx, const int64_t* ids, int64_t n, cudaStream_t stream) {
  require(n >= 0 && (n == 0 || ids != nullptr), Errc::InvalidArgument, "id set: bad arguments");
  DeviceGuard guard(ctx.device());
  IdSet s(ctx);
  if (n == 0) return s;  // an empty bitset: contains() is false for every id

  DeviceBuffer<long long> range(ctx, 2, stream);
  const long long init[2] = {std::numeric_limits<long long>::max(), std::numeric_limits<long long>::min()};
  IVF_CUDA_CHECK(cudaMemcpyAsync(range.data(), init, sizeof(init), cudaMemcpyHostToDevice, stream));
  min_max_kernel<<<grid_for(n, ctx), kThreads, 0, stream>>>(ids, n, range.data());
  IVF_CUDA_CHECK_LAUNCH();
  long long mm[2] = {0, 0};
  IVF_CUDA_CHECK(cudaMemcpyAsync(mm, range.data(), sizeof(mm), cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));

  s.kind_ = choose_id_filter(n, mm[0], mm[1]);
  if (s.kind_ == IdFilterKind::Bitset) {
    s.base_ = mm[0];
    s.nbits_ = static_cast<uint64_t>(mm[1]) - static_cast<uint64_t>(mm[0]) + 1;
    const std::size_t nwords = static_cast<std::size_t>((s.nbits_ + 31) / 32);
    s.words_ = DeviceBuffer<uint32_t>(ctx, nwords, stream);
    IVF_CUDA_CHECK(cudaMemsetAsync(s.words_.data(), 0, nwords * sizeof(uint32_t), stream));
    set_bits_kernel<<<grid_for(n, ctx), kThreads, 0, stream>>>(ids, n, s.base_, s.words_.data());
    IVF_CUDA_CHECK_LAUNCH();
  } else {
    s.map_.emplace(ctx, n, kHashSetLoad, stream);
    s.map_->insert(ids, nullptr, n, stream);
  }
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  return s;
}

IdSetView IdSet::view() const {
  IdSetView v;
  v.dense = kind_ == IdFilterKind::Bitset;
  v.bits.words = words_.data();
  v.bits.base = base_;
  v.bits.nbits = nbits_;
  if (map_) v.map = map_->view();
  return v;
}

std::size_t IdSet::bytes() const { return words_.bytes() + (map_ ? map_->bytes() : 0); }

void IdSet::contains(const int64_t* ids, int64_t n, uint8_t* out, cudaStream_t stream) const {
  require(n >= 0 && (n == 0 || (ids != nullptr && out != nullptr)), Errc::InvalidArgument,
          "id set contains: bad arguments");
  if (n == 0) return;
  DeviceGuard guard(ctx_->device());
  contains_kernel<<<grid_for(n, *ctx_), kThreads, 0, stream>>>(view(), ids, n, out);
  IVF_CUDA_CHECK_LAUNCH();
}

}  // namespace ivfgpu::cuda
