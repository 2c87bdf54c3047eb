#include "tier_cache.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "../errors.hpp"
#include "check.hpp"

namespace ivfgpu::cuda {

namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

std::string mib(std::size_t b) { return std::to_string((b + kMiB - 1) / kMiB) + " MiB"; }

}  // namespace

TierBudget TierBudget::plan(std::size_t budget, int64_t nlist, int64_t dim) {
  TierBudget b;
  b.budget = budget;
  constexpr std::size_t kGranule = 32 * kMiB;
  b.pool = budget / kGranule * kGranule;
  // Centroids and norms, and each live state's sizes and id pointers (a few states overlap
  // while mutations publish), plus the pool's rounding and small temporaries.
  b.fixed = static_cast<std::size_t>(nlist) * (static_cast<std::size_t>(dim) + 1) * sizeof(float) +
            static_cast<std::size_t>(nlist) * 16 * 4 + 16 * kMiB;
  const std::size_t min_ring = 4 * kMiB, min_scratch = 32 * kMiB, min_mutation = 16 * kMiB;
  const std::size_t minimum = b.fixed + 2 * min_ring + min_scratch + min_mutation;
  const std::size_t least = (minimum + kGranule - 1) / kGranule * kGranule;
  if (b.pool < minimum)
    fail(Errc::InvalidArgument, "IVF_PARAM_DEVICE_BUDGET = " + std::to_string(budget) + " bytes is too small for " +
                                    std::to_string(nlist) + " lists of dimension " + std::to_string(dim) +
                                    ": the centroids, a staging ring and search scratch need at least " +
                                    std::to_string(least) + " bytes (" + mib(least) +
                                    ": device memory is reserved in 32 MiB granules)");
  const std::size_t avail = b.pool - b.fixed;
  b.ring_slot = std::clamp(avail / 16, min_ring, 256 * kMiB) / (2 * kMiB) * (2 * kMiB);
  b.ring_slot = std::max(b.ring_slot, min_ring);
  // Scratch bounds a chunk's queries, and each chunk streams the probed lists it does not
  // cache: a larger chunk streams a list fewer times per batch. A third of the budget (the
  // first H100 run with 1/8 streamed a 25.6 GB index 1.5x per batch at nprobe 1).
  b.scratch = std::clamp(avail / 3, min_scratch, std::size_t{16384} * kMiB);
  b.mutation = std::clamp(avail / 16, min_mutation, 512 * kMiB);
  const std::size_t used = 2 * b.ring_slot + b.scratch + b.mutation;
  // What is left holds cached lists, less 2% for the pool's chunk rounding.
  b.cache = avail > used ? (avail - used) / 50 * 49 : 0;
  return b;
}

TierCache::TierCache(const DeviceContext& ctx, const TierBudget& budget, int64_t nlist)
    : budget_(budget), nlist_(nlist) {
  // Streams and events belong to the index's device, whichever is current.
  DeviceGuard guard(ctx.device());
  copy_ = make_stream();
  plan_ready_ = make_event();
  for (int s = 0; s < 2; ++s) {
    copied_[s] = make_event();
    slot_free_[s] = make_event();
  }
  IVF_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_counts_), sizeof(int32_t) * std::max<int64_t>(nlist, 1),
                               cudaHostAllocPortable));
}

TierCache::~TierCache() {
  (void)cudaStreamSynchronize(copy_.get());
  if (host_counts_) (void)cudaFreeHost(host_counts_);
  if (staging_) (void)cudaFreeHost(staging_);
  // The cache and ring buffers are freed on the stream that made them, after its work.
}

TierStats TierCache::stats() const {
  TierStats s;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.streamed_bytes = streamed_.load();
  s.resident_lists = resident_lists_.load();
  s.resident_bytes = resident_bytes_.load();
  return s;
}

void TierCache::ensure_memory(const DeviceContext& ctx, cudaStream_t stream) {
  // Made once, on the first search's stream, and kept: part of the budget from then on.
  if (planner_ == nullptr) {
    if (ring_.data() == nullptr) ring_ = DeviceBuffer<char>(ctx, 2 * budget_.ring_slot, stream, MemoryUse::State);
    // The cache's share of the budget, or what the device can give when other processes hold
    // the rest (halving down to nothing: a budget is a ceiling, not a reservation).
    std::size_t cache = budget_.cache;
    std::size_t free_now = 0, total = 0;
    if (cudaMemGetInfo(&free_now, &total) == cudaSuccess) {
      // Leave the scratch and add shares (and a margin) free for the calls that need them.
      const std::size_t keep = budget_.scratch + budget_.mutation + (std::size_t{256} << 20);
      cache = std::min(cache, free_now > keep ? free_now - keep : 0);
    } else {
      (void)cudaGetLastError();
    }
    while (cache >= (std::size_t{1} << 20)) {
      try {
        cache_mem_ = DeviceBuffer<char>(ctx, cache, stream, MemoryUse::State);
        break;
      } catch (const Error& e) {
        if (e.code() != Errc::OutOfDeviceMemory) throw;
        cache /= 2;
      }
    }
    if (cache_mem_.data() == nullptr) cache = 0;
    planner_ = std::make_unique<tier::StreamPlanner>(cache, budget_.ring_slot, nlist_);
    // Later searches run on other streams: free these on the copy stream at the end, after it
    // has waited for every search (the destructor's order).
    ring_.set_stream(copy_.get());
    cache_mem_.set_stream(copy_.get());
  }
}

void* TierCache::staging(std::size_t bytes) {
  if (bytes > staging_bytes_) {
    if (staging_) IVF_CUDA_CHECK(cudaFreeHost(staging_));
    staging_ = nullptr;
    staging_bytes_ = 0;
    const std::size_t want = std::max<std::size_t>(bytes, 64 * 1024) * 2;
    IVF_CUDA_CHECK(cudaHostAlloc(&staging_, want, cudaHostAllocPortable));
    staging_bytes_ = want;
  }
  return staging_;
}

void TierCache::scan_chunk(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p,
                           const tier::TierStore& store) {
  ensure_memory(ctx, stream);
  const int64_t nlist = store.nlist();
  const bool need_ids = p.filter != ScanProblem::Filter::None;
  ScanGroups groups = group_scan_pairs(ctx, stream, p);
  IVF_CUDA_CHECK(cudaMemcpyAsync(host_counts_, groups.pair_count.data(), sizeof(int32_t) * nlist,
                                 cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));  // the one host synchronisation: what is probed
  const tier::ChunkPlan plan = planner_->plan(host_counts_, store, need_ids);
  hits_.fetch_add(plan.hit_probes);
  misses_.fetch_add(plan.missed_probes);
  streamed_.fetch_add(plan.streamed_bytes);
  resident_lists_.store(planner_->resident_lists());
  resident_bytes_.store(planner_->resident_bytes());
  try {
    execute(ctx, stream, p, groups, plan);
  } catch (...) {
    planner_->abandon(plan);
    resident_lists_.store(planner_->resident_lists());
    resident_bytes_.store(planner_->resident_bytes());
    throw;
  }
}

void TierCache::execute(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& groups,
                        const tier::ChunkPlan& plan) {
  auto at = [&](tier::Region r, std::size_t off) -> char* {
    return (r == tier::Region::Cache ? cache_mem_.data() : ring_.data()) + off;
  };
  auto segments_of = [&](const std::vector<tier::PlannedSegment>& planned) {
    std::vector<ScanSegment> out;
    out.reserve(planned.size());
    for (const tier::PlannedSegment& s : planned)
      out.push_back(ScanSegment{at(s.region, s.rows_at),
                                s.has_ids ? reinterpret_cast<const int64_t*>(at(s.region, s.ids_at)) : nullptr,
                                s.list, s.row0, s.count});
    return out;
  };

  // One table for every pass (hits, then each group): segments, then each pass's tile prefix.
  struct Pass {
    std::size_t seg_at, tile_at;
    int64_t nseg;
  };
  std::vector<Pass> passes;
  std::vector<ScanSegment> all_segments;
  std::vector<int64_t> all_tiles;
  auto add_pass = [&](const std::vector<ScanSegment>& segs) {
    passes.push_back(Pass{all_segments.size(), all_tiles.size(), static_cast<int64_t>(segs.size())});
    all_segments.insert(all_segments.end(), segs.begin(), segs.end());
    int64_t acc = 0;
    for (const ScanSegment& s : segs) {
      all_tiles.push_back(acc);
      acc += scan_segment_tiles(host_counts_[s.list], s.count, groups.tile_q);
    }
    all_tiles.push_back(acc);
  };
  add_pass(segments_of(plan.hits));
  for (const tier::PlannedGroup& g : plan.groups) add_pass(segments_of(g.segments));
  const std::size_t seg_bytes = all_segments.size() * sizeof(ScanSegment);
  const std::size_t tile_at = (seg_bytes + 15) / 16 * 16;
  const std::size_t table_bytes = tile_at + all_tiles.size() * sizeof(int64_t);
  char* host_table = static_cast<char*>(staging(table_bytes));
  if (!all_segments.empty()) std::memcpy(host_table, all_segments.data(), seg_bytes);
  std::memcpy(host_table + tile_at, all_tiles.data(), all_tiles.size() * sizeof(int64_t));
  DeviceBuffer<char> table(ctx, table_bytes, stream);
  IVF_CUDA_CHECK(cudaMemcpyAsync(table.data(), host_table, table_bytes, cudaMemcpyHostToDevice, stream));
  const auto* d_segments = reinterpret_cast<const ScanSegment*>(table.data());
  const auto* d_tiles = reinterpret_cast<const int64_t*>(table.data() + tile_at);
  auto run_pass = [&](const Pass& ps) {
    scan_segments(ctx, stream, p, groups, d_segments + ps.seg_at, d_tiles + ps.tile_at, ps.nseg);
  };

  // Copies may start once everything before this chunk on `stream` is done (earlier chunks'
  // scans read the ring and cache ranges these copies overwrite).
  IVF_CUDA_CHECK(cudaEventRecord(plan_ready_.get(), stream));
  IVF_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), plan_ready_.get(), 0));
  run_pass(passes[0]);
  for (std::size_t gi = 0; gi < plan.groups.size(); ++gi) {
    const int s = plan.groups[gi].slot;
    // Slot s was last read by group gi - 2's scan (groups alternate slots).
    if (gi >= 2) IVF_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), slot_free_[s].get(), 0));
    for (const tier::PlannedCopy& c : plan.groups[gi].copies)
      IVF_CUDA_CHECK(cudaMemcpyAsync(at(c.region, c.at), c.src, c.bytes, cudaMemcpyHostToDevice, copy_.get()));
    IVF_CUDA_CHECK(cudaEventRecord(copied_[s].get(), copy_.get()));
    IVF_CUDA_CHECK(cudaStreamWaitEvent(stream, copied_[s].get(), 0));
    run_pass(passes[gi + 1]);
    IVF_CUDA_CHECK(cudaEventRecord(slot_free_[s].get(), stream));
  }
  // The table and the groups' scratch are freed on `stream`, after the last pass.
}

}  // namespace ivfgpu::cuda
