// The stages of one chunk of queries, from device queries to device results: decode and
// normalise (rows.hpp, element_rows.hpp), A coarse GEMM, B top-nprobe, C list scan, D top-k and
// ids (docs/architecture.md §5). Everything is enqueued on one stream with no host
// synchronisation, so the same sequence runs directly (run_search) or captured once into a CUDA
// graph and replayed (small_batch.hpp).
#pragma once

#include <cstdint>

#include "../element_type.hpp"
#include "../search_request.hpp"
#include "device_buffer.hpp"
#include "device_context.hpp"
#include "search.hpp"

namespace ivfgpu::cuda {

// What a search's shape fixes, worked out once per call from the index and the request.
struct SearchPlan {
  int64_t dim = 0, nlist = 0, k = 0, nprobe = 0;
  Metric metric = Metric::L2;
  bool larger = false;       // keys are similarities (kept largest first)
  float pad = 0.0f;          // the distance of a missing result
  ElementType qtype = ElementType::F32;
  bool decode = false;       // queries of a compact type, decoded to f32 on the device
  bool normalize = false;    // cosine: queries normalised on the device
  int64_t bound = 0;         // the longest candidate row any query can have
  bool empty = false;        // no live row: every result is padding
  // The scan keeps candidates on chip (scan_is_pruned): no candidate rows are allocated, and
  // a chunk's scratch per query is scan_words instead of bound.
  bool pruned = false;
  int64_t scan_words = 0;
};

// Fails (Errc::Unsupported) when a query's probed lists could hold 2^31 vectors.
SearchPlan plan_search(const SearchIndexView& index, const SearchRequest& req);

// Fails (Errc::InvalidArgument, naming the first bad row, nothing written) when a device-memory
// query would be refused on the host (reject_unusable_rows): a kernel and a synchronisation.
// Integer queries pass as they are.
void reject_unusable_device_queries(const DeviceContext& ctx, cudaStream_t stream, Metric metric,
                                    const MatrixView& queries);

// Queries per chunk before memory is tried: bounded by the candidate rows, coarse scores and
// result scratch (or the index's scratch share).
int64_t initial_chunk(const DeviceContext& ctx, const SearchIndexView& index, const SearchPlan& plan, int64_t n);

// Scratch of one chunk of up to `rows` queries, reused by every chunk of a call.
struct ChunkScratch {
  DeviceBuffer<float> q_buf, coarse, cand, sel_key;
  DeviceBuffer<int64_t> cand_off, cand_len;
  DeviceBuffer<int32_t> probes, probe_count, sel_pos, sel_count;
  ChunkScratch() = default;
  ChunkScratch(const DeviceContext& ctx, const SearchPlan& plan, int64_t rows, cudaStream_t stream);
};

// Enqueues the stages for `rows` queries at `raw` (device memory, plan.qtype) and writes their
// k results to ids / dists (device memory): enqueue_coarse for every row, then enqueue_scan.
void enqueue_chunk(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                   const SearchRequest& req, const SearchPlan& plan, ChunkScratch& scratch, const void* raw,
                   int64_t rows, int64_t* ids, float* dists);

// The stages apart, so a chunk's coarse work can follow its queries in pieces (query_upload.hpp).
// enqueue_coarse: rows [first, first + rows) of the chunk at `raw` decoded or normalised into
// scratch.q_buf as the plan asks, scored against the centroids and given their nprobe lists
// (stages A and B). enqueue_scan: stages C and D for the chunk's first `rows` queries, once every
// one of them has been through enqueue_coarse.
void enqueue_coarse(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                    const SearchPlan& plan, ChunkScratch& scratch, const void* raw, int64_t first, int64_t rows);
void enqueue_scan(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                  const SearchRequest& req, const SearchPlan& plan, ChunkScratch& scratch, const void* raw,
                  int64_t rows, int64_t* ids, float* dists);

}  // namespace ivfgpu::cuda
