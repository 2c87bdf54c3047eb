// A batch's (query, probe) pairs grouped by list: the scans' first step, which hands each
// list's work units the queries that probe it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device_buffer.hpp"
#include "device_context.hpp"

namespace ivfgpu::cuda {

// The pairs of a batch grouped by list.
struct ScanGroups {
  DeviceBuffer<int32_t> pair_count, pair_begin, grouped;  // nlist, nlist, npairs
  int tile_q = 16;                                        // the query tile the dispatch chose
};

// The pairs of probes (nq x nprobe list ids, device) with probe rank in [lo, hi) (the pruned
// pass groups its first probes apart from the rest), grouped by list: pair_count and
// pair_begin per list, grouped[pair_begin[l] + j] the j-th pair (q * nprobe + rank) of list l,
// in no particular order.
ScanGroups group_probe_range(const DeviceContext& ctx, cudaStream_t stream, const int32_t* probes, int64_t nq,
                             int64_t nprobe, int64_t nlist, int64_t lo, int64_t hi);

}  // namespace ivfgpu::cuda
