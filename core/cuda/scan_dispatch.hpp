// Which kernel scans resident lists: SIMT, the keys pass or the pruned pass, from the batch's
// shape. scan.cu's choose_scan_kernel asks once per scan (after IVFGPU_SCAN's pin); the rule
// needs no CUDA, so it is tested on any machine (tests/engine/pruned_kernel_test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "pruned_kernel.hpp"

namespace ivfgpu::cuda::scan_detail {

// The SIMT scan's query tile follows the expected number of queries per probed list.
constexpr int query_tile(int64_t nq, int64_t probes_per_query, int64_t nlist) {
  return static_cast<double>(nq * probes_per_query) / static_cast<double>(nlist) >= 24.0 ? 64 : 16;
}

// Queries a probed list must average before the pruned pass (k <= 32) beats SIMT at `dim`.
constexpr double pruned_min_per_list(int64_t dim) {
  if (dim >= 192) return 1.0;
  if (dim >= 128) return 2.0;
  if (dim >= 96) return 4.0;
  if (dim >= 64) return 16.0;
  return 24.0;  // a full 64-query tile (query_tile)
}

// Batch size from which the wide pruned pass serves k past 128.
constexpr int64_t kPrunedWideMinQueries = 8192;
// Batch size and queries a probed list from which the narrow pruned pass serves k 33-128.
constexpr int64_t kPrunedNarrowMinQueries = 1000;
constexpr double kPrunedNarrowMinPerList = 15.0;
// The largest k the dispatch gives the wide pruned pass. Seeded by the SIMT scan of its first
// probes it lost past k 1,024: at k 2048 its seed (nprobe / 5 + 3 probes) was too small (against
// SIMT -29% at nprobe 32, -22% at 64, -15% at 16 with the best seed there), and at k 4096 a
// query's appended rows overflowed its entries. From a sampled bound (scan.cu,
// sampled_wide_bound; session 69, H100, 1M x 128, 10,000 queries, nprobe 16, against SIMT in
// one binary): k 1500 1,145K against 846K QPS, k 2048 1,044K against 838K, k 3000 774K against
// 746K; k 4096 696K against 725K, so it stopped at 3,000. Since the settle's block sort takes a
// compare pair a thread (session 73, H100, same binary, IVFGPU_SCAN=tensor against the dispatch):
// k 4096 819K against SIMT's 719K at nprobe 16 and 474K against 227K at 64, so it serves every k
// the pruned pass takes.
constexpr int64_t kPrunedWideAutoMaxK = kPruneMaxK;
// The wide pass's seed by rule, where it still seeds (entries that are not exact, or
// IVFGPU_WIDE_SAMPLE=0; scan.cu's seed_probes_by_rule gives the measurements): the first
// nprobe / 8 + 3 probes up to k 1,024, nprobe / 5 + 3 past it (k 2048 wanted more probes).
constexpr int64_t kWideSeedRuleMaxK = 1024;
constexpr int64_t wide_seed_probes(int64_t nprobe, int64_t k) {
  return k <= kWideSeedRuleMaxK ? nprobe / 8 + 3 : nprobe / 5 + 3;
}

// The wide pass re-scores a row tile's marked pairs after its marks, from the tile's fp32 copy in
// shared memory, or defers them: a unit's pairs together once its tiles are scanned, their rows
// from L2 (PruneState::defer_rescore). Each tile's marks fill the block's lanes only where the k
// best are a large share of the probed rows: session 80 (H100, 1M x 128 in 1,024 lists, 10,000
// queries, k over probed rows per query 6.4% at nprobe 16, k 1000): per tile 1,606K QPS against
// deferred 1,555K; k 4096 (26%) 900K against 856K; nprobe 32 (3.2%) 1,031K against 1,032K;
// nprobe 64 (1.6%) 642K against 693K. So it defers below 3.2%.
constexpr bool wide_defers_rescoring(int64_t k, int64_t nprobe, int64_t nlist, int64_t ntotal) {
  return k * nlist * 1000 < 32 * nprobe * ntotal;
}

enum class AutoScan { Simt, Keys, Pruned };

// The resident scan's kernel where nothing is pinned. The keys pass and the pruned pass past k 32
// need a full 64-query tile per list on average (fewer queries per list are the SIMT kernel's
// 16-query tiles); the pruned pass for k <= 32 less, the more dimensions. The pruned pass keeps
// candidates on chip: for k <= 32 from 16 dimensions, and up to kPruneNarrowMaxK from 64
// dimensions in large batches (past it, its wide form: below); past k 32 a tile lowers a bound
// less often (never past 64), so more rows are appended and re-scored, which at low dimension
// costs more than the SIMT scan saves and at high dimension more than the keys pass (it writes
// every key and pays for two selections and a refinement; it needs enough dimensions and k <=
// 256). The seed of narrow_seed_probes made the pruned pass win past k 32 from 64 dimensions.
// Measured on the H100, 1M rows, nlist 1024, 10,000 queries (bench/RESULTS.md), against SIMT
// at nprobe 16 / 64: k 10 1.5x / 2.1x at d = 16, 1.6x / 2.2x at d = 32 and 48, 1.5x / 1.9x at
// d = 64, 1.6x / 1.9x at d = 128, 2.3x / 2.7x at d = 960; k 64 / 100 / 128 at d = 128 1.9x /
// 1.1x / 1.1x and 1.4x at nprobe 64, but k 100 at d = 64 0.94x / 0.98x (d = 96 not measured);
// at d = 960, k 100, the keys pass 127K QPS against the pruned pass's 93K. The keys pass
// 1.5-1.7x SIMT at d = 960 for k 10 and 100, 0.7x at k = 1000, 0.9x at d = 128.
constexpr AutoScan auto_scan_kernel(int64_t nq, int64_t nprobe, int64_t nlist, int64_t dim, int64_t k) {
  // k <= 32: the pruned pass from a number of queries a list that falls with the dimension
  // (pruned_min_per_list). Batches of 32 to 1,024 on the pipeline, k 10, pinned both ways
  // (bench/RESULTS.md): at d 128 it beat SIMT from 2 queries a list (nprobe 64, batch 256:
  // 0.90 against 2.66 ms), at d 200 and 960 from 1, at d 96 from 4, at d 64 from 16; at d 32
  // SIMT won up to 16. nprobe 1 stays SIMT (the pass's seed is the whole scan there).
  const double per_list = static_cast<double>(nq * nprobe) / static_cast<double>(nlist);
  if (k <= 32 && dim >= 16 && nprobe > 1 && per_list >= pruned_min_per_list(dim)) return AutoScan::Pruned;
  // k 33-128 from 64 dimensions, in batches from 1,000 queries averaging 15 a probed list (and
  // pruned_min_per_list). With the one-probe seed it lost in small batches (d 128, nprobe 64,
  // k 100: 15.9 / 19.1 / 23.1 ms for 1,024 / 2,500 / 5,000 queries against SIMT's 4.5 / 10.1
  // / 20.4), at d 64 (0.94x SIMT) and at d 960 (the keys pass 127K against 93K QPS): past some
  // k that seed let queries overflow their entries. With the seed of narrow_seed_probes (session
  // 42, H100, 1M rows, k 48-128, nprobe 16 / 64) it beat SIMT at d 64 and 96 and the keys pass
  // at d 256 and 960 at 10,000 queries (d 64 2.1-2.3x / 1.4x, d 96 2.3-2.6x / 1.6-3.9x, d 256
  // 1.6-2.7x / 3.6x, d 960 1.1-1.3x / 1.4-1.5x), and SIMT at d 64 and 128 in batches of 1,000
  // to 5,000 (d 128, nprobe 64, k 100, 1,000 queries: 697K against 235K QPS; d 64, nprobe 16,
  // k 48, 1,000: 1.82M against 1.30M).
  if (k > 32 && k <= kPruneNarrowMaxK && dim >= 64 && nq >= kPrunedNarrowMinQueries &&
      per_list >= std::max(kPrunedNarrowMinPerList, pruned_min_per_list(dim)))
    return AutoScan::Pruned;
  if (query_tile(nq, nprobe, nlist) != 64) return AutoScan::Simt;
  if (k <= 32 && dim >= 16) return AutoScan::Pruned;
  if (dim >= 192 && k <= 256) return AutoScan::Keys;
  // k 129-4096 at 128-256 dimensions: the wide pruned pass (a sampled bound; exact entries,
  // pruned_entries_exact), in large batches from nprobe 16. Below, the measurements with its
  // earlier seed of several probes (pruned_seed_probes) up to k 1,024; kPrunedWideAutoMaxK's past it.
  // On the 1M x 128 mixture (H200, 10,000 queries, against SIMT, bench/RESULTS.md): nprobe 16
  // k 256 +44%, k 500 +25%, k 1000 +5%; k 1000 +32% at nprobe 32, +56% at 64, and +126% with
  // uint8 queries on uint8 rows (the int8 pass) at 64; d 256, k 1000, nprobe 16 +15%. Below 128
  // dimensions it lost (k 1000, nprobe 16: d 96 -11%, d 64 -26%). Whole four-element rows only:
  // the exact entries need the resident kernel's loads (elsewhere the settle would gather every
  // appended row, 9.8 ms at k 1000; a caller's queries off 16-byte alignment still get that).
  if (k > kPruneNarrowMaxK && k <= kPrunedWideAutoMaxK && dim >= 128 && dim % 4 == 0 &&
      dim <= kWideExactMaxDim && nq >= kPrunedWideMinQueries && nprobe >= 16)
    return AutoScan::Pruned;
  return AutoScan::Simt;
}

}  // namespace ivfgpu::cuda::scan_detail
