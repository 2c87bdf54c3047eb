// The search pipeline (docs/architecture.md §5): coarse GEMM (A), top-nprobe (B), list scan (C), final
// top-k (D), in query chunks sized from a memory budget, all stream-ordered.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../list_store.hpp"
#include "../search_request.hpp"
#include "device_context.hpp"
#include "id_bitset.cuh"

namespace ivfgpu::cuda {

struct ScanProblem;

// Stage C for an index whose lists are not all in one device array (the host tier): runs the
// scan of one chunk, however it gets the rows there. Called on the chunk's stream.
class ListScanner {
 public:
  virtual ~ListScanner() = default;
  virtual void scan(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& problem) const = 0;
};

struct SearchIndexView {
  int64_t dim = 0;
  int64_t nlist = 0;
  Metric metric = Metric::L2;
  const float* centroids = nullptr;       // device
  const float* centroid_norms = nullptr;  // device
  ListView lists;                         // a device-tier view, or sizes only with a scanner
  const IdSetView* filter_set = nullptr;  // the request's filter on this device, or null
  // Names the published state, unique in the process (0: none): what a captured graph of
  // this index's arrays is kept under (small_batch.hpp).
  uint64_t state_id = 0;
  // The host tier: its scanner (null: scan lists.vectors), each list's ids as the device reads
  // them (null: lists.ids + lists.start), and the bytes a chunk's scratch may take (0: sized
  // from the device's memory).
  const ListScanner* scanner = nullptr;
  const DeviceContext::Lease* lease = nullptr;  // a worker the caller holds already, or null
  const int64_t* const* list_ids = nullptr;
  std::size_t scratch_budget = 0;
};

// Cosine queries are normalised here (rows.hpp). Synchronous unless request.asynchronous().
void run_search(const DeviceContext& ctx, const SearchIndexView& index, const SearchRequest& req);

// Whether run_search should check req's host queries itself (SearchRequest::check_queries):
// batches past the small-batch paths, whose check runs on the calling thread while the first
// chunk runs on the GPU, before any result is copied out. Checked first, it delayed all GPU
// work: 0.7 ms of a 2.8 ms call at 10,000 x 128 on the H100.
bool run_search_checks_queries_late(const SearchRequest& req);

}  // namespace ivfgpu::cuda
