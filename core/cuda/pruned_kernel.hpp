// The pruned tensor-core pass's limits on k, which kernel runs it, and how many probes its
// narrow form's seed scans. scan.cu asks once per scan, beside the rest of the scan's dispatch
// (scan_dispatch.hpp); the choices need no CUDA, so they are tested on any machine
// (tests/engine/pruned_kernel_test.cpp).
#pragma once

#include <cstdint>

namespace ivfgpu::cuda::scan_detail {

// The pruned pass (k <= kPruneMaxK): instead of a key for every candidate, each query keeps a
// bound on its exact k-th best cost and a list of the rows that can still beat it
// (scan_prune.cuh says how and why nothing of the k best is lost). Past k = 32 the settling
// sorts in shared memory (settle_wide_kernel), and past 64 no single 64-row tile can lower a
// bound: the seed's exact k-th cost bounds the whole pass.
constexpr int kPruneMaxK = 4096;
// Past kPruneNarrowMaxK the pass is the wide form: its bound comes from the exact k best of the
// first few probes (scan.cu, pruned_seed_probes; the narrow form seeds from the first probe
// alone), and its entries hold k + kPruneCap. On the 1M x 128 mixture at k 1000, nprobe 16
// (H200, bench/RESULTS.md) a query held a mean of 1,306 appended entries besides the seed's
// 1,000 with a four-probe seed (p99 4,547 entries in all, none past the cap), 941 with five, 709
// with six.
constexpr int kPruneNarrowMaxK = 128;
// The int8 pass keeps its query tile in shared memory: 64 rows x 1,024 int8 = 64 KiB.
constexpr int64_t kImmaMaxDim = 1024;
// The resident bf16 pass's query tile: 64 rows x 512 bf16 = 64 KiB (whole slices).
constexpr int kResidentMaxDim = 512;
// Up to kResidentGroupedMaxDim dimensions (a row tile's two 64-dimension slices, both staged to
// the end of the tile) the resident pass's units hold several 64-query tiles, multiplied one after
// the other against the same staged rows: a list's queries cost its rows' loads, centring,
// rounding and norms once per unit instead of once per 64. Four tiles past 64 dimensions (64 KiB
// of query tiles at 128: two blocks an SM), two up to 64 (three blocks). The H100 A/B (session
// 47, bench/RESULTS.md) set the split: four against two gained 4-10% at 96 and 128 dimensions and
// nothing clear at 64. Not in the wide form (its fp32 query rows are a tile's worth).
constexpr int64_t kResidentGroupedMaxDim = 128;
constexpr int resident_query_tiles(int64_t dim, bool wide) {
  return wide || dim > kResidentGroupedMaxDim ? 1 : dim > 64 ? 4 : 2;
}
// The int8 pass's likewise, up to two of its 128-dimension slices: four tiles past 128
// dimensions (two blocks an SM: +8-10% against two at 256), two up to 128 (three blocks; four
// there, at three blocks, spilled and lost 11-16%, and at two were within -2 / +5%).
constexpr int64_t kImmaGroupedMaxDim = 256;
constexpr int integer_query_tiles(int64_t dim) { return dim > kImmaGroupedMaxDim ? 1 : dim > 128 ? 4 : 2; }

enum class PrunedKernel {
  Integer,       // int8 tensor cores, exact integer costs (list_imma_kernel, scan_imma.cuh)
  Bf16Resident,  // bf16, the query tile resident for a unit (list_resident_kernel, scan_resident.cuh)
  Bf16Staged,    // the staged passes (launch_tensor_scan, scan_tensor.cuh): bf16 slice by slice
                 // (list_mma_kernel, scan_mma.cuh), 128-row steps for two-byte rows, the tf32 ring for fp32
};

struct PrunedShape {
  int64_t dim = 0;
  bool vec4 = false;         // four-element loads: dim % 4 == 0, queries and rows 16-byte aligned
  bool integer = false;      // integer queries against integer rows (uint8 / int8)
  bool bf16_pinned = false;  // IVFGPU_SCAN=bf16: bf16 operands for integer queries too
  bool inner_product = false;
  bool centroids = false;    // the lists' centroids are there (the bf16 passes centre L2 on them)
  bool staged_pinned = false;  // IVFGPU_PRUNED=staged: the staged pass where the resident one would run (A/B)
  bool fp32_rows = false;      // the rows are fp32
  bool tf32_ring = false;      // the device and build run list_tf32_ring_kernel (wgmma; tf32_ring_usable)
  bool wide = false;           // k past kPruneNarrowMaxK
  int ring_tiles_pinned = 0;   // IVFGPU_RING_TILES=1 or 2: the tf32 ring's query tiles a unit (A/B, tests); 0: the rule
  bool f16_rows = false;        // the rows are f16
  bool bf16_rows = false;       // the rows are bf16
  bool storage_queries = false; // the queries' values are the storage type's (ScanProblem::storage_queries)
  bool wgmma = false;           // the device and build run wgmma (wgmma_usable)
  bool native_pinned_off = false;  // IVFGPU_NATIVE16=0: the bf16 operands where the native pass would run (A/B, tests)
};

// Whether the staged passes (PrunedKernel::Bf16Staged) run fp32 rows through the tf32 ring
// (launch_tensor_scan takes it wherever tf32_ring_usable says the device and build can).
constexpr bool staged_takes_tf32_ring(const PrunedShape& s) { return s.fp32_rows && s.vec4 && s.tf32_ring; }

// From kTf32RingMinDim dimensions the narrow pass over fp32 rows takes the tf32 ring
// (list_tf32_ring_kernel, scan_staged_tf32.cuh) instead of the resident bf16 pass: nothing is
// converted or centred, and 128-row steps share each copied query slab. H200, 1M rows, k 10,
// 10,000 device queries (bench/RESULTS.md, session 56), resident against ring at nprobe 16 / 64:
// d 128 5.35M against 4.32M (the ring loses), d 144 +7% (nprobe 16), 160 +12% / +16%, 192 +6% /
// +5%, 224 +17% / +21%, 256 +11% / +13% (batches of 256 and 1,024 queries +11% and +5%), 320 +15%
// / +20%, 384 +16% / +149%, 512 +17% / +18%. The wide form keeps the resident pass (its exact
// entries to 256 dimensions; the ring was not measured there).
constexpr int64_t kTf32RingMinDim = 144;
constexpr bool tf32_ring_serves(const PrunedShape& s) {
  return staged_takes_tf32_ring(s) && !s.wide && s.dim >= kTf32RingMinDim;
}

// The int8 pass for integer queries on integer rows whose dimension fills its 16-element k
// steps and its tile; else the resident bf16 pass where rows load four elements at a time, its
// tile fits, (L2) it can centre and the tf32 ring does not serve better; else the staged
// passes, which take every shape.
constexpr PrunedKernel pruned_kernel_for(const PrunedShape& s) {
  if (s.integer && !s.bf16_pinned && s.vec4 && s.dim % 16 == 0 && s.dim <= kImmaMaxDim) return PrunedKernel::Integer;
  if (s.vec4 && s.dim <= kResidentMaxDim && (s.inner_product || s.centroids) && !s.staged_pinned &&
      !tf32_ring_serves(s))
    return PrunedKernel::Bf16Resident;
  return PrunedKernel::Bf16Staged;
}

// Whether the resident pass (PrunedKernel::Bf16Resident) runs native: f16 or bf16 rows with
// queries of the same type go to the tensor cores as they are, uncentred (list_resident_kernel's
// NATIVE builds: f16 slabs on f16 wgmma for f16 rows), so the products are exact and the margin
// only the sums' (margin_terms_exact_operands); the narrow form on wgmma only, and not where
// IVFGPU_SCAN=bf16 pins bf16 operands.
constexpr bool resident_native(const PrunedShape& s) {
  return (s.f16_rows || s.bf16_rows) && s.storage_queries && s.wgmma && !s.wide && !s.native_pinned_off &&
         !s.bf16_pinned;
}

// Whether the f16 seed (scan_seed_f16.cuh) runs native: f16 rows with f16 queries, uncentred, the
// ring's words the tensor cores' operands as they are (bf16 values need not fit f16's range).
constexpr bool seed_native(const PrunedShape& s) {
  return s.f16_rows && s.storage_queries && !s.native_pinned_off;
}

// The tf32 ring's units hold two 64-query tiles (list_tf32_ring_kernel<IP, 2>: four warpgroups,
// 512 threads, one block an SM) where the pass's probed lists hold kTf32RingTwoTileQueries of its
// queries or more on average, else one (two 256-thread blocks an SM). A 128 x 128 step copies a
// query slab once for 128 rows and a row slab once for 128 queries: a third less traffic from L2
// a product than 64 x 128, and half the copies and squared norms. ncu at d 960, nprobe 16 (H200,
// session 57, bench/RESULTS.md): the one-tile ring's busiest unit was L2 (77% of peak), the
// tensor pipe 37%; two tiles took L2 from 147 to 104 GB, and d 960 from 422-430K to 443K QPS at
// nprobe 16, 170-174K to 190-192K at 64, d 512 +1% / +9%, d 256 within noise. With fewer queries a
// list the second tile's warpgroups mostly idle: batches of 2,500 / 5,000 (36 / 73 queries a list)
// were within -1% / +2% either way there, so the line sits between 73 and 146 (batch 10,000).
constexpr int64_t kTf32RingTwoTileQueries = 96;
constexpr int tf32_ring_query_tiles(const PrunedShape& s, int64_t mean_list_queries) {
  if (s.ring_tiles_pinned == 1 || s.ring_tiles_pinned == 2) return s.ring_tiles_pinned;
  return mean_list_queries >= kTf32RingTwoTileQueries ? 2 : 1;
}

// The query tiles a unit of the pass over the other probes holds (scan.cu tiles its units by it,
// and the resident, int8 and ring launches check it): two or four where the pass groups them,
// else one. mean_list_queries: the pass's (query, list) pairs over the index's lists.
constexpr int pruned_unit_query_tiles(PrunedKernel form, const PrunedShape& s, bool exact,
                                      int64_t mean_list_queries) {
  return form == PrunedKernel::Bf16Resident ? resident_query_tiles(s.dim, exact)
         : form == PrunedKernel::Integer    ? integer_query_tiles(s.dim)
         : staged_takes_tf32_ring(s)        ? tf32_ring_query_tiles(s, mean_list_queries)
                                            : 1;
}

// Whether the pass's entries carry exact costs, so that the settle reads no row again: always
// on the int8 pass; on the resident bf16 pass in its wide form (k past 128: `wide`), which scores
// what it would append where it stands, up to kWideExactMaxDim dimensions (it keeps the unit's
// fp32 query rows in shared memory too: 64 x (dim + 4) floats, 66 KiB at 256). Integer queries
// on integer rows pinned to bf16 keep the settle's integer re-scoring.
constexpr int64_t kWideExactMaxDim = 256;
constexpr bool pruned_entries_exact(PrunedKernel form, const PrunedShape& s, bool wide) {
  return form == PrunedKernel::Integer ||
         (wide && form == PrunedKernel::Bf16Resident && !s.integer && s.dim <= kWideExactMaxDim);
}

// The narrow pass's seed (k up to kPruneNarrowMaxK): how many of a query's first probes are
// scanned exactly before the pass, one where that held on the bench's mixtures, else two (three
// or four below 128 dimensions from nprobe 64, three from nprobe 128 past k 64; exact entries
// need fewer). Past a point a one-probe seed lets queries
// overflow their entries and fall back to the full exact scan (two- to three-fold slower at
// once); a second probe costs up to ~20% where one held. scan.cu's pruned_seed_probes gives the
// measurements. exact: the entries' costs are exact (the int8 pass), so no margin lets rows in.
constexpr bool one_probe_seed_holds(int64_t nprobe, int64_t k, int64_t dim, bool exact) {
  if (nprobe <= 16) return k <= 32 || (k <= 64 && (exact || dim <= 128));
  if (exact) return k <= 16 || (nprobe <= 32 && k <= 48);
  if (k <= 1) return true;
  if (k <= 10) return nprobe <= 128;
  return k <= 16 && dim >= 96 && nprobe <= (dim >= 128 ? 64 : 32);
}
constexpr int64_t narrow_seed_probes(int64_t nprobe, int64_t k, int64_t dim, bool exact) {
  if (one_probe_seed_holds(nprobe, k, dim, exact)) return 1;
  if (exact) return 2;
  // Below 128 dimensions two probes were not enough from nprobe 64 past k 16 (at 64 dimensions
  // past k 32 three were not either).
  if (dim < 128 && nprobe >= 64 && k > 16) return dim <= 64 && k > 32 ? 4 : 3;
  return nprobe >= 128 && k > 64 ? 3 : 2;
}

}  // namespace ivfgpu::cuda::scan_detail
