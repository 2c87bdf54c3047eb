#include "scan.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "../element_type.hpp"
#include "../errors.hpp"
#include "check.hpp"
#include "device_buffer.hpp"
#include "group_pairs.hpp"
#include "launch.cuh"
#include "ordered_key.cuh"
#include "scan_dispatch.hpp"
#include "scan_tensor.hpp"
#include "scan_tiles.hpp"
#include "select.hpp"
#include "small_scan.cuh"

namespace ivfgpu::cuda {

namespace {

using scan_detail::kThreads;
using scan_detail::kTileV;
using scan_detail::kUnitTiles;

// Per query: exclusive prefix of its probed list sizes (its candidate row layout). A warp a
// query, 32 probes a step: a block a query left 240 of its 256 threads idle at nprobe 16 and
// took 22 us for 10,000 queries (ncu, H200).
__global__ void candidate_offsets_kernel(const int32_t* probes, int64_t nq, int64_t nprobe, const int64_t* list_size,
                                         CandidateRows cand) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; q < nq; q += warps) {
    int64_t base = 0;
    for (int64_t p0 = 0; p0 < nprobe; p0 += 32) {
      const int64_t p = p0 + lane;
      const int64_t v = p < nprobe ? list_size[probes[q * nprobe + p]] : 0;
      int64_t incl = v;
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const int64_t u = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += u;
      }
      if (p < nprobe) cand.offsets[q * (nprobe + 1) + p] = base + incl - v;
      base += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) {
      cand.offsets[q * (nprobe + 1) + nprobe] = base;
      cand.lengths[q] = base;
    }
  }
}

// Work units per list: tile_q queries x unit_rows rows (the SIMT scan's: kUnitTiles vector
// tiles; the int8 seed's: kSeedUnitRows), or with unit_rows 0 the tensor-core pass's (tile_q
// queries x kMmaUnitTiles row tiles: tensor_tiles).
// Entry i counts the units of list order[i] (order null: list i), i < nlist.
struct UnitsOfList {
  const int32_t* pair_count;
  const int64_t* list_size;
  const int32_t* order;
  int tile_q;
  int64_t unit_rows;
  __device__ int64_t operator()(int64_t i) const {
    const int64_t l = order != nullptr ? order[i] : i;
    if (unit_rows == 0) return scan_detail::tensor_tiles(pair_count[l], list_size[l], tile_q);
    const int64_t qt = (pair_count[l] + tile_q - 1) / tile_q;
    return qt * ((list_size[l] + unit_rows - 1) / unit_rows);
  }
};

// IVFGPU_SCAN pins the kernel of resident scans (A/B runs, and tests that compare them in one
// process: read at every scan): =simt; =tensor (pruned where k allows, else keys; the pruned
// pass's kernel as choose_pruned_kernel picks); =bf16 (the same, but the pruned pass always on
// centred bf16 operands, also for integer queries on integer rows and f16 or bf16 queries on rows
// of their type); =keys (the tensor pass that writes every candidate's key). Unset, the dispatch
// below decides.
enum class ScanKernel { Auto, Simt, Tensor, TensorKeys, TensorPruned };
// Whether environment variable `name` is set to `value` (the pins below).
bool env_is(const char* name, const char* value) {
  const char* e = std::getenv(name);
  return e != nullptr && std::strcmp(e, value) == 0;
}
ScanKernel scan_kernel_override() {
  const char* e = std::getenv("IVFGPU_SCAN");
  if (e == nullptr) return ScanKernel::Auto;
  if (std::strcmp(e, "simt") == 0) return ScanKernel::Simt;
  if (std::strcmp(e, "tensor") == 0 || std::strcmp(e, "bf16") == 0) return ScanKernel::Tensor;
  if (std::strcmp(e, "keys") == 0) return ScanKernel::TensorKeys;
  return ScanKernel::Auto;
}
bool bf16_operands_pinned() { return env_is("IVFGPU_SCAN", "bf16"); }
// IVFGPU_PRUNED=staged: the staged pruned pass (for fp32 rows the tf32 ring) where the resident
// one would run, to compare the two at the resident pass's shapes.
bool staged_pass_pinned() { return env_is("IVFGPU_PRUNED", "staged"); }
// IVFGPU_RING_TILES=1 or 2: the tf32 ring's query tiles a unit, whatever its lists hold (A/B, and
// the tests of the two-tile build on small batches).
int ring_tiles_pinned() {
  return env_is("IVFGPU_RING_TILES", "1") ? 1 : env_is("IVFGPU_RING_TILES", "2") ? 2 : 0;
}
// IVFGPU_NATIVE16=0: the centred bf16 operands and f16 seed where f16 or bf16 queries on rows of
// their type would run native (resident_native, seed_native), to compare the two on one batch.
bool native_pinned_off() { return env_is("IVFGPU_NATIVE16", "0"); }
// IVFGPU_WIDE_DEFER=0 or 1: the wide pass re-scores each row tile's pairs after its marks, or
// defers them to its unit's end, whatever wide_defers_rescoring says (A/B runs, the tests of each);
// -1 where unpinned. Read at every scan, as the other wide pins are.
int wide_defer_pinned() {
  return env_is("IVFGPU_WIDE_DEFER", "1") ? 1 : env_is("IVFGPU_WIDE_DEFER", "0") ? 0 : -1;
}

// The length of each query's first `seed` segments (its first probes' lists).
__global__ void seed_lengths_kernel(const int64_t* cand_off, int64_t nq, int64_t nprobe, int64_t seed, int64_t* len) {
  for (int64_t q = global_thread(); q < nq; q += thread_stride())
    len[q] = cand_off[q * (nprobe + 1) + seed] - cand_off[q * (nprobe + 1)];
}

// A pruned pass's starting state from the exact top-k of each query's first probes, a warp per
// query: those rows are its first entries (their exact costs stand in for optimistic ones, and
// the settle takes them as they are: the SIMT scan computed them), and with k of them the k-th
// cost is the bound; with fewer there is none yet (all ones: past every cost). Rows the scan
// excluded (the padding key) are not entries: the keys are sorted, so they end the list.
__global__ void seed_prune_kernel(const int32_t* sel_pos, const float* sel_key, const int32_t* sel_count, int64_t nq,
                                  int64_t k, bool larger, float pad, scan_detail::PruneState pr) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; q < nq; q += warps) {
    const int32_t count = sel_count[q];
    int32_t n = 0;  // entries so far: the keys before the first padding one
    for (int32_t i0 = 0; i0 < count; i0 += 32) {
      const int32_t i = i0 + lane;
      const float key = i < count ? sel_key[q * k + i] : pad;
      const bool entry = key != pad;
      if (entry) {
        pr.pos[q * pr.cap + i] = sel_pos[q * k + i];  // k <= cap
        pr.opt[q * pr.cap + i] = larger ? -key : key;
      }
      const int here = __popc(__ballot_sync(0xffffffffu, entry));
      n += here;
      if (here < 32) break;  // the padding has begun
    }
    __syncwarp();  // the lanes' entries are visible to lane 0
    if (lane == 0) {
      pr.found[q] = n;
      pr.seeded[q] = n;
      pr.bound[q] = n == k ? to_ordered(pr.opt[q * pr.cap + n - 1]) : 0xffffffffu;
    }
  }
}

// Each list's sample for the wide pass's bound (sampled_wide_bound): every every-th row from its
// row sample_phase (the SIMT scan reads them row_step = every slots apart), so size / every rows
// rounded up or down by the phase: a query's sample then holds 1 / every of its rows on average
// even where its lists are short (rounded up, lists of a few rows would be sampled whole, and the
// bound drawn too tight for k).
__global__ void sample_lists_kernel(const int64_t* start, const int64_t* size, int64_t nlist, int64_t every,
                                    int64_t* sample_start, int64_t* sample_size) {
  for (int64_t l = global_thread(); l < nlist; l += thread_stride()) {
    const int64_t phase = scan_detail::sample_phase(l, every);
    sample_start[l] = start[l] + phase;
    sample_size[l] = size[l] > phase ? (size[l] - phase + every - 1) / every : 0;
  }
}

// The wide pass's starting state from its sample, a thread per query: no entries, and the bound
// the rank-th best sampled cost (select_rank_key: none where the sample held fewer, or its rank-th
// row was excluded: the padding key).
__global__ void sampled_bound_kernel(const uint32_t* rank_key, int64_t nq, bool larger, float pad,
                                     scan_detail::PruneState pr) {
  const uint32_t pad_key = cost_key(pad, larger);  // as the select orders keys
  for (int64_t q = global_thread(); q < nq; q += thread_stride()) {
    pr.found[q] = 0;
    pr.seeded[q] = 0;
    pr.bound[q] = rank_key[q] != pad_key ? rank_key[q] : 0xffffffffu;
  }
}

void write_candidate_offsets(cudaStream_t stream, const ScanProblem& p) {
  candidate_offsets_kernel<<<grid_for(p.nq * 32, kThreads), kThreads, 0, stream>>>(p.probes, p.nq, p.nprobe,
                                                                                 p.lists.size, p.cand);
  IVF_CUDA_CHECK_LAUNCH();
}

}  // namespace

ScanGroups group_scan_pairs(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p) {
  write_candidate_offsets(stream, p);
  return group_probe_range(ctx, stream, p.probes, p.nq, p.nprobe, p.lists.nlist, 0, p.nprobe);
}

bool scan_detail::wgmma_usable(const DeviceContext& ctx) {
#ifdef IVFGPU_CUDA_SM90A
  static const bool pinned_off = env_is("IVFGPU_WGMMA", "0");
  return !pinned_off && ctx.limits().major == 9 && ctx.limits().minor == 0;
#else
  (void)ctx;
  return false;
#endif
}

namespace {
// IVFGPU_STAGED_ROWS=64 keeps the staged pass on list_mma_kernel (A/B runs, tests).
bool staged_rows_pinned_64() {
  static const bool pinned = env_is("IVFGPU_STAGED_ROWS", "64");
  return pinned;
}
}  // namespace

bool scan_detail::pair_tile_usable(const DeviceContext& ctx, bool ip, bool vec4, bool centroids, int64_t dim) {
  return !staged_rows_pinned_64() && vec4 && (ip || staged_pass_centred(ip, centroids, dim)) && wgmma_usable(ctx);
}

bool scan_detail::tf32_ring_usable(const DeviceContext& ctx, bool vec4) {
  return !staged_rows_pinned_64() && vec4 && wgmma_usable(ctx);
}

int64_t scan_segment_tiles(int64_t pairs, int64_t rows, int tile_q) {
  const int64_t qt = (pairs + tile_q - 1) / tile_q;
  const int64_t vt = (rows + kTileV - 1) / kTileV;
  return qt * ((vt + kUnitTiles - 1) / kUnitTiles);
}

namespace {

// Four-element loads need whole loads per row and aligned bases (pool allocations are 256-byte
// aligned; segments are placed on 256-byte boundaries).
bool four_element_loads(const ScanProblem& p, const ScanSegment* segments) {
  return p.lists.dim % 4 == 0 && reinterpret_cast<uintptr_t>(p.queries) % 16 == 0 &&
         (segments != nullptr || reinterpret_cast<uintptr_t>(p.lists.vectors) % 16 == 0);
}

template <class T>
scan_detail::TileArgs<T> tile_args(const ScanProblem& p, const ScanGroups& g, const ScanSegment* segments, int64_t nseg,
                                   const int64_t* tile_off) {
  const bool vec4 = four_element_loads(p, segments);
  const int filter = p.filter == ScanProblem::Filter::None ? 0 : p.filter == ScanProblem::Filter::Allow ? 1 : 2;
  const uint64_t* removed = segments != nullptr ? nullptr : p.lists.removed;
  // Strided rows (the wide pass's sample) are the SIMT kernels' only, over resident lists, with a
  // row tile's offsets (kTileV rows pitch apart) within an int as for dim alone.
  if (p.row_step != 1 && (p.row_step < 1 || segments != nullptr ||
                          p.lists.dim * p.row_step > std::numeric_limits<int32_t>::max() / scan_detail::kTileV))
    fail(Errc::Internal, "strided list rows are for the SIMT scan of resident lists, pitch below 2^31 / 64");
  scan_detail::TileArgs<T> a{segments, nseg, p.queries, p.lists.dim, p.lists.nlist, p.nprobe, p.lists.rows<T>(),
                             p.lists.start, p.lists.size, g.grouped.data(), g.pair_begin.data(),
                             g.pair_count.data(), tile_off, p.cand, vec4, removed != nullptr || filter != 0,
                             removed, p.lists.ids, filter, p.filter_set, p.excluded, p.centroids};
  a.row_step = p.row_step;
  return a;
}

bool integer_arithmetic(const ScanProblem& p) { return p.integer_queries && is_integer(p.lists.type); }

// The SIMT scan over lists or segments: element type here; query tile, metric and integer
// arithmetic in launch_scan.
void scan_pass(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& g,
               const ScanSegment* segments, int64_t nseg, const int64_t* tile_off) {
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan_detail::launch_scan<T>(ctx, stream, g.tile_q, p.metric != Metric::L2, integer_arithmetic(p),
                                tile_args<T>(p, g, segments, nseg, tile_off));
  });
}

// The probes the pruned pass's seed scans exactly, at most nprobe (IVFGPU_SEED_PROBES pins it:
// A/B runs, tests). A smaller seed leaves a looser bound, so the pass appends (and, without exact
// entries, re-scores) more rows; a larger one scans more rows exactly. Measured on the bench's
// 1M-row mixtures (H100, 10,000 queries, nlist 1024, bench/RESULTS.md):
// - The wide pass (k past kPruneNarrowMaxK): wide_seed_probes (scan_dispatch.hpp), nprobe / 8 + 3
//   up to k 1,024 (kWideSeedRuleMaxK), nprobe / 5 + 3 past it. Session 61 made the pass
//   ~23% cheaper a probe, which moved the best seed at k 1000 down (H100, QPS): nprobe 16 seeds
//   5 / 6 / 7 1.14-1.15M / 1.11-1.13M / 1.10M; nprobe 32 7 / 9 0.79-0.80M / 0.76-0.77M; nprobe
//   64 10 / 11 / 12 / 15 530-533K / 519K / 512-515K / 489-491K, while 8 fell to 274K there (a
//   cliff: three probes' margin kept); nprobe 128 19 / 28 318-321K / 289-290K. k 2048 had wanted
//   more: 8 at nprobe 16, 16-20 at 64 (4 and 3 slower at 16, 3 1.6x the batch).
// - The narrow pass: narrow_seed_probes (pruned_kernel.hpp). f32 at d 128, one probe against
//   two (QPS): nprobe 16 k 64 3.12-3.14M / 2.67-2.71M but k 100 1.41-1.43M / 2.66-2.69M; nprobe
//   32 k 16 2.21-2.22M / 1.90-1.96M but k 24 1.37-1.40M / 1.96-1.97M; nprobe 64 k 16 1.33M /
//   1.24M but k 24 0.77-0.78M / 1.24-1.25M, k 100 0.45M / 1.22M; nprobe 128 k 10 0.83M / 0.78M
//   but k 16 0.44-0.46M / 0.77-0.79M, k 100 (three probes) 0.26M / 0.73M; nprobe 256 k 10 0.29M
//   / 0.51M. At d 64 one probe fell from k 16 (nprobe 32: 3.02M / 4.13M), at d 96 from k 16 at
//   nprobe 64 (1.10-1.12M; k 10 1.80-1.85M), at d 960 from k 24 as at d 128 (at d 96, nprobe 32,
//   k 24 it still held: 2.87-2.95M / 2.67-2.72M). With exact entries (the int8 pass) it held
//   further: uint8 at nprobe 32 to k 48 (2.73-2.86M / 2.30M), at 64 to 256 to k 16, not at k 24
//   (nprobe 64: 0.97M / 1.96M).
// The plan sizes its scratch with the larger answer of the two entry kinds
// (pruned_scan_words_per_query).
int64_t seed_probes_by_rule(int64_t nprobe, int64_t k, int64_t dim, bool exact) {
  if (k > scan_detail::kPruneNarrowMaxK) return scan_detail::wide_seed_probes(nprobe, k);
  return scan_detail::narrow_seed_probes(nprobe, k, dim, exact);
}
// The rule's answer `ruled`, or the pin, within [1, nprobe].
int64_t seed_probes_or_pin(int64_t nprobe, int64_t ruled) {
  if (const char* e = std::getenv("IVFGPU_SEED_PROBES")) ruled = std::max<long long>(1, std::atoll(e));
  return std::max<int64_t>(1, std::min(nprobe, ruled));
}
int64_t pruned_seed_probes(int64_t nprobe, int64_t k, int64_t dim, bool exact) {
  return seed_probes_or_pin(nprobe, seed_probes_by_rule(nprobe, k, dim, exact));
}

// The one place that picks the resident scan's kernel: a pin (IVFGPU_SCAN), else the measured
// rule of scan_dispatch.hpp.
ScanKernel choose_scan_kernel(int64_t nq, int64_t nprobe, int64_t nlist, int64_t dim, int64_t k) {
  const ScanKernel pinned = scan_kernel_override();
  if (pinned == ScanKernel::Tensor)
    return k <= scan_detail::kPruneMaxK ? ScanKernel::TensorPruned : ScanKernel::TensorKeys;
  if (pinned != ScanKernel::Auto) return pinned;
  switch (scan_detail::auto_scan_kernel(nq, nprobe, nlist, dim, k)) {
    case scan_detail::AutoScan::Pruned:
      return ScanKernel::TensorPruned;
    case scan_detail::AutoScan::Keys:
      return ScanKernel::TensorKeys;
    case scan_detail::AutoScan::Simt:
      break;
  }
  return ScanKernel::Simt;
}

// What the pruned pass's kernel is chosen from, once per scan (pruned_kernel.hpp): int8 tensor
// cores with exact integer costs, or bf16 (tf32 for fp32 rows through the ring) with a margin and
// exact re-scoring, its query tile resident or staged.
scan_detail::PrunedShape pruned_shape(const DeviceContext& ctx, const ScanProblem& p) {
  scan_detail::PrunedShape s;
  s.dim = p.lists.dim;
  s.vec4 = four_element_loads(p, nullptr);
  s.fp32_rows = p.lists.type == ElementType::F32;
  s.tf32_ring = scan_detail::tf32_ring_usable(ctx, s.vec4);
  s.wide = p.k > scan_detail::kPruneNarrowMaxK;
  s.integer = integer_arithmetic(p);
  s.bf16_pinned = bf16_operands_pinned();
  s.staged_pinned = staged_pass_pinned();
  s.ring_tiles_pinned = ring_tiles_pinned();
  s.inner_product = p.metric != Metric::L2;
  s.centroids = p.centroids != nullptr;
  s.f16_rows = p.lists.type == ElementType::F16;
  s.bf16_rows = p.lists.type == ElementType::BF16;
  s.storage_queries = p.storage_queries;
  s.wgmma = scan_detail::wgmma_usable(ctx);
  s.native_pinned_off = native_pinned_off();
  return s;
}

}  // namespace

void scan_segments(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& groups,
                   const ScanSegment* segments, const int64_t* tile_off, int64_t nseg) {
  if (nseg > 0) scan_pass(ctx, stream, p, groups, segments, nseg, tile_off);
}

namespace {

// Rows of a SIMT scan's work unit.
constexpr int64_t kSimtUnitRows = int64_t{kTileV} * kUnitTiles;
// Exclusive prefix (nlist + 1 entries) of the work units per list of groups g: tile_q queries x
// unit_rows rows (the SIMT scan's: g.tile_q x kSimtUnitRows), or with unit_rows 0 the tensor
// pass's units of tile_q queries. order (nlist, optional): the lists in the order their units
// are numbered (entry i of the prefix is then list order[i]'s).
DeviceBuffer<int64_t> unit_offsets(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p,
                                   const ScanGroups& g, int tile_q, int64_t unit_rows,
                                   const int32_t* order = nullptr) {
  const int64_t nlist = p.lists.nlist;
  const UnitsOfList units{g.pair_count.data(), p.lists.size, order, tile_q, unit_rows};
  DeviceBuffer<int64_t> tile_off(ctx, nlist + 1, stream);
  exclusive_scan(ctx, stream, nlist, nlist + 1, units, tile_off.data());  // the total last
  return tile_off;
}

// IVFGPU_UNITS=static: the tensor kernels' blocks take every gridDim-th work unit in list order, as
// before their queue (TensorUnits), to compare the two in one process (read at every scan).
bool static_units_pinned() { return env_is("IVFGPU_UNITS", "static"); }

// A cleared counter that a kernel's blocks claim their work from past the first wave
// (next_block_unit): the tensor kernels' units, the wide settle's queries. One launch consumes it.
DeviceBuffer<unsigned long long> claim_counter(const DeviceContext& ctx, cudaStream_t stream) {
  DeviceBuffer<unsigned long long> next(ctx, 1, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(next.data(), 0, next.bytes(), stream));
  return next;
}

// A tensor kernel's work units over the pairs of groups g (unit_offsets'), numbered largest list
// first (the store's by_size) with a cleared counter the blocks claim them from
// (next_block_unit); under IVFGPU_UNITS=static, or where the store has no order, in list order
// with no counter. One launch consumes a counter.
struct TensorUnits {
  DeviceBuffer<int64_t> tile_off;
  DeviceBuffer<unsigned long long> next;  // empty: no queue
  const int32_t* order = nullptr;
  // tile_args for a tensor kernel over groups g, with these units.
  template <class T>
  scan_detail::TileArgs<T> args(const ScanProblem& p, const ScanGroups& g) const {
    scan_detail::TileArgs<T> a = tile_args<T>(p, g, nullptr, 0, tile_off.data());
    a.unit_list = order;
    a.next_unit = next.data();
    return a;
  }
};
TensorUnits tensor_units(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& g,
                         int tile_q, int64_t unit_rows) {
  TensorUnits u;
  if (!static_units_pinned() && p.lists.by_size != nullptr) {
    u.order = p.lists.by_size;
    u.next = claim_counter(ctx, stream);
  }
  u.tile_off = unit_offsets(ctx, stream, p, g, tile_q, unit_rows, u.order);
  return u;
}

// The k best keys of each of nq candidate rows (stride apart, lens[q] long; larger better for
// inner products) by select_topk: their positions, keys (k a row) and counts. The SIMT seed's
// (the wide pass's sample needs only each row's rank-th key: select_rank_key).
struct RowBest {
  DeviceBuffer<int32_t> pos, count;
  DeviceBuffer<float> key;
};
RowBest select_row_best(const DeviceContext& ctx, cudaStream_t stream, const float* keys, int64_t stride,
                        const int64_t* lens, int64_t nq, int64_t k, bool larger) {
  const auto n = static_cast<std::size_t>(std::max<int64_t>(1, nq));
  const std::size_t entries = n * static_cast<std::size_t>(k);
  RowBest best{DeviceBuffer<int32_t>(ctx, entries, stream), DeviceBuffer<int32_t>(ctx, n, stream),
               DeviceBuffer<float>(ctx, entries, stream)};
  SelectInput in;
  in.keys = keys;
  in.stride = stride;
  in.lens = lens;
  in.max_len = stride;
  select_topk(ctx, stream, in, nq, k, larger, SelectOutput{best.pos.data(), best.key.data(), best.count.data()});
  return best;
}

// The SIMT seed: the query's first `seed` probes scanned exactly by the SIMT kernel into a
// buffer of their own, and their top-k (seed_prune_kernel makes them the first entries).
void simt_seed(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, int64_t seed,
               const scan_detail::PruneState& prune) {
  const int64_t nq = p.nq, k = p.k;
  const auto n = static_cast<std::size_t>(std::max<int64_t>(1, nq));
  const int64_t largest = std::max<int64_t>(1, p.lists.largest_prefix[seed]);
  DeviceBuffer<float> first_dist(ctx, n * static_cast<std::size_t>(largest), stream);
  ScanProblem first_probe = p;
  first_probe.cand.dist = first_dist.data();
  first_probe.cand.stride = largest;  // the first segments start at offset 0 and end by largest
  const ScanGroups first = group_probe_range(ctx, stream, p.probes, p.nq, p.nprobe, p.lists.nlist, 0, seed);
  const DeviceBuffer<int64_t> tile_off = unit_offsets(ctx, stream, p, first, first.tile_q, kSimtUnitRows);
  scan_pass(ctx, stream, first_probe, first, nullptr, 0, tile_off.data());

  DeviceBuffer<int64_t> first_len(ctx, n, stream);
  seed_lengths_kernel<<<grid_for(nq), kThreads, 0, stream>>>(p.cand.offsets, nq, p.nprobe, seed, first_len.data());
  IVF_CUDA_CHECK_LAUNCH();
  const bool larger = p.metric != Metric::L2;
  const RowBest best = select_row_best(ctx, stream, first_dist.data(), largest, first_len.data(), nq, k, larger);
  seed_prune_kernel<<<grid_for(nq * 32), kThreads, 0, stream>>>(best.pos.data(), best.key.data(), best.count.data(),
                                                                nq, k, larger, p.excluded, prune);
  IVF_CUDA_CHECK_LAUNCH();
}

// The wide pass's sample: every n-th row of a list (sampled_wide_bound), n from IVFGPU_WIDE_SAMPLE
// where set (A/B runs: 0 keeps the SIMT seed), at most 4,096 so that a strided row tile's offsets
// stay within an int (tile_args).
int64_t sample_every() {
  const char* e = std::getenv("IVFGPU_WIDE_SAMPLE");
  return e != nullptr ? std::clamp<long long>(std::atoll(e), 0, 4096) : scan_detail::kWideSampleEvery;
}

// The sampled bound's margin in standard deviations (sample_rank), from IVFGPU_WIDE_SIGMAS where
// set (A/B runs, 0 to 8), read at every scan as IVFGPU_WIDE_SAMPLE is.
double sample_sigmas() {
  const char* e = std::getenv("IVFGPU_WIDE_SIGMAS");
  return e != nullptr ? std::clamp(std::atof(e), 0.0, 8.0) : scan_detail::kWideSampleSigmas;
}

// The wide pass's bound from a sample (docs/tensor-scan.md, "The wide pass's sampled bound").
// The SIMT seed scanned a query's first probes exactly and took their k-th cost: a proven bound,
// but ~40% of the batch at k 1000 (its scan and select), and a loose one, as the other probes hold
// rows that beat it. Here the SIMT kernel scans only every every-th row of each probed list (a
// stride, from a phase of the list's own, so that the sample spans the list's whole insertion
// history: rows added in an order that drifts, a stream of topics or of time, leave a list's
// first rows unlike its later ones, and session 69's first sample, a list's first 1 / every,
// took only those), and the rank-th best of those exact costs is the bound, rank chosen so that
// the rows of all the probes under it number k or more all but rarely (sample_rank). The pass then covers
// every probe with no entries to start from, appending each row whose optimistic cost reaches
// the bound with its exact cost; a query that finds fewer than k of them within the bound
// (its sample misled, or it has fewer than k rows) is scanned in full by the settle
// (PruneState::estimated), so the bound is never trusted: an estimate costs speed, not results.
// groups: the pairs of every probe, grouped by list.
void sampled_wide_bound(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& groups,
                        int64_t every, const scan_detail::PruneState& prune) {
  const int64_t nq = p.nq, nprobe = p.nprobe, nlist = p.lists.nlist;
  const auto n = static_cast<std::size_t>(std::max<int64_t>(1, nq));
  const auto lists = static_cast<std::size_t>(std::max<int64_t>(1, nlist));
  DeviceBuffer<int64_t> starts(ctx, lists, stream), sizes(ctx, lists, stream);
  sample_lists_kernel<<<grid_for(nlist), kThreads, 0, stream>>>(p.lists.start, p.lists.size, nlist, every,
                                                                starts.data(), sizes.data());
  IVF_CUDA_CHECK_LAUNCH();
  ScanProblem sample = p;
  sample.lists.start = starts.data();
  sample.lists.size = sizes.data();
  sample.row_step = every;
  const int64_t stride = std::max<int64_t>(1, scan_detail::sampled_row_length(p.lists.largest_prefix[nprobe], nprobe,
                                                                              every));
  DeviceBuffer<float> dist(ctx, n * static_cast<std::size_t>(stride), stream);
  DeviceBuffer<int64_t> offsets(ctx, n * static_cast<std::size_t>(nprobe + 1), stream), lengths(ctx, n, stream);
  sample.cand = CandidateRows{dist.data(), stride, offsets.data(), lengths.data(), nprobe};
  write_candidate_offsets(stream, sample);
  const DeviceBuffer<int64_t> tile_off = unit_offsets(ctx, stream, sample, groups, groups.tile_q, kSimtUnitRows);
  scan_pass(ctx, stream, sample, groups, nullptr, 0, tile_off.data());
  const int64_t rank = scan_detail::sample_rank(p.k, every, sample_sigmas());
  const bool larger = p.metric != Metric::L2;
  DeviceBuffer<uint32_t> rank_key(ctx, n, stream);
  select_rank_key(ctx, stream, dist.data(), stride, lengths.data(), nq, rank, larger, rank_key.data());
  sampled_bound_kernel<<<grid_for(nq), kThreads, 0, stream>>>(rank_key.data(), nq, larger, p.excluded, prune);
  IVF_CUDA_CHECK_LAUNCH();
}

// IVFGPU_SEED=simt pins the SIMT seed where the int8 or the f16 seed would run (A/B runs; read
// at every scan, as IVFGPU_SCAN is).
bool simt_seed_pinned() { return env_is("IVFGPU_SEED", "simt"); }
// IVFGPU_SEED_RESCORE=once: the f16 seed re-scores every kept row that can count in one run, as
// before its best-first order (launch_f16_seed; A/B runs).
bool one_run_rescore_pinned() { return env_is("IVFGPU_SEED_RESCORE", "once"); }

// Integer queries on integer rows take the int8 seed for k <= kSeedMaxK (int8_seed, below):
// uint8 queries on 1M x 128 uint8 rows, k 10, nprobe 16 / 64, 5.00-5.11M / 2.14M QPS with the
// int8 pass seeding itself (session 42) to 6.08-6.17M / 2.29M (H100, bench/RESULTS.md).
bool integer_seeded(scan_detail::PrunedKernel form, int64_t k) {
  return form == scan_detail::PrunedKernel::Integer && k <= scan_detail::kSeedMaxK && !simt_seed_pinned();
}
// Every other pruned pass for k <= kF16SeedMaxK takes the f16 seed (f16_seed, below) where its
// rows load four elements at a time, its shared memory holds the query tile (kF16SeedMaxDim), L2
// has the list centroids to centre on, and the settle's arithmetic is fp32 (integer queries on
// integer rows, off the int8 pass's shapes, keep the SIMT seed: its integer sums). f32 1M x 128,
// k 10, nprobe 16 / 64: 3.42-3.55M / 1.34-1.36M QPS with the SIMT seed, 3.73-3.83M / 1.385-1.41M
// with this one (H100, bench/RESULTS.md).
bool f16_seeded(const scan_detail::PrunedShape& s, scan_detail::PrunedKernel form, int64_t k) {
  return form != scan_detail::PrunedKernel::Integer && k <= scan_detail::kF16SeedMaxK && !s.integer && s.vec4 &&
         s.dim <= scan_detail::kF16SeedMaxDim && (s.inner_product || s.centroids) && !simt_seed_pinned();
}
// f(tag) for uint8 / int8 rows, the only ones the int8 kernels are built for; `what` names the
// kernel in the internal error any other type would be (pruned_kernel_for chooses them only for
// integer rows, and the settle trusts their exact costs, so no other kernel may stand in).
template <class F>
void with_integer_rows(const ScanProblem& p, const char* what, F&& f) {
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
      f(tag);
      return;
    }
    fail(Errc::Internal, std::string(what) + " was chosen for rows that are not integers");
  });
}
// The integer queries of an int8 seed and pass, packed once a search as the rows' bytes with
// their squared norms (launch_pack_integer_queries): every unit of both kernels used to convert
// its queries' floats itself, which ncu (session 49, uint8 1M x 128, nprobe 16) found to be 16%
// of the int8 pass's stall samples, waiting on those loads.
struct IntegerQueries {
  DeviceBuffer<uint8_t> bytes;
  DeviceBuffer<int32_t> sq;
  template <class T>
  void into(scan_detail::TileArgs<T>& args) const {
    args.query_bytes = bytes.data();
    args.query_sq = sq.data();
  }
};
IntegerQueries pack_integer_queries(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p) {
  if (p.lists.dim % 16 != 0) fail(Errc::Internal, "integer queries are packed in 16-byte chunks");
  IntegerQueries q;
  const auto n = static_cast<std::size_t>(std::max<int64_t>(1, p.nq));
  q.bytes = DeviceBuffer<uint8_t>(ctx, n * static_cast<std::size_t>(p.lists.dim), stream);
  q.sq = DeviceBuffer<int32_t>(ctx, n, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(q.sq.data(), 0, q.sq.bytes(), stream));
  with_integer_rows(p, "the integer query packing", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan_detail::launch_pack_integer_queries<T>(stream, p.queries, p.nq, p.lists.dim, q.bytes.data(), q.sq.data());
  });
  return q;
}

// The int8 pass over the pairs of groups g: units of unit_queries queries.
void launch_integer_pass(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& g,
                         const TensorUnits& units, int unit_queries, const scan_detail::PruneState& prune,
                         const IntegerQueries& packed) {
  with_integer_rows(p, "the int8 pass", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan_detail::TileArgs<T> args = units.args<T>(p, g);
    args.unit_queries = unit_queries;
    packed.into(args);
    scan_detail::launch_integer_scan<T>(ctx, stream, p.metric != Metric::L2, args, prune);
  });
}

// A tensor seed's values a query (SeedValues::stride) for `seed` first probes: at most one unit
// per kSeedUnitRows of a query's first probes' rows, plus one per list, kSeedUnitValues each.
int64_t tensor_seed_stride(const int64_t* largest_prefix, int64_t seed) {
  const int64_t largest = std::max<int64_t>(1, largest_prefix[seed]);
  return ((largest + scan_detail::kSeedUnitRows - 1) / scan_detail::kSeedUnitRows + seed) *
         scan_detail::kSeedUnitValues;
}
// Its scratch a query in 4-byte words: a cost and a position a value, and five words of state
// (count, dropped, its place in the flagged list, and the f16 seed's two norms).
int64_t tensor_seed_words(const int64_t* largest_prefix, int64_t seed) {
  return 2 * tensor_seed_stride(largest_prefix, seed) + 5;
}

// A seed on tensor cores (scan_seed.cuh, scan_seed_f16.cuh): 16-query tiles of the seed's probes,
// each lane keeping its best few costs; a warp per query takes its k best of them, and the queries
// it could not settle have their seed probes scanned exactly, in chunks spread over the device.
// launch(values, first, units) runs the kernels on the first probes' pairs (first: grouped by
// list; units: their TensorUnits); norms: the values carry the query's and the rows' largest
// norms (the f16 seed's).
template <class Launch>
void tensor_seed(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, int64_t seed, bool norms,
                 Launch&& launch) {
  const auto n = static_cast<std::size_t>(std::max<int64_t>(1, p.nq));
  scan_detail::SeedValues sv;
  sv.stride = tensor_seed_stride(p.lists.largest_prefix, seed);
  const auto entries = n * static_cast<std::size_t>(sv.stride);
  DeviceBuffer<float> cost(ctx, entries, stream);
  // count and the flagged list's counter in one buffer: one clearing.
  DeviceBuffer<int32_t> pos(ctx, entries, stream), count(ctx, n + 1, stream), flagged(ctx, n, stream);
  DeviceBuffer<uint32_t> dropped(ctx, n, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(count.data(), 0, count.bytes(), stream));
  IVF_CUDA_CHECK(cudaMemsetAsync(dropped.data(), 0xff, dropped.bytes(), stream));
  sv.cost = cost.data();
  sv.pos = pos.data();
  sv.count = count.data();
  sv.dropped = dropped.data();
  sv.flagged = flagged.data();
  sv.nflagged = count.data() + n;
  DeviceBuffer<float> qsq, xmax;  // the f16 seed's margins only
  if (norms) {
    qsq = DeviceBuffer<float>(ctx, n, stream);
    xmax = DeviceBuffer<float>(ctx, n, stream);
    IVF_CUDA_CHECK(cudaMemsetAsync(qsq.data(), 0, qsq.bytes(), stream));
    IVF_CUDA_CHECK(cudaMemsetAsync(xmax.data(), 0, xmax.bytes(), stream));
    sv.qsq = qsq.data();
    sv.xmax = xmax.data();
  }
  const ScanGroups first = group_probe_range(ctx, stream, p.probes, p.nq, p.nprobe, p.lists.nlist, 0, seed);
  const TensorUnits units = tensor_units(ctx, stream, p, first, scan_detail::kSeedQueries, scan_detail::kSeedUnitRows);
  launch(sv, first, units);
}

// The int8 seed: exact integer costs on int8 tensor cores (integer_seeded).
void int8_seed(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, int64_t seed,
               const scan_detail::PruneState& prune, const IntegerQueries& packed) {
  tensor_seed(ctx, stream, p, seed, false,
              [&](const scan_detail::SeedValues& sv, const ScanGroups& first, const TensorUnits& units) {
    with_integer_rows(p, "the int8 seed", [&](auto tag) {
      using T = typename decltype(tag)::type;
      scan_detail::TileArgs<T> args = units.args<T>(p, first);
      packed.into(args);
      scan_detail::launch_int8_seed<T>(ctx, stream, p.metric != Metric::L2, args, p.nq, p.probes, seed, sv, prune);
    });
  });
}

// The f16 seed: costs on f16 tensor cores with a margin, the few that can still count re-scored
// exactly (f16_seeded); native: seed_native (f16 rows and queries, uncentred, exact products).
void f16_seed(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, int64_t seed,
              const scan_detail::PruneState& prune, bool native) {
  tensor_seed(ctx, stream, p, seed, true,
              [&](const scan_detail::SeedValues& sv, const ScanGroups& first, const TensorUnits& units) {
    dispatch_element_type(p.lists.type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      scan_detail::TileArgs<T> args = units.args<T>(p, first);
      scan_detail::launch_f16_seed<T>(ctx, stream, p.metric != Metric::L2, args, p.nq, p.probes, seed, sv, prune,
                                      !one_run_rescore_pinned(), native);
    });
  });
}

// The pruned tensor pass. Its bounds start from each query's first probes (the nearest lists,
// where most of its k best usually are; pruned_seed_probes), scanned first: by the SIMT kernel
// into a buffer of their own, whose k best become the query's first entries and their k-th cost
// its first bound (simt_seed); or, for integer queries on integer rows and k <= 32, by 16-query
// int8 tiles whose lanes keep their best few exact costs (int8_seed); or, for most other passes
// at k <= 16, by 16-query f16 tiles whose few rows that can count are re-scored (f16_seed). The
// tensor pass over the other probes then appends only rows that can still beat a bound that is
// already tight; a bound that starts empty and falls only as fast as single 64-row tiles hold k
// better rows let ~2,700 rows per query through at k 10 on the 1M x 128 mixture
// (bench/RESULTS.md). Nothing is written to the candidate rows (p.cand.dist may be null); their
// offsets give the positions that order ties.
void pruned_scan(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, ScanOutcome& out) {
  const int64_t nq = p.nq, k = p.k;
  const auto n = static_cast<std::size_t>(std::max<int64_t>(1, nq));
  const scan_detail::PrunedShape shape = pruned_shape(ctx, p);
  const scan_detail::PrunedKernel form = scan_detail::pruned_kernel_for(shape);
  out.pruned = true;
  // Exact entries (the int8 pass; the wide resident bf16 pass scores what it would append while
  // the rows are in cache, rescore_listed_pairs): the settle reads no row again.
  out.exact = scan_detail::pruned_entries_exact(form, shape, k > scan_detail::kPruneNarrowMaxK);
  out.cap = scan_detail::prune_cap(k);
  out.bound = DeviceBuffer<uint32_t>(ctx, n, stream);
  out.found = DeviceBuffer<int32_t>(ctx, n, stream);
  out.seeded = DeviceBuffer<int32_t>(ctx, n, stream);
  out.pos = DeviceBuffer<int32_t>(ctx, n * static_cast<std::size_t>(out.cap), stream);
  out.opt = DeviceBuffer<float>(ctx, n * static_cast<std::size_t>(out.cap), stream);
  // The wide pass with exact entries starts from a sampled bound (sampled_wide_bound), which the
  // settle checks by the entries' exact costs; the others from a seed of their first probes.
  const int64_t every = shape.wide && out.exact ? sample_every() : 0;
  out.estimated = every > 0;
  scan_detail::PruneState prune = out.prune_state(p);
  prune.row_margins = !env_is("IVFGPU_WIDE_MARGIN", "tile");
  const int defer_pin = wide_defer_pinned();
  prune.defer_rescore = defer_pin >= 0 ? defer_pin == 1
                                       : scan_detail::wide_defers_rescoring(k, p.nprobe, p.lists.nlist, p.lists.ntotal);
  const bool larger = p.metric != Metric::L2;
  const int64_t seed = every > 0 ? 0 : pruned_seed_probes(p.nprobe, k, p.lists.dim, out.exact);
  const IntegerQueries packed =
      form == scan_detail::PrunedKernel::Integer ? pack_integer_queries(ctx, stream, p) : IntegerQueries{};
  const ScanGroups rest = group_probe_range(ctx, stream, p.probes, p.nq, p.nprobe, p.lists.nlist, seed, p.nprobe);
  if (every > 0) {
    sampled_wide_bound(ctx, stream, p, rest, every, prune);
  } else if (integer_seeded(form, k)) {
    int8_seed(ctx, stream, p, seed, prune, packed);
  } else if (f16_seeded(shape, form, k)) {
    f16_seed(ctx, stream, p, seed, prune, scan_detail::seed_native(shape));
  } else {
    simt_seed(ctx, stream, p, seed, prune);
  }
  if (p.nprobe <= seed) return;
  // The resident and int8 passes group their query tiles where a row tile's slices all stay staged,
  // the tf32 ring where its lists hold enough of the pass's queries.
  const int64_t mean_list_queries = p.nq * (p.nprobe - seed) / std::max<int64_t>(1, p.lists.nlist);
  const int unit_queries =
      scan_detail::kMmaTile * scan_detail::pruned_unit_query_tiles(form, shape, out.exact, mean_list_queries);
  const TensorUnits units = tensor_units(ctx, stream, p, rest, unit_queries, 0);
  if (form == scan_detail::PrunedKernel::Integer) {
    launch_integer_pass(ctx, stream, p, rest, units, unit_queries, prune, packed);
    return;
  }
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan_detail::TileArgs<T> args = units.args<T>(p, rest);
    args.unit_queries = unit_queries;
    if (form == scan_detail::PrunedKernel::Bf16Resident) {
      scan_detail::launch_resident_scan<T>(ctx, stream, larger, args, prune, scan_detail::resident_native(shape));
      return;
    }
    // No list norms: only the keys pass's refinement reads them, and the pruned pass writes none.
    scan_detail::launch_tensor_scan<T>(ctx, stream, larger, args, nullptr, &prune);
  });
}

}  // namespace

bool scan_is_pruned(int64_t nq, int64_t nprobe, int64_t nlist, int64_t dim, int64_t k) {
  return choose_scan_kernel(nq, nprobe, nlist, dim, k) == ScanKernel::TensorPruned;
}

int64_t pruned_scan_words_per_query(const int64_t* largest_prefix, int64_t nprobe, int64_t k, int64_t dim) {
  // The plan does not know whether the entries will be exact: the larger seed of the two.
  const int64_t seed = seed_probes_or_pin(
      nprobe, std::max(seed_probes_by_rule(nprobe, k, dim, true), seed_probes_by_rule(nprobe, k, dim, false)));
  // Nor which seed runs: the SIMT seed's candidate rows, or a tensor seed's values (more where
  // the lists are short), whichever is larger.
  const int64_t seed_words =
      std::max(std::max<int64_t>(1, largest_prefix[seed]), tensor_seed_words(largest_prefix, seed));
  // Or the wide pass's sample (sampled_wide_bound): its candidate rows and offsets, its rank-th
  // keys and the lengths of rows too long for a warp, at the finest sample A/B runs pin.
  const int64_t pinned = sample_every();
  const int64_t every = pinned > 0 ? std::min(pinned, scan_detail::kWideSampleEvery) : scan_detail::kWideSampleEvery;
  const int64_t sample_stride =
      std::max<int64_t>(1, scan_detail::sampled_row_length(largest_prefix[nprobe], nprobe, every));
  const int64_t sample_words =
      k <= scan_detail::kPruneNarrowMaxK
          ? 0
          : sample_stride + 2 * (nprobe + 2) + 1 + select_rank_key_words(sample_stride);
  // Integer queries on integer rows also pack their bytes and squared norm (IntegerQueries).
  const int64_t packed_words = (dim + 3) / 4 + 1;
  return std::max(seed_words, sample_words) + 2 * scan_detail::prune_cap(k) + 2 * k + 4 + packed_words;
}

scan_detail::PruneState ScanOutcome::prune_state(const ScanProblem& p) const {
  return scan_detail::PruneState{bound.data(), found.data(), pos.data(), opt.data(), cap, p.cand.stride,
                                 static_cast<int>(p.k), seeded.data(), exact, estimated};
}

ScanOutcome scan_lists(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p) {
  if (p.row_step != 1) fail(Errc::Internal, "strided list rows are scan_pass's alone (the wide pass's sample)");
  // Without candidate rows only the pruned pass can run (the caller asked scan_is_pruned).
  const ScanKernel kernel = p.cand.dist == nullptr
                                ? ScanKernel::TensorPruned
                                : choose_scan_kernel(p.nq, p.nprobe, p.lists.nlist, p.lists.dim, p.k);
  ScanOutcome out;
  if (kernel == ScanKernel::TensorPruned) {
    write_candidate_offsets(stream, p);
    pruned_scan(ctx, stream, p, out);
    return out;
  }
  const ScanGroups g = group_scan_pairs(ctx, stream, p);
  const bool tensor = kernel != ScanKernel::Simt;
  const DeviceBuffer<int64_t> tile_off =
      unit_offsets(ctx, stream, p, g, tensor ? scan_detail::kMmaTile : g.tile_q, tensor ? 0 : kSimtUnitRows);
  if (!tensor) {
    scan_pass(ctx, stream, p, g, nullptr, 0, tile_off.data());
    return out;
  }
  out.needs_refine = true;
  out.list_norm = DeviceBuffer<float>(ctx, static_cast<std::size_t>(p.lists.nlist), stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(out.list_norm.data(), 0, out.list_norm.bytes(), stream));
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan_detail::launch_tensor_scan<T>(ctx, stream, p.metric != Metric::L2,
                                       tile_args<T>(p, g, nullptr, 0, tile_off.data()), out.list_norm.data(), nullptr);
  });
  return out;
}

void settle_pruned(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanOutcome& outcome,
                   const int64_t* const* list_ids, int64_t* out_ids, float* out_dists) {
  const int filter = p.filter == ScanProblem::Filter::None ? 0 : p.filter == ScanProblem::Filter::Allow ? 1 : 2;
  // The wide settle's query queue (SettleArgs::next_unit), unless IVFGPU_SETTLE_QUERIES=static pins
  // every gridDim-th query (for A/B runs; read at every settle).
  DeviceBuffer<unsigned long long> next_query;
  if (p.k > scan_detail::kSettleNarrowMaxK && !env_is("IVFGPU_SETTLE_QUERIES", "static"))
    next_query = claim_counter(ctx, stream);
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The last members: the settle's sort in registers unless IVFGPU_SETTLE_SORT=shared pins the
    // old one, and the query queue.
    const scan_detail::SettleArgs<T> args{p.queries,
                                          p.nq,
                                          p.lists.dim,
                                          p.nprobe,
                                          p.k,
                                          p.probes,
                                          p.lists.rows<T>(),
                                          p.lists.start,
                                          p.cand,
                                          outcome.prune_state(p),
                                          p.lists.ids,
                                          list_ids,
                                          p.excluded,
                                          out_ids,
                                          out_dists,
                                          p.lists.size,
                                          p.lists.removed,
                                          filter,
                                          p.filter_set,
                                          !env_is("IVFGPU_SETTLE_SORT", "shared"),
                                          next_query.data()};
    scan_detail::launch_settle<T>(ctx, stream, p.metric != Metric::L2, integer_arithmetic(p), args);
  });
}

void refine_candidates(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanOutcome& outcome,
                       const float* sel_key, const int32_t* sel_count, int64_t k) {
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const scan_detail::RefineArgs<T> args{p.queries, p.nq, p.lists.dim, p.nprobe, k, p.probes, p.lists.rows<T>(),
                                          p.lists.start, p.lists.size, outcome.list_norm.data(), p.cand, sel_key,
                                          sel_count, p.excluded};
    scan_detail::launch_refine<T>(ctx, stream, p.metric != Metric::L2, integer_arithmetic(p), args);
  });
}

}  // namespace ivfgpu::cuda
