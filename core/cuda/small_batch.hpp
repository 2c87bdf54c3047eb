// The latency path (issue 14): a search of a handful of queries on a resident index is a few
// microseconds of GPU work behind a dozen launches, pool allocations and copies.
//
// By default the fused kernels answer it (fused_search.hpp: three launches, mapped staging, one
// synchronisation) up to kFusedMaxRows queries and kFusedMaxPairs probes. What they do not take (larger shapes, more
// queries) can go through a captured graph of the batch pipeline, described here. The whole
// launch sequence of search_stages.hpp is captured once per shape into a CUDA graph and then
// replayed with one cudaGraphLaunch: scratch from the worker's arena (scratch_arena.hpp), host
// queries and results through the worker's pinned buffers (the copies are nodes of the graph),
// one synchronisation. The graph runs the same kernels on the same data as the direct path, so
// the results are the same (docs/results-contract.md).
//
// A shape is (published state, queries rounded up to a power of two, nprobe, k, query type,
// memory kind). It is captured on its second use by the same worker and state, so an index that
// changes after every search never pays for captures it cannot reuse; a worker keeps its
// kMaxGraphs most recently used graphs. Calls with a filter, a caller's stream, a host-tier
// index, more than kSmallBatchMax queries or k > kSmallBatchMaxK take the direct path.
//
// Opt-in: only with IVFGPU_SEARCH_GRAPH=1 in the environment (read at every call, so tests
// compare the two paths in one process). A stream capture is a process-wide hazard: while one
// runs (once per worker, state and shape), another thread's cudaDeviceSynchronize is refused
// or, as seen on CUDA 13.0, crashes inside the driver. The library itself no longer makes such
// calls, but a host program may; until the graphs are built without stream capture, the path
// stays off unless the program asks for it.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda_handles.hpp"
#include "device_context.hpp"
#include "fused_search.hpp"
#include "pinned_buffer.hpp"
#include "scratch_arena.hpp"
#include "search.hpp"

namespace ivfgpu::cuda {

struct SearchPlan;

constexpr int64_t kSmallBatchMax = 64;
constexpr int64_t kSmallBatchMaxK = 1024;
// Calls the fused kernels answer by default: at most this many queries and (query, probed
// list) pairs (IVFGPU_FUSED_MAX_ROWS overrides; small_batch.cu says why).
constexpr int64_t kFusedMaxRows = 64;
constexpr int64_t kFusedMaxPairs = 512;

struct SmallGraphKey {
  uint64_t state = 0;
  int64_t rows = 0, nprobe = 0, k = 0;
  ElementType qtype = ElementType::F32;
  MemoryKind memory = MemoryKind::Host;
  bool operator==(const SmallGraphKey& o) const {
    return state == o.state && rows == o.rows && nprobe == o.nprobe && k == o.k && qtype == o.qtype &&
           memory == o.memory;
  }
};

class SmallBatchGraphs {
 public:
  static constexpr std::size_t kMaxGraphs = 32;
  // A worker's arena holds at most this much: shapes that need more take the direct path.
  static constexpr std::size_t kMaxArena = std::size_t{64} << 20;

  // Runs the request through a graph and returns true, or returns false (nothing done) when
  // the request is not one for this path.
  bool run(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
           const SearchRequest& req, const SearchPlan& plan);
  // Drops the graphs and returns the arena to the pool (stream-ordered: no synchronisation).
  // The pinned staging stays: freeing pinned memory synchronises the whole device, which
  // would wait for searches queued on callers' streams.
  void release_device_memory() noexcept;
  FusedSmallSearch& fused() { return fused_; }

 private:
  struct Graph {
    SmallGraphKey key;
    UniqueGraphExec exec;   // null until captured
    int uses = 0;
    bool refused = false;   // could not be captured: the direct path serves this shape
    uint64_t last_use = 0;
    // Where the graph reads its queries and leaves its results (arena addresses).
    void* queries = nullptr;
    int64_t* ids = nullptr;
    float* dists = nullptr;
  };

  Graph& find(const SmallGraphKey& key);
  bool capture(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
               const SearchRequest& req, const SearchPlan& plan, Graph& g);
  void forget_captures();  // the arena or the staging moved: every graph points at the old place

  FusedSmallSearch fused_;  // its own arena and staging: a graph's addresses never move for it
  ScratchArena arena_;
  PinnedBuffer in_, out_;
  std::vector<Graph> graphs_;
  uint64_t clock_ = 0;
};

// The one place that decides whether a search takes the latency path, and runs it there.
// device_check: device-memory queries still to be checked (reject_unusable_device_queries);
// cleared once this call has checked them, whether or not it then took the search. The
// fused kernels check them inside the search, with no synchronisation of their own.
bool run_small_batch(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                     const SearchRequest& req, const SearchPlan& plan, bool& device_check);

}  // namespace ivfgpu::cuda
