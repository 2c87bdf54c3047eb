// The tensor-core list scan and its exact refinement (scan_tensor.cuh says how both work and
// why the results equal the SIMT scan's). scan.cu decides when to use them, in one place.
#pragma once

#include <cuda_runtime.h>

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
// re-scores more rows. As a * qn * xn + b * (qn + xn)^2:
struct MarginTerms {
  float a = 0.0f, b = 0.0f;
};
//
// centered (L2 only): both vectors are first moved by the same centroid c, in fp32, and the
// norms are those of q - c and x - c. Each coordinate difference then carries one more
// rounding, u (|q_j - c_j| + |x_j - c_j|), which moves the squared distance by at most about
// 2u (|q - c| + |x - c|)^2: 3u more in b.
// bf16 (the pruned pass, scan_mma.cuh): the operands are rounded to bf16 instead of cut to TF32.
__host__ __device__ inline MarginTerms margin_terms(bool l2, int64_t dim, bool centered = false, bool bf16 = false) {
  const float u = 5.9604645e-08f;  // 2^-24
  const float rounding = static_cast<float>(dim + 4) * u;
  const float operand = bf16 ? 3.90625e-03f : 9.765625e-04f;  // 2^-8 : 2^-10
  const float dot = 2.0f * operand + rounding;
  if (!l2) return MarginTerms{2.0f * (dot + rounding), 0.0f};
  return MarginTerms{4.0f * dot, 6.0f * rounding + (centered ? 3.0f * u : 0.0f)};
}
__host__ __device__ inline float candidate_margin(const MarginTerms& m, float qn, float xn) {
  return m.a * qn * xn + m.b * (qn + xn) * (qn + xn);
}

// The tensor-core pass's tiles: kMmaTile queries x kMmaTile rows; a work unit is one query
// tile x kMmaUnitTiles row tiles, so that its set-up (finding its list, its queries' places)
// is paid once for all of them and each tile's first slice loads during the previous epilogue.
// Eight rather than four (H200, session 38): the resident passes stage their query tile once a
// unit (ncu: ~100 instructions per warp and row tile went to the unit's set-up with four);
// 1M x 128 +5-9% at nprobe 16, +10% at 64, uint8 queries +7% / +15%; d 960 (list_mma_kernel,
// no resident tile) -3% at nprobe 64.
constexpr int kMmaTile = 64;
constexpr int kMmaUnitTiles = 8;

// Work units of the tensor-core pass for a list probed by `pairs` queries and holding `rows` rows.
__host__ __device__ inline int64_t tensor_tiles(int64_t pairs, int64_t rows) {
  return ((pairs + kMmaTile - 1) / kMmaTile) *
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
// The largest k the int8 seed serves (scan.cu's int8_seed): a warp's sorted list of a query's k
// best (seed_entries_kernel).
constexpr int kSeedMaxK = 32;

// The int8 seed (scan_seed.cuh, integer queries on uint8 / int8 rows, k <= kSeedMaxK): a block
// of kSeedWarps takes a unit of kSeedQueries queries and kSeedUnitRows rows of a list, and each
// lane keeps its kSeedKeep best exact costs for each of its two query rows: a unit leaves
// kSeedUnitValues a query (four lanes a warp hold each query row).
constexpr int kSeedWarps = 4;
constexpr int kSeedThreads = kSeedWarps * 32;
constexpr int kSeedQueries = 16;  // the mma's m
constexpr int kSeedKeep = 6;
constexpr int64_t kSeedUnitRows = 2048;
constexpr int64_t kSeedUnitValues = int64_t{kSeedWarps} * 4 * kSeedKeep;
// What the int8 seed's lanes leave a query: nq x stride (exact cost, candidate position) entries,
// count[q] of them taken, and the best cost any lane dropped (ordered); and the queries whose k
// best they may miss (incomplete), scanned again exactly. count and dropped are cleared by the
// caller (dropped to all ones).
struct SeedValues {
  float* cost = nullptr;
  int32_t* pos = nullptr;
  int32_t* count = nullptr;
  int64_t stride = 0;
  uint32_t* dropped = nullptr;
  int32_t* incomplete = nullptr;
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
};

// The first pass on list_mma_kernel: pessimistic keys into args.cand and each list's largest
// row norm into list_norm, zeroed by the caller (prune == nullptr: the keys pass), or the pruned
// state (PrunedKernel::Bf16Staged; list_norm unused: nullptr). args.tile_off counts
// tensor_tiles per list.
template <class T>
void launch_tensor_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                        float* list_norm, const PruneState* prune);

// The pruned pass with its query tile resident (PrunedKernel::Bf16Resident, scan_resident.cuh).
template <class T>
void launch_resident_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                          const PruneState& prune);

// The int8 seed (scan_seed.cuh): each of the nq integer queries' exact k best rows of its first
// `seed` probes as its first entries (exact) and their k-th cost as its bound, in prune. args:
// those probes' pairs grouped by list (args.tile_off counts kSeedQueries-query tiles x
// kSeedUnitRows rows per list); probes: every query's probes. values: the caller's scratch. The
// int8 pass's shapes (dim % 16 == 0 up to kImmaMaxDim, 16-byte aligned queries and rows);
// instantiated for uint8_t and int8_t only.
template <class T>
void launch_int8_seed(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args, int64_t nq,
                      const int32_t* probes, int64_t seed, const SeedValues& values, const PruneState& prune);

// The pruned pass on int8 tensor cores for integer queries against uint8 / int8 rows
// (PrunedKernel::Integer, scan_imma.cuh): exact integer costs, so no margin and nothing to
// re-score (prune->exact). Instantiated for uint8_t and int8_t only.
template <class T>
void launch_integer_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                         const PruneState& prune);

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
};
template <class T>
void launch_settle(const DeviceContext& ctx, cudaStream_t stream, bool ip, bool integer, const SettleArgs<T>& args);


// The refinement of the first pass's candidates (after a top-k of them): exact distances for
// the rows that may enter the exact top-k, padding for every other.
template <class T>
void launch_refine(const DeviceContext& ctx, cudaStream_t stream, bool ip, bool integer, const RefineArgs<T>& args);

}  // namespace ivfgpu::cuda::scan_detail
