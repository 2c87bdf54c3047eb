// The device side of the host tier (docs/host-tier.md): a cache of the most-probed lists in
// device memory, a two-slot staging ring, and stage C for a chunk of queries whose probed
// lists may be anywhere: the hits are scanned where they sit; every other probed list is
// copied once per chunk (never once per query), in groups that fill a ring slot, on a copy
// stream, while the previous group is scanned; a list larger than a slot is cut into pieces
// (segments, scan.hpp). Results do not depend on where a list was read from.
//
// The cache lives outside the published states: an entry holds the rows of one list block
// (tier_store.hpp) named by (serial, rows), content that never changes, so a hit or a miss
// changes no result and a mutation never has to touch the cache. Admission and eviction follow
// each list's probe count, decayed per chunk (an LFU with ageing); tier/stream_plan.hpp plans,
// this file executes.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "../tier/stream_plan.hpp"
#include "../tier/tier_store.hpp"
#include "cuda_handles.hpp"
#include "device_buffer.hpp"
#include "scan.hpp"

namespace ivfgpu::cuda {

// How a device budget is split (tiered_backend.cu plans it once at creation).
struct TierBudget {
  std::size_t budget = 0;     // what the caller asked for
  // The pool's cap: the budget rounded down to the pool's 32 MiB growth granule (the H100
  // driver reserved 96 MiB for a pool capped at 80 MiB: it grows in whole granules).
  std::size_t pool = 0;
  std::size_t fixed = 0;      // centroids and per-state arrays
  std::size_t ring_slot = 0;  // one of two staging slots
  std::size_t scratch = 0;    // one search chunk's temporaries
  std::size_t mutation = 0;   // an add's assignment blocks
  std::size_t cache = 0;      // cached lists
  // Throws Errc::InvalidArgument naming the minimum when the budget cannot hold the centroids
  // plus the smallest ring and scratch.
  static TierBudget plan(std::size_t budget, int64_t nlist, int64_t dim);
};

struct TierStats {
  int64_t hits = 0, misses = 0;
  std::size_t streamed_bytes = 0;
  int64_t resident_lists = 0;
  std::size_t resident_bytes = 0;
};

class TierCache {
 public:
  TierCache(const DeviceContext& ctx, const TierBudget& budget, int64_t nlist);
  ~TierCache();
  TierCache(const TierCache&) = delete;
  TierCache& operator=(const TierCache&) = delete;

  // Searches of a budgeted index hold this for their whole run: the ring, the cache and the
  // scratch share one budget (docs/host-tier.md says why one at a time).
  std::mutex& search_mutex() { return search_mutex_; }

  // Stage C of one chunk over `store` (the caller holds search_mutex()). Synchronises `stream`
  // once, to learn which lists the chunk probes.
  void scan_chunk(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const tier::TierStore& store);

  TierStats stats() const;

 private:
  void ensure_memory(const DeviceContext& ctx, cudaStream_t stream);
  // Queues a chunk's table upload, copies and scan passes.
  void execute(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& groups,
               const tier::ChunkPlan& plan);
  void* staging(std::size_t bytes);

  TierBudget budget_;
  std::mutex search_mutex_;
  UniqueStream copy_;
  UniqueEvent plan_ready_, copied_[2], slot_free_[2];
  DeviceBuffer<char> cache_mem_, ring_;
  std::unique_ptr<tier::StreamPlanner> planner_;  // the cache's books; made with the cache
  int64_t nlist_;
  int32_t* host_counts_ = nullptr;  // pinned, nlist
  void* staging_ = nullptr;         // pinned
  std::size_t staging_bytes_ = 0;
  std::atomic<int64_t> hits_{0}, misses_{0}, resident_lists_{0};
  std::atomic<std::size_t> streamed_{0}, resident_bytes_{0};
};

}  // namespace ivfgpu::cuda
