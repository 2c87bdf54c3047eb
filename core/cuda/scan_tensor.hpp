// The tensor-core list scan and its exact refinement (scan_tensor.cuh says how both work and
// why the results equal the SIMT scan's). scan.cu decides when to use them, in one place.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "candidates.cuh"
#include "device_context.hpp"
#include "pruned_kernel.hpp"
#include "scan_tiles.hpp"

namespace ivfgpu::cuda::scan_detail {

// A bound on |key - exact| for a row of norm xn and a query of norm qn in `dim` dimensions,
// where key is the tensor-core pass's distance (l2) or dot product and exact the SIMT scan's
// fp32 value: both operands as the tensor cores read them (TF32: the top 19 bits, a truncation
// below 2^-10 of each operand relatively; bf16: 8 significant bits, rounded to nearest, at most 2^-8), products and
// sums in fp32 (dim + 4 roundings), the L2 assembly |q|^2 + |x|^2 - 2 q.x, and the exact scan's
// own rounding of a sum bounded by (qn + xn)^2. Doubled for safety: a larger margin only
// re-scores more rows. As a * qn * xn + b * (qn + xn)^2, and where the tensor cores may flush
// small f16 or bf16 operands (margin_terms_f16, margin_terms_exact_operands) s * (qn + xn) + c:
struct MarginTerms {
  float a = 0.0f, b = 0.0f, s = 0.0f, c = 0.0f;
};
//
// centered (L2 only): both vectors are first moved by the same centroid c, in fp32, and the
// norms are those of q - c and x - c. Each coordinate difference then carries one more
// rounding, u (|q_j - c_j| + |x_j - c_j|), which moves the squared distance by at most about
// 2u (|q - c| + |x - c|)^2: 3u more in b.
// bf16 (the pruned pass, scan_mma.cuh): the operands are rounded to bf16 instead of cut to TF32.
// The same for any operand error `operand` (relative, per operand): margin_terms_f16 below.
__host__ __device__ inline MarginTerms margin_terms_of(bool l2, int64_t dim, bool centered, float operand) {
  const float u = 5.9604645e-08f;  // 2^-24
  const float rounding = static_cast<float>(dim + 4) * u;
  const float dot = 2.0f * operand + rounding;
  if (!l2) return MarginTerms{2.0f * (dot + rounding), 0.0f};
  return MarginTerms{4.0f * dot, 6.0f * rounding + (centered ? 3.0f * u : 0.0f)};
}
__host__ __device__ inline MarginTerms margin_terms(bool l2, int64_t dim, bool centered = false, bool bf16 = false) {
  return margin_terms_of(l2, dim, centered, bf16 ? 3.90625e-03f : 9.765625e-04f);  // 2^-8 : 2^-10
}
__host__ __device__ inline float candidate_margin(const MarginTerms& m, float qn, float xn) {
  const float p = qn + xn;
  return m.a * qn * xn + m.b * p * p + m.s * p + m.c;
}

// f16 operands (the f16 seed, scan_seed_f16.cuh). A value of magnitude at least 2^-14 rounds to
// nearest with 11 significant bits: e = 2^-11 relatively (a, b as above). Below 2^-14 an f16 is
// subnormal, which the tensor cores may flush: off by less than h = 2^-14 absolutely. Then
// |q_j x_j - q~_j x~_j| <= (2e + e^2) |q_j x_j| + h (1 + e) (|q_j| + |x_j|) + h^2, and by
// Cauchy-Schwarz (sum |v_j| <= sqrt(n) |v|) the dot product gains h sqrt(n) (1 + e) (|q| + |x|)
// + n h^2, doubled as the rest (L2 twice again: -2 q.x): s (|q| + |x|) + c. A value beyond the
// f16 range becomes infinite and so does every cost it enters: the seed takes a non-finite cost
// as a row it could not judge (it flags the query).
// The smallest normal magnitudes: below them the tensor cores may flush an operand to zero.
constexpr float kF16FlushBelow = 6.1035156e-05f;   // 2^-14
constexpr float kBf16FlushBelow = 1.1754944e-38f;  // 2^-126
// The s and c terms for operands flushed below h, each otherwise off by e relatively (the factor
// 1 + e on s; the caller passes it).
__host__ __device__ inline MarginTerms with_flush_terms(MarginTerms m, bool l2, int64_t dim, float h,
                                                       float one_plus_e) {
  const float times = l2 ? 4.0f : 2.0f;
  m.s = times * h * sqrtf(static_cast<float>(dim)) * one_plus_e;
  m.c = times * static_cast<float>(dim) * h * h;
  return m;
}
__host__ __device__ inline MarginTerms margin_terms_f16(bool l2, int64_t dim, bool centered) {
  const float e = 4.8828125e-04f;  // 2^-11
  return with_flush_terms(margin_terms_of(l2, dim, centered, e), l2, dim, kF16FlushBelow, 1.0005f);
}
// Operands the tensor cores read as they are: f16 or bf16 queries on rows of the same type,
// uncentred (the native pass, scan_resident.cuh; the native f16 seed). The products are exact in
// fp32, so only the sums and the L2 assembly are off (e = 0 above), unless the tensor cores flush a
// subnormal operand (f16: below kF16FlushBelow; bf16: kBf16FlushBelow): margin_terms_f16's s and c
// with e = 0. f16 products and their sums stay finite in fp32; bf16 operands span fp32's range, as
// the bf16 pass's rounded ones always have.
__host__ __device__ inline MarginTerms margin_terms_exact_operands(bool l2, int64_t dim, bool f16) {
  return with_flush_terms(margin_terms_of(l2, dim, false, 0.0f), l2, dim, f16 ? kF16FlushBelow : kBf16FlushBelow,
                          1.0f);
}

// The tensor-core pass's tiles: kMmaTile queries x kMmaTile rows; a work unit is one query
// tile (two or four where the resident and int8 passes group them: pruned_unit_query_tiles)
// x kMmaUnitTiles row tiles, so that its set-up (finding its list, its
// queries' places) is paid once for all of them and each tile's first slice loads during the
// previous epilogue.
// Eight rather than four (H200, session 38): the resident passes stage their query tile once a
// unit (ncu: ~100 instructions per warp and row tile went to the unit's set-up with four);
// 1M x 128 +5-9% at nprobe 16, +10% at 64, uint8 queries +7% / +15%; d 960 (list_mma_kernel,
// no resident tile) -3% at nprobe 64.
constexpr int kMmaTile = 64;
constexpr int kMmaUnitTiles = 8;
// The pruned L2 pass centres on the list's centroid up to this many dimensions (shared memory).
constexpr int kMmaMaxCentredDim = 1024;
// Whether a staged pruned pass centres its operands (list_mma_kernel's own test, which the
// launchers' margins and their choice of list_pair_tile_kernel must agree with).
inline bool staged_pass_centred(bool ip, bool centroids, int64_t dim) {
  return !ip && centroids && dim <= kMmaMaxCentredDim;
}

// Work units of the tensor-core pass for a list probed by `pairs` queries and holding `rows` rows,
// `unit_queries` queries a unit (kMmaTile, or two or four tiles' worth where a pass groups them).
__host__ __device__ inline int64_t tensor_tiles(int64_t pairs, int64_t rows, int64_t unit_queries) {
  return ((pairs + unit_queries - 1) / unit_queries) *
         ((((rows + kMmaTile - 1) / kMmaTile) + kMmaUnitTiles - 1) / kMmaUnitTiles);
}

template <class T>
struct RefineArgs {
  const float* queries;  // nq * dim (device, f32)
  int64_t nq, dim, nprobe, k;
  const int32_t* probes;
  const T* vectors;
  const int64_t* list_start;
  const int64_t* list_size;
  const float* list_norm;  // nlist: largest row norm of each probed list (the first pass's)
  CandidateRows cand;
  const float* sel_key;     // nq * k: the top-k of the pessimistic keys
  const int32_t* sel_count;  // nq
  float excluded;
};

// Entries of a narrow pass per query. On the 1M x 128 mixture (k 10, bench/RESULTS.md) ~11
// rows per query are appended on average, 13-19 at the 99th percentile and up to ~2,400 at the
// most; past the cap (ties within the margin everywhere) the settling scans the query in full,
// which costs ~100x its entries' work. settle_wide_kernel holds a query's entries in shared
// memory: the cap is its size.
constexpr int64_t kPruneCap = 4096;
// A query's entries for k: kPruneCap to k 128; past it the seed's k and kPruneCap more, to a
// power of two (settle_wide_kernel sorts in it, and needs 2k): 8,192 past k 128, 64 KiB of keys.
__host__ __device__ constexpr int64_t prune_cap(int64_t k) {
  if (k <= kPruneNarrowMaxK) return kPruneCap;
  int64_t m = kPruneCap;
  while (m < k + kPruneCap) m *= 2;
  return m;
}
constexpr int64_t kPruneLargestCap = prune_cap(kPruneMaxK);
// settle_wide_kernel sorts the appended survivors past the seed's (up to 2k keys) and keeps a
// block-wide window of rows free past the k best of an overflowed query (k + 256).
constexpr bool prune_caps_hold() {
  for (int64_t k = 1; k <= kPruneMaxK; ++k)
    if (prune_cap(k) < 2 * k || prune_cap(k) < k + 256) return false;
  return true;
}
static_assert(prune_caps_hold(), "every k's entries hold 2k keys and k plus a window");
static_assert(kPruneNarrowMaxK <= kPruneCap, "k entries fit the cap");
// The largest k a seed on tensor cores can serve (scan.cu's int8_seed; f16_seed stops earlier,
// kF16SeedMaxK): a warp's sorted list of a query's k best (seed_entries_kernel,
// seed_rescore_kernel).
constexpr int kSeedMaxK = 32;

// The seeds on tensor cores (scan_seed.cuh: int8, integer queries on uint8 / int8 rows;
// scan_seed_f16.cuh: f16, every other query and row type, k <= kF16SeedMaxK): a block of
// kSeedWarps takes a unit of kSeedQueries queries and kSeedUnitRows rows of a list, and each
// lane keeps its kSeedKeep best costs for each of its two query rows: a unit leaves
// kSeedUnitValues a query (four lanes a warp hold each query row).
constexpr int kSeedWarps = 4;
constexpr int kSeedThreads = kSeedWarps * 32;
constexpr int kSeedQueries = 16;  // the mma's m
constexpr int kSeedKeep = 6;
constexpr int64_t kSeedUnitRows = 2048;
constexpr int64_t kSeedUnitValues = int64_t{kSeedWarps} * 4 * kSeedKeep;
// What a seed's lanes leave a query: nq x stride (cost, candidate position) entries, count[q] of
// them taken, and the best cost any lane dropped (ordered); and the queries whose k best they
// may miss (flagged: nflagged of them, listed in no particular order), scanned again exactly.
// The int8 seed's costs are exact; the f16 seed's
// are pessimistic (the f16 cost plus its margin), and it also records the largest squared norms
// of each query (qsq: L2 centres it on each probe's centroid) and of the rows it judged (xmax),
// as the margin takes them.
// count, dropped, nflagged, qsq and xmax are cleared by the caller (dropped to all ones, the rest
// to 0).
struct SeedValues {
  float* cost = nullptr;
  int32_t* pos = nullptr;
  int32_t* count = nullptr;
  int64_t stride = 0;
  uint32_t* dropped = nullptr;
  int32_t* flagged = nullptr;   // nq: the flagged queries, the first *nflagged of it
  int32_t* nflagged = nullptr;  // one counter
  float* qsq = nullptr;   // the f16 seed's only
  float* xmax = nullptr;  // the f16 seed's only
};

struct PruneState {
  uint32_t* bound = nullptr;  // nq: an ordered cost (to_ordered) the exact k-th cannot be worse than
  int32_t* found = nullptr;   // nq: rows appended (past cap: the query overflowed)
  int32_t* pos = nullptr;     // nq * cap: their candidate positions
  float* opt = nullptr;       // nq * cap: their optimistic costs
  int64_t cap = 0;
  int64_t stride = 0;  // the candidate rows' stride: turns the scan's slots into positions
  int k = 0;
  // nq: how many of a query's first entries came from its first probe's exact scan (their
  // costs are exact, so the settle need not read their rows again), or nullptr: none.
  int32_t* seeded = nullptr;
  // Every entry's cost is exact (the integer pass, scan_imma.cuh): the settle reads no row again.
  bool exact = false;
  // The bounds are estimates (the wide pass's sampled bound, scan.cu's sampled_wide_bound), not
  // proven: with exact entries, the settle scans in full a query with fewer than k entries within
  // its bound.
  bool estimated = false;
  // The wide pass marks each pair by its own row's norm (wide_row_thresholds), unless
  // IVFGPU_WIDE_MARGIN=tile pins the tile's largest (A/B runs).
  bool row_margins = false;
  // The wide pass re-scores a unit's marked pairs together once its row tiles are scanned (or when
  // the pairs array fills), their rows from L2 (list_marked_pairs), or each row tile's after its
  // marks, from its fp32 copy in shared memory: scan_dispatch.hpp's wide_defers_rescoring chooses;
  // IVFGPU_WIDE_DEFER=1 or 0 pins either (A/B runs, the tests of each).
  bool defer_rescore = false;
};

// The wide pass's sampled bound (scan.cu, sampled_wide_bound): every kWideSampleEvery-th row of
// each probed list, from its row sample_phase, is scanned exactly, and the bound is the
// sample_rank-th best of them. Where about k / every sampled costs fall below the exact k-th of
// all the rows (the sample is a fair one), the rank is that plus four standard deviations and
// eight, so that k or more rows lie within the bound all but rarely; the rows the pass then
// appends are about every x rank a query (~1,950 at k 1000). Every 32nd row, not 16th (session
// 72, H100, k 1000 at nprobe 16 / 64: +4.7% / +7.9%): half the sample's scan for ~300 more rows
// a query that the pass marks and re-scores.
constexpr int64_t kWideSampleEvery = 32;
// The first sampled row of list l: phases that differ from list to list round the lists' shares
// (size / every) up and down alike, so short lists are not sampled whole. The tests place rows
// at the phases of lists 0-3 (tensor_scan_test.cpp, WidePassWhoseSampleMisleadsEqualsTheSimtScan).
__host__ __device__ constexpr int64_t sample_phase(int64_t list, int64_t every) { return list % every; }
// sigmas: the standard deviations past the mean (IVFGPU_WIDE_SIGMAS in A/B runs).
constexpr double kWideSampleSigmas = 4.0;
__host__ __device__ constexpr int64_t sample_rank(int64_t k, int64_t every, double sigmas = kWideSampleSigmas) {
  const double mean = static_cast<double>(k) / static_cast<double>(every);
  double sd = 1.0;  // a square root, by Newton's steps (constexpr)
  for (int i = 0; i < 40; ++i) sd = 0.5 * (sd + mean / sd);
  return static_cast<int64_t>(mean + sigmas * sd) + 8;
}
// The longest sampled row of a query: at most largest rows over nprobe lists, each list's sample
// at most one row past its share (sample_lists_kernel rounds the share up or down).
__host__ __device__ constexpr int64_t sampled_row_length(int64_t largest, int64_t nprobe, int64_t every) {
  return largest / every + nprobe;
}

// The first pass on list_mma_kernel: pessimistic keys into args.cand and each list's largest
// row norm into list_norm, zeroed by the caller (prune == nullptr: the keys pass), or the pruned
// state (PrunedKernel::Bf16Staged; list_norm unused: nullptr). args.tile_off counts
// tensor_tiles per list of one query tile a unit: args.unit_queries must be kMmaTile (else
// Errc::Internal).
template <class T>
void launch_tensor_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                        float* list_norm, const PruneState* prune);

// Whether the pruned pass on list_mma_kernel multiplies with wgmma (wgmma.cuh): the build has
// sm_90a code (IVFGPU_CUDA_SM90A, from IVFGPU_CUDA_ARCHITECTURES) and the device is compute
// capability 9.0. IVFGPU_WGMMA=0 keeps mma.sync there (A/B runs, tests).
bool wgmma_usable(const DeviceContext& ctx);

// Whether the pruned staged pass on rows of two-byte elements (launch_tensor_scan asks only for
// those) runs on list_pair_tile_kernel (128-row steps, scan_staged_pair.cuh) rather than
// list_mma_kernel: wgmma_usable, four-element rows, and a pass that is centred
// (staged_pass_centred) or needs no centring (inner product). IVFGPU_STAGED_ROWS=64 keeps
// list_mma_kernel (A/B runs, tests).
bool pair_tile_usable(const DeviceContext& ctx, bool ip, bool vec4, bool centroids, int64_t dim);
// Whether the pruned staged pass on fp32 rows runs on list_tf32_ring_kernel (tf32 wgmma fed by
// cp.async, scan_staged_tf32.cuh) rather than list_mma_kernel: wgmma_usable and four-element
// rows and queries. IVFGPU_STAGED_ROWS=64 keeps list_mma_kernel here too.
bool tf32_ring_usable(const DeviceContext& ctx, bool vec4);

// The pruned pass with its query tile resident (PrunedKernel::Bf16Resident, scan_resident.cuh).
// args.tile_off counts tensor_tiles of args.unit_queries, which must be kMmaTile x
// resident_query_tiles(dim, prune.exact) (else Errc::Internal). native: its NATIVE builds
// (resident_native: f16 or bf16 rows, queries of that type, the narrow form on wgmma).
template <class T>
void launch_resident_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                          const PruneState& prune, bool native);

// The int8 seed (scan_seed.cuh): each of the nq integer queries' exact k best rows of its first
// `seed` probes as its first entries (exact) and their k-th cost as its bound, in prune. args:
// those probes' pairs grouped by list (args.tile_off counts kSeedQueries-query tiles x
// kSeedUnitRows rows per list); probes: every query's probes. values: the caller's scratch. The
// int8 pass's shapes (dim % 16 == 0 up to kImmaMaxDim, 16-byte aligned queries and rows), and
// args.query_bytes / query_sq set (launch_pack_integer_queries); instantiated for uint8_t and
// int8_t only.
template <class T>
void launch_int8_seed(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args, int64_t nq,
                      const int32_t* probes, int64_t seed, const SeedValues& values, const PruneState& prune);

// The f16 seed (scan_seed_f16.cuh): as launch_int8_seed, for f32 queries on rows of any type
// (not integer arithmetic), k <= kF16SeedMaxK, four-element loads (args.vec4), dim up to
// kF16SeedMaxDim, and for L2 the list centroids. The costs on f16 tensor cores carry a margin
// (margin_terms_f16); the few rows that can still be among a query's k best are re-scored
// exactly (the SIMT scan's arithmetic), and a query whose lanes dropped a row that could is
// scanned again exactly.
constexpr int64_t kF16SeedMaxDim = 2048;  // shared memory: 36 bytes a dimension, and the rings (48 KiB with f32 rows)
// The largest k it serves: past it the SIMT seed was faster (H100, 1M rows, 10,000 queries, k 32:
// -7% / -9% at d 128, nprobe 16 / 64, -4 to -30% at d 64 to 960; at d 128 it still gained at
// k 16 +7% / +3% and at k 24 +2%).
constexpr int kF16SeedMaxK = 16;
static_assert(kF16SeedMaxK <= kSeedMaxK, "the f16 seed's k best fit a warp's list");
// best_first: the re-scoring takes the k best kept costs first (seed_rescore_kernel); false: every
// kept row that can count in one run (IVFGPU_SEED_RESCORE=once, scan.cu). native: f16 rows with f16
// queries, uncentred, exact products (seed_native; else Errc::Internal for other rows).
template <class T>
void launch_f16_seed(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args, int64_t nq,
                     const int32_t* probes, int64_t seed, const SeedValues& values, const PruneState& prune,
                     bool best_first, bool native);

// Integer-valued f32 queries (nq * dim, dim % 16 == 0, 16-byte aligned) as T's bytes (bytes:
// nq * dim, 16-byte aligned) and their exact squared norms (sq: nq, zeroed by the caller), once a
// search, for the int8 seed and pass (TileArgs::query_bytes). Instantiated for uint8_t and
// int8_t only.
template <class T>
void launch_pack_integer_queries(cudaStream_t stream, const float* queries, int64_t nq, int64_t dim, uint8_t* bytes,
                                 int32_t* sq);

// The pruned pass on int8 tensor cores for integer queries against uint8 / int8 rows
// (PrunedKernel::Integer, scan_imma.cuh): exact integer costs, so no margin and nothing to
// re-score (prune->exact). args.unit_queries: kMmaTile x integer_query_tiles(dim), as
// args.tile_off counts (else Errc::Internal); args.query_bytes / query_sq set (as for
// launch_int8_seed). Instantiated for uint8_t and int8_t only.
template <class T>
void launch_integer_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                         const PruneState& prune);

// The settles (launch_settle): settle_kernel, with warp-wide lists, up to this k; settle_wide_kernel past it.
constexpr int64_t kSettleNarrowMaxK = 32;

// What settles a pruned pass into the answer: the k best of each query's appended rows by
// exact distance, their ids and distances (padding past the candidates), as the SIMT scan and
// its finaliser would give them.
template <class T>
struct SettleArgs {
  const float* queries;  // nq * dim (device, f32)
  int64_t nq, dim, nprobe, k;
  const int32_t* probes;
  const T* vectors;
  const int64_t* list_start;
  CandidateRows cand;  // the layout (positions -> probe, row)
  PruneState prune;
  const int64_t* ids;               // by slot, or
  const int64_t* const* list_ids;   // per list (non-null: used instead)
  float pad;
  int64_t* out_ids;
  float* out_dists;
  // What a query that overflowed its entries scans again in full: the lists and the rows the
  // scan excludes (removed slots, a filter on ids by slot).
  const int64_t* list_size;
  const uint64_t* removed;
  int filter;  // 0 none, 1 allow, 2 deny
  IdSetView filter_set;
  // The wide settle sorts in registers (block_sort); false: in shared memory (block_bitonic_sort),
  // as before session 74 (IVFGPU_SETTLE_SORT=shared, for A/B runs).
  bool register_sort = true;
  // The wide settle's queries past its first wave (query blockIdx.x), claimed one at a time by
  // whichever block is free (next_block_unit; zeroed before the launch), or null: a block takes
  // every gridDim-th query (IVFGPU_SETTLE_QUERIES=static, for A/B runs).
  unsigned long long* next_unit = nullptr;
};
template <class T>
void launch_settle(const DeviceContext& ctx, cudaStream_t stream, bool ip, bool integer, const SettleArgs<T>& args);


// The refinement of the first pass's candidates (after a top-k of them): exact distances for
// the rows that may enter the exact top-k, padding for every other.
template <class T>
void launch_refine(const DeviceContext& ctx, cudaStream_t stream, bool ip, bool integer, const RefineArgs<T>& args);

}  // namespace ivfgpu::cuda::scan_detail
