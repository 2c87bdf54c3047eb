// Segmented top-k (stages B and D): for each of nseg segments of float keys, the k best
// positions, sorted best first (ties by smaller position). Works for every k the device's
// shared memory can sort (k <= 16384 on an H100) and any segment length.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device_context.hpp"

namespace ivfgpu::cuda {

struct SelectInput {
  const float* keys = nullptr;     // segment s starts at keys + s * stride
  int64_t stride = 0;
  const int64_t* lens = nullptr;   // per-segment length on the device, or nullptr: fixed_len
  int64_t fixed_len = 0;
  int64_t max_len = 0;             // an upper bound of every length (for dispatch)
  const float* addend = nullptr;   // optional per-position term added to each key
  // Internal (two-stage selection of long rows): each row is cut into `pieces` pieces of
  // `piece` keys; count_cap caps each row's count; pos_map translates output positions.
  int64_t pieces = 1;
  int64_t piece = 0;
  const int64_t* count_cap = nullptr;
  const int32_t* pos_map = nullptr;
  bool pad_output = false;         // write worst keys / position -1 past the count
};

struct SelectOutput {
  int32_t* pos = nullptr;    // nseg * k, positions within the segment
  float* key = nullptr;      // nseg * k (the key, addend included), or nullptr
  int32_t* count = nullptr;  // nseg: min(k, length)
};

// Largest k select_topk accepts on this device.
int64_t select_max_k(const DeviceLimits& limits);

// larger_is_better: keys are similarities (kept largest first) rather than distances.
void select_topk(const DeviceContext& ctx, cudaStream_t stream, const SelectInput& in, int64_t nseg,
                 int64_t k, bool larger_is_better, const SelectOutput& out);

// The rank-th best key (rank 1: the best) of each of nseg rows (row s: keys + s * stride, lens[s]
// <= stride long), as select_topk orders keys (ordered_key.cuh, negated where larger is better):
// the ordered key select_topk would put at position rank - 1. A row shorter than rank gets
// 0xffffffff. out: nseg words on the device. A warp finds it in a row of up to 2,048 keys
// without selecting the rest; a block each the longer rows (any rank).
void select_rank_key(const DeviceContext& ctx, cudaStream_t stream, const float* keys, int64_t stride,
                     const int64_t* lens, int64_t nseg, int64_t rank, bool larger_is_better, uint32_t* out);
// The device words a row of select_rank_key allocates beside its output, for a caller's memory
// plan: where rows may pass 2,048 keys (stride), their lengths; else none.
int64_t select_rank_key_words(int64_t stride);

}  // namespace ivfgpu::cuda
