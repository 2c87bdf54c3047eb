// The fused small-batch search (issue 14): a handful of queries on a resident index in three
// kernels, no library allocation, no copy node and one synchronisation:
//
//   1. coarse_probe: each block scores a slice of the centroids (64 or more, at most 64 slices)
//      for one query (decoding and, for cosine, normalising it on the way) and keeps its best
//      nprobe (every key, unsorted, when nprobe covers the slice); the last block of the query
//      to finish merges the slices into the probe list and the per-probe tile offsets.
//   2. tile_scan: each block takes 128 rows of one probed list for one query, stages them
//      through shared memory 32 dimensions at a time, and a thread per row computes the exact
//      distance (fp32 in dimension order, or exact integers for integer rows with integer
//      queries); it sorts them on chip and writes only the best min(k, 128). A block loads the
//      first chunk of its next tile while it sums the last chunk of this one.
//   3. merge_topk: one block per query keeps the k best of those candidates: for k <= 32 in
//      each warp's registers (an entry is inserted only when it beats the warp's k-th), else
//      in shared memory (a bitonic sort when its buffer fills, then only keys below the k-th
//      enter); then writes ids and distances.
//
// Warps score 8 centroids at once so that their loads are in flight together: one at a
// time, a batch-1 search was bound by load latency, not bandwidth. Each block asks for its
// slice's centroids (a prefetch) before it reads the query, so the two round trips overlap:
// the slices' scores were done 9.8 us into a batch-1 search at nprobe 64 before, 2.9 us after
// (globaltimer marks, H200).
//
// Host queries are read, and host results written, by the kernels themselves through the
// worker's pinned staging (mapped memory: no copy engine round trips). Distances are the
// list-major scan's bit for bit (the same fma chain in dimension order). The coarse keys are
// the batch path's formula (|c|^2 - 2 q.c, or -q.c) summed in another order than cuBLAS, so
// probes can differ only at coarse near-ties (docs/results-contract.md); ties between
// candidates are kept in probe-then-row order.
//
// Scratch comes from the worker's own arena, sized per call shape and kept between calls;
// the per-query completion counters are reset by the block that reads them, so a call needs
// no memset.
#pragma once

#include <cstdint>

#include "device_buffer.hpp"
#include "device_context.hpp"
#include "pinned_buffer.hpp"
#include "scratch_arena.hpp"
#include "search.hpp"

namespace ivfgpu::cuda {

struct SearchPlan;

// Limits of the fused path (requests outside take the batch pipeline).
constexpr int64_t kFusedMaxDim = 2048;     // a query lives in shared memory
constexpr int64_t kFusedMaxNprobe = 256;   // the probe merge sorts slices x nprobe on chip
constexpr int64_t kFusedMaxMerge = 4096;   // ... at most this many coarse candidates

class FusedSmallSearch {
 public:
  static constexpr std::size_t kMaxArena = std::size_t{64} << 20;

  // Runs the request and returns true, or returns false (nothing done) when its shape does
  // not fit the kernels' limits. The caller has decided the request is a small one.
  // check_queries (device-memory queries): the coarse kernel gives each query the host check
  // (NaN or Inf; the norm bound but under cosine) and, when one fails, the merge writes
  // nothing and run throws naming the first: no synchronisation of its own, as a separate
  // check needs (about 20 us of a 35 us search).
  bool run(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
           const SearchRequest& req, const SearchPlan& plan, bool check_queries);
  void release_device_memory() noexcept;

 private:
  ScratchArena arena_;
  DeviceBuffer<int32_t> done_;  // per-query completion counters of coarse_probe, kept zero
  PinnedBuffer in_, out_;
  PinnedBuffer status_;         // the queries' verdicts, read after the synchronisation
  void* in_device_ = nullptr;   // the staging's device mappings
  void* out_device_ = nullptr;
  void* status_device_ = nullptr;
};

}  // namespace ivfgpu::cuda
