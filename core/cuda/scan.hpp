// Stage C, the list scan, as a list-major schedule: the (query, probe) pairs of a batch are
// inverted into per-list groups; each block takes one (list, query tile, vector tile), stages
// the tile's vectors and queries in shared memory once and computes every query x vector
// distance exactly in fp32 (sum of (q_j - x_j)^2, or q_j * x_j, in dimension order), writing it
// to the query's candidate row. Rows of a compact storage type are decoded to fp32 as they are
// staged (integer rows against integer queries stay integers: exact sums). At batch 1 a group holds one query (the query-major case); at
// large batches hundreds, so each list is read once per query tile instead of once per query.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../list_store.hpp"
#include "../types.hpp"
#include "candidates.cuh"
#include "device_buffer.hpp"
#include "device_context.hpp"
#include "group_pairs.hpp"
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
  // The queries were given in the index's integer storage type (their f32 values are those
  // integers): distances to integer rows are then exact integer sums.
  bool integer_queries = false;
  // The queries' f32 values are exactly those of the index's storage type (given in that type, not
  // normalised since): f16 or bf16 ones go to the tensor cores as they are (resident_native).
  bool storage_queries = false;
  int64_t k = 0;  // the search's k (the scan kernel's choice depends on it)
  // nlist * dim (device): the lists' centroids. The pruned pass's L2 arithmetic runs on
  // vectors minus their list's centroid, where its error bound is far tighter (optional).
  const float* centroids = nullptr;
  // The SIMT scan reads rows row_step apart from each list's start (the wide pass's strided
  // sample, scan.cu's sampled_wide_bound): list l's row i is storage slot start[l] + i * row_step,
  // and size[l] counts the rows so read. 1 for every other scan; the tensor passes require it.
  int64_t row_step = 1;
};

// What the stage left: exact distances in the candidate rows; or (the tensor-core pass,
// scan_tensor.cuh) pessimistic keys there that refine_candidates settles after a first top-k;
// or (its pruned form, for small k) per-query bounds and lists of rows that can still enter,
// which settle_pruned turns into the answer with no candidate-row selection at all.
namespace scan_detail {
struct PruneState;
}
struct ScanOutcome {
  bool needs_refine = false;
  bool pruned = false;
  bool exact = false;  // the pruned pass ran on integers: every entry's cost is exact
  bool estimated = false;  // its bounds are the wide pass's sampled estimates (PruneState::estimated)
  DeviceBuffer<float> list_norm;  // nlist: each probed list's largest row norm (the keys pass)
  // The pruned pass's state (scan_tensor.hpp, PruneState): per query a bound, a count and up
  // to cap entries (candidate position, optimistic cost).
  DeviceBuffer<uint32_t> bound;
  DeviceBuffer<int32_t> found, pos, seeded;
  DeviceBuffer<float> opt;
  int64_t cap = 0;
  scan_detail::PruneState prune_state(const ScanProblem& p) const;
};

// Runs the whole stage on `stream`, scratch from ctx's pool. No host synchronisation. The
// kernel (SIMT or tensor cores) is chosen inside, in one place.
ScanOutcome scan_lists(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p);

// Whether scan_lists takes the pruned tensor pass for a call of nq queries of this shape. It
// writes no candidate rows: a caller that asked may leave ScanProblem::cand.dist null (only
// the offsets and lengths are used), and scan_lists then takes that pass for every chunk.
bool scan_is_pruned(int64_t nq, int64_t nprobe, int64_t nlist, int64_t dim, int64_t k);
// The pruned pass's device scratch per query, in 4-byte words (for chunk sizing): its seed's
// (the SIMT seed's candidate rows, the largest lists, as many as it scans: largest_prefix,
// nlist + 1 entries; or a tensor seed's kept values, whichever is larger), its entries, and the
// integer passes' packed query (dim bytes and its squared norm).
int64_t pruned_scan_words_per_query(const int64_t* largest_prefix, int64_t nprobe, int64_t k, int64_t dim);

// After a top-k (sel_key, sel_count: nq * k, nq) of a tensor-core pass's candidates: exact
// distances for the rows that can be among the k best, padding for the rest. A second top-k
// over the rows then gives the SIMT scan's results.
void refine_candidates(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanOutcome& outcome,
                       const float* sel_key, const int32_t* sel_count, int64_t k);

// After a pruned pass: the k best of each query (ids through the store's slots, or list_ids
// when non-null) into out_ids / out_dists, exactly as the SIMT scan, a top-k and the
// finaliser would give them (padding past the candidates).
void settle_pruned(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanOutcome& outcome,
                   const int64_t* const* list_ids, int64_t* out_ids, float* out_dists);

// The stage in parts, for lists that are not all in one device array (the host tier streams
// some of them through a staging ring): group the pairs once, then scan segments in passes.
//
// A segment is rows [row0, row0 + rows) of one list at a device address of its own; every
// query probing the list is scanned against it and its distances land where the whole list's
// rows would (candidate position row0 + r), so a list cut into segments, scanned in any
// order, gives exactly the candidates of the list scanned at once.
struct ScanSegment {
  const void* rows = nullptr;    // the segment's first row
  const int64_t* ids = nullptr;  // its ids (read only under a filter)
  int64_t list = 0;
  int64_t row0 = 0;
  int64_t count = 0;
};

// The pairs of a batch grouped by list (group_pairs.hpp), and the candidate row layout
// (written to p.cand).
ScanGroups group_scan_pairs(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p);

// Work units of one segment (what tile_off counts): query tiles x vector units.
int64_t scan_segment_tiles(int64_t pairs, int64_t rows, int tile_q);

// Scans nseg segments (device array) whose exclusive prefix of scan_segment_tiles is tile_off
// (device, nseg + 1 entries). p.lists' removed bits are not consulted (a host-tier list has
// none); p.lists.size is.
void scan_segments(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& groups,
                   const ScanSegment* segments, const int64_t* tile_off, int64_t nseg);

}  // namespace ivfgpu::cuda
