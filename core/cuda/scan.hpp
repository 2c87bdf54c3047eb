// Stage C, the list scan, as a list-major schedule: the (query, probe) pairs of a batch are
// inverted into per-list groups; each block takes one (list, query tile, vector tile), stages
// the tile's vectors and queries in shared memory once and computes every query x vector
// distance exactly in fp32 (sum of (q_j - x_j)^2, or q_j * x_j, in dimension order), writing it
// to the query's candidate row. At batch 1 a group holds one query (the query-major case); at
// large batches hundreds, so each list is read once per query tile instead of once per query.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../list_store.hpp"
#include "../types.hpp"
#include "candidates.cuh"
#include "device_context.hpp"
#include "id_bitset.cuh"

namespace ivfgpu::cuda {

struct ScanProblem {
  const float* queries = nullptr;   // nq * dim (device)
  int64_t nq = 0;
  int64_t nprobe = 0;
  const int32_t* probes = nullptr;  // nq * nprobe list ids
  ListView lists;                   // a device-tier view
  Metric metric = Metric::L2;
  CandidateRows cand;               // offsets and lengths are written here
  // Rows that may not be returned (removed ones, and those a filter rejects) get `excluded` as
  // their distance: the worst key, which the finaliser turns into padding.
  enum class Filter { None, Allow, Deny } filter = Filter::None;
  IdSetView filter_set;
  float excluded = 0.0f;
};

// Runs the whole stage on `stream`, scratch from ctx's pool. No host synchronisation.
void scan_lists(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p);

}  // namespace ivfgpu::cuda
