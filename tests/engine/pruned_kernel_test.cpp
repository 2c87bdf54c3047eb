// The pruned tensor-core pass's kernel choice (core/cuda/pruned_kernel.hpp), the one place that
// picks it: int8 tensor cores exactly where integer queries meet integer rows whose dimension
// fits the int8 pass, the resident bf16 pass where its tile and loads fit (for fp32 rows below
// 144 dimensions where the device runs the tf32 ring), the staged passes everywhere else. The
// GPU tests compare each kernel's results with the SIMT scan; this pins which kernel their
// shapes reach (GpuTensorScan.IntegerPassEqualsTheSimtScan cannot observe it), how many probes
// the narrow pass's seed scans, and which kernel scans the resident lists
// (core/cuda/scan_dispatch.hpp: SIMT, the keys pass or the pruned pass).
#include <gtest/gtest.h>

#include <cstdint>

#include "core/cuda/pruned_kernel.hpp"
#include "core/cuda/scan_dispatch.hpp"

using namespace ivfgpu::cuda::scan_detail;

namespace {

PrunedShape shape(int64_t dim, bool integer, bool inner_product = false) {
  PrunedShape s;
  s.dim = dim;
  s.vec4 = dim % 4 == 0;  // aligned pool buffers
  s.integer = integer;
  s.inner_product = inner_product;
  s.centroids = true;
  return s;
}
// fp32 rows (real-valued queries), on a device and build that run the tf32 ring or not.
PrunedShape fp32_shape(int64_t dim, bool ring, bool wide = false, bool ip = false) {
  PrunedShape s = shape(dim, false, ip);
  s.fp32_rows = true;
  s.tf32_ring = ring;
  s.wide = wide;
  return s;
}

}  // namespace

TEST(PrunedKernel, IntegerQueriesOnIntegerRowsTakeTheInt8PassWhereItFits) {
  // The shapes of GpuTensorScan.IntegerPassEqualsTheSimtScan and the bench's uint8 runs.
  for (int64_t dim : {16, 64, 96, 128, 208, 784, 1024})
    for (bool ip : {false, true}) EXPECT_EQ(pruned_kernel_for(shape(dim, true, ip)), PrunedKernel::Integer) << dim;
  // Off the 16-element k step (200), or past the int8 tile (1,040): bf16, resident up to 512.
  EXPECT_EQ(pruned_kernel_for(shape(200, true)), PrunedKernel::Bf16Resident);
  EXPECT_EQ(pruned_kernel_for(shape(1040, true)), PrunedKernel::Bf16Staged);
  // Unaligned queries or rows: no four-element loads, so neither tile pass.
  PrunedShape unaligned = shape(128, true);
  unaligned.vec4 = false;
  EXPECT_EQ(pruned_kernel_for(unaligned), PrunedKernel::Bf16Staged);
  // IVFGPU_SCAN=bf16 keeps integer queries on bf16 operands.
  PrunedShape pinned = shape(128, true);
  pinned.bf16_pinned = true;
  EXPECT_EQ(pruned_kernel_for(pinned), PrunedKernel::Bf16Resident);
  // IVFGPU_PRUNED=staged leaves the resident pass for the staged one, not the int8 pass.
  PrunedShape staged = shape(128, false);
  staged.staged_pinned = true;
  EXPECT_EQ(pruned_kernel_for(staged), PrunedKernel::Bf16Staged);
  staged = shape(128, true);
  staged.staged_pinned = true;
  EXPECT_EQ(pruned_kernel_for(staged), PrunedKernel::Integer);
}

TEST(PrunedKernel, RealValuedQueriesTakeTheBf16Passes) {
  for (int64_t dim : {4, 16, 64, 128, 256, 512})
    EXPECT_EQ(pruned_kernel_for(shape(dim, false)), PrunedKernel::Bf16Resident) << dim;
  for (int64_t dim : {516, 768, 960})
    EXPECT_EQ(pruned_kernel_for(shape(dim, false)), PrunedKernel::Bf16Staged) << dim;
  for (int64_t dim : {1, 3, 31, 129, 201})
    EXPECT_EQ(pruned_kernel_for(shape(dim, false)), PrunedKernel::Bf16Staged) << dim;
  // L2 centres on the lists' centroids: without them only the staged pass runs; inner product
  // needs none.
  PrunedShape l2 = shape(128, false), ip = shape(128, false, true);
  l2.centroids = false;
  ip.centroids = false;
  EXPECT_EQ(pruned_kernel_for(l2), PrunedKernel::Bf16Staged);
  EXPECT_EQ(pruned_kernel_for(ip), PrunedKernel::Bf16Resident);
}

TEST(PrunedKernel, Fp32RowsFrom144DimensionsTakeTheTf32RingWhereTheDeviceRunsIt) {
  // The ring is one of the staged passes (launch_tensor_scan picks it for fp32 rows).
  for (int64_t dim : {144, 160, 200, 256, 300, 384, 512})
    for (bool ip : {false, true})
      EXPECT_EQ(pruned_kernel_for(fp32_shape(dim, true, false, ip)), PrunedKernel::Bf16Staged) << dim;
  // Below 144 dimensions the resident pass won (d 128: 5.35M against 4.32M QPS); without wgmma
  // (the ring's condition) or past k 128 (the wide form) the resident pass stays.
  for (int64_t dim : {64, 128, 140})
    EXPECT_EQ(pruned_kernel_for(fp32_shape(dim, true)), PrunedKernel::Bf16Resident) << dim;
  EXPECT_EQ(pruned_kernel_for(fp32_shape(256, false)), PrunedKernel::Bf16Resident);
  EXPECT_EQ(pruned_kernel_for(fp32_shape(256, true, true)), PrunedKernel::Bf16Resident);
  // Two-byte rows keep the resident pass; rows without four-element loads the staged one.
  PrunedShape half = fp32_shape(256, true);
  half.fp32_rows = false;
  EXPECT_EQ(pruned_kernel_for(half), PrunedKernel::Bf16Resident);
  PrunedShape unaligned = fp32_shape(256, true);
  unaligned.vec4 = false;
  EXPECT_EQ(pruned_kernel_for(unaligned), PrunedKernel::Bf16Staged);
}

TEST(PrunedKernel, EntriesAreExactOnTheInt8PassAndTheWideResidentPassUpTo256Dimensions) {
  for (bool wide : {false, true}) {
    EXPECT_TRUE(pruned_entries_exact(PrunedKernel::Integer, shape(128, true), wide));
    EXPECT_FALSE(pruned_entries_exact(PrunedKernel::Bf16Staged, shape(130, false), wide));
  }
  // The wide resident pass (k past 128) keeps its fp32 query rows in shared memory to 256
  // dimensions; the k <= 128 pass re-scores in the settle.
  for (int64_t dim : {16, 64, 96, 128, 200, 256}) {
    EXPECT_TRUE(pruned_entries_exact(PrunedKernel::Bf16Resident, shape(dim, false), true)) << dim;
    EXPECT_FALSE(pruned_entries_exact(PrunedKernel::Bf16Resident, shape(dim, false), false)) << dim;
  }
  EXPECT_FALSE(pruned_entries_exact(PrunedKernel::Bf16Resident, shape(260, false), true));
  // Integer queries on integer rows pinned to bf16 operands: the settle's integer arithmetic.
  PrunedShape pinned = shape(128, true);
  pinned.bf16_pinned = true;
  EXPECT_FALSE(pruned_entries_exact(pruned_kernel_for(pinned), pinned, true));
}

// The resident pass's units group their query tiles up to 128 dimensions (a row tile's slices all
// stay staged for the later tiles): four past 64, two up to 64; one past 128, and one in the wide
// form (its fp32 query rows).
TEST(PrunedKernel, ResidentUnitsGroupTheirQueryTilesUpTo128DimensionsOutsideTheWideForm) {
  for (int64_t dim : {4, 32, 64}) EXPECT_EQ(resident_query_tiles(dim, false), 2) << dim;
  for (int64_t dim : {68, 96, 128}) EXPECT_EQ(resident_query_tiles(dim, false), 4) << dim;
  for (int64_t dim : {4, 64, 96, 128}) EXPECT_EQ(resident_query_tiles(dim, true), 1) << dim;
  for (int64_t dim : {132, 200, 512}) EXPECT_EQ(resident_query_tiles(dim, false), 1) << dim;
}
// The int8 pass's: up to two of its 128-dimension slices, four tiles past one slice.
TEST(PrunedKernel, Int8UnitsGroupTheirQueryTilesUpTo256Dimensions) {
  for (int64_t dim : {16, 64, 128}) EXPECT_EQ(integer_query_tiles(dim), 2) << dim;
  for (int64_t dim : {144, 208, 256}) EXPECT_EQ(integer_query_tiles(dim), 4) << dim;
  for (int64_t dim : {272, 784, 1024}) EXPECT_EQ(integer_query_tiles(dim), 1) << dim;
}
// The tiling scan.cu gives the pass over the other probes follows the kernel: the staged bf16 pass
// never groups; the tf32 ring groups two tiles where its lists hold enough queries.
TEST(PrunedKernel, UnitsGroupTheirQueryTilesOnlyWhereTheirKernelDoes) {
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Resident, shape(64, false), false, 1000), 2);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Resident, shape(128, false), false, 1000), 4);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Resident, shape(128, false), true, 1000), 1);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Resident, shape(200, false), false, 1000), 1);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Integer, shape(128, true), false, 1000), 2);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Integer, shape(256, true), false, 1000), 4);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Integer, shape(784, true), false, 1000), 1);
  // Two-byte rows on the staged passes (and rows without four-element loads) never group.
  for (int64_t dim : {3, 128, 960})
    EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Staged, shape(dim, false), false, 1000), 1) << dim;
}
// The ring's units: two query tiles from kTf32RingTwoTileQueries queries a list on average, one
// below; the pin (IVFGPU_RING_TILES) overrides the rule either way; rows that do not take the
// ring never group.
TEST(PrunedKernel, Tf32RingUnitsHoldTwoQueryTilesWhereListsHoldEnoughQueries) {
  PrunedShape s = fp32_shape(960, true);
  ASSERT_TRUE(staged_takes_tf32_ring(s));
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Staged, s, false, kTf32RingTwoTileQueries), 2);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Staged, s, false, 600), 2);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Staged, s, false, kTf32RingTwoTileQueries - 1), 1);
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Staged, s, false, 0), 1);
  s.ring_tiles_pinned = 2;
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Staged, s, false, 1), 2);
  s.ring_tiles_pinned = 1;
  EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Staged, s, false, 600), 1);
  s.ring_tiles_pinned = 0;
  for (bool* off : {&s.fp32_rows, &s.vec4, &s.tf32_ring}) {
    *off = false;
    EXPECT_FALSE(staged_takes_tf32_ring(s));
    EXPECT_EQ(pruned_unit_query_tiles(PrunedKernel::Bf16Staged, s, false, 600), 1);
    *off = true;
  }
}

// The native pass (resident_native): f16 or bf16 rows with queries of their type (storage_queries:
// given in it and not normalised since), on wgmma, in the narrow form; anything else keeps the
// centred bf16 operands, and IVFGPU_NATIVE16=0 pins them. Its seed (seed_native) needs f16 rows:
// bf16 values need not fit f16's range.
TEST(PrunedKernel, QueriesOfTheRowsSixteenBitTypeRunNative) {
  PrunedShape s = shape(128, false);
  s.f16_rows = s.storage_queries = s.wgmma = true;
  EXPECT_EQ(pruned_kernel_for(s), PrunedKernel::Bf16Resident);
  EXPECT_TRUE(resident_native(s));
  EXPECT_TRUE(seed_native(s));
  s.f16_rows = false;
  s.bf16_rows = true;
  EXPECT_TRUE(resident_native(s));
  EXPECT_FALSE(seed_native(s));
  s.bf16_rows = false;  // neither: f32 or integer rows
  EXPECT_FALSE(resident_native(s));
  s.f16_rows = true;
  // Each of these alone keeps the pass off the native operands; the seed needs only f16 rows with
  // f16 queries, and not the pin.
  struct Off {
    bool PrunedShape::*field;
    bool seed_native;
    const char* what;
  };
  for (const Off& o : {Off{&PrunedShape::storage_queries, false, "f32 or normalised queries"},
                       Off{&PrunedShape::wgmma, true, "no wgmma"},
                       Off{&PrunedShape::wide, true, "k past 128: the wide pass keeps its bf16 operands"},
                       Off{&PrunedShape::bf16_pinned, true, "IVFGPU_SCAN=bf16"},
                       Off{&PrunedShape::native_pinned_off, false, "IVFGPU_NATIVE16=0"}}) {
    PrunedShape t = s;
    t.*o.field = !(s.*o.field);
    EXPECT_FALSE(resident_native(t)) << o.what;
    EXPECT_EQ(seed_native(t), o.seed_native) << o.what;
  }
}

// The narrow pass's seed (narrow_seed_probes): one probe where it held on the bench's mixtures,
// two past that (more below 128 dimensions from nprobe 64, and from nprobe 128 past k 64, without
// exact entries). The boundaries are the measured ones (scan.cu's pruned_seed_probes): a one-probe seed past them let queries overflow
// their entries.
TEST(PrunedSeed, OneProbeWhereItHeldElseTwo) {
  for (bool exact : {false, true}) {
    // nprobe 16: one probe to k 32 whatever the dimension, two past k 64.
    for (int64_t dim : {64, 128, 960}) {
      EXPECT_EQ(narrow_seed_probes(16, 32, dim, exact), 1) << dim;
      EXPECT_EQ(narrow_seed_probes(16, 100, dim, exact), 2) << dim;
    }
    EXPECT_EQ(narrow_seed_probes(64, 16, 128, exact), 1);
    EXPECT_EQ(narrow_seed_probes(64, 24, 128, exact), 2);
    EXPECT_EQ(narrow_seed_probes(256, 32, 128, exact), 2);
  }
  // Rows appended within the bf16 margin: one probe fell from k 24 at d 128 (nprobe 32 and 64),
  // from k 16 at d 64 and at d 96 from nprobe 64, and past k 10 from nprobe 128.
  EXPECT_EQ(narrow_seed_probes(32, 16, 128, false), 1);
  EXPECT_EQ(narrow_seed_probes(32, 24, 128, false), 2);
  EXPECT_EQ(narrow_seed_probes(32, 16, 64, false), 2);
  EXPECT_EQ(narrow_seed_probes(32, 16, 96, false), 1);
  EXPECT_EQ(narrow_seed_probes(64, 16, 96, false), 2);
  EXPECT_EQ(narrow_seed_probes(128, 10, 128, false), 1);
  EXPECT_EQ(narrow_seed_probes(128, 16, 128, false), 2);
  EXPECT_EQ(narrow_seed_probes(256, 10, 128, false), 2);
  EXPECT_EQ(narrow_seed_probes(256, 1, 128, false), 1);
  EXPECT_EQ(narrow_seed_probes(128, 100, 128, false), 3);
  // nprobe 16, k 33-64: one probe to 128 dimensions (d 64, 96, 128), two from 256 (d 256 and 960).
  EXPECT_EQ(narrow_seed_probes(16, 48, 96, false), 1);
  EXPECT_EQ(narrow_seed_probes(16, 48, 256, false), 2);
  EXPECT_EQ(narrow_seed_probes(16, 48, 960, false), 2);
  // Below 128 dimensions from nprobe 64 past k 16: three probes, four at d 64 past k 32.
  EXPECT_EQ(narrow_seed_probes(64, 32, 96, false), 3);
  EXPECT_EQ(narrow_seed_probes(64, 100, 96, false), 3);
  EXPECT_EQ(narrow_seed_probes(64, 32, 64, false), 3);
  EXPECT_EQ(narrow_seed_probes(64, 48, 64, false), 4);
  EXPECT_EQ(narrow_seed_probes(64, 16, 64, false), 2);
  // Exact costs (the int8 pass): one probe held to k 48 at nprobe 32 and to k 16 beyond.
  EXPECT_EQ(narrow_seed_probes(32, 48, 128, true), 1);
  EXPECT_EQ(narrow_seed_probes(32, 64, 128, true), 2);
  EXPECT_EQ(narrow_seed_probes(256, 16, 128, true), 1);
  EXPECT_EQ(narrow_seed_probes(128, 100, 128, true), 2);
}

// The resident scan's dispatch (scan_dispatch.hpp) where nothing is pinned: batches of the
// bench's shape (nlist 1024) and the edges of each rule.
TEST(ScanDispatch, PrunedForSmallKWhereListsHoldEnoughQueries) {
  // 10,000 queries at nprobe 16: ~156 a list.
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 128, 10), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 16, 32), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 15, 10), AutoScan::Simt);  // below 16 dimensions
  // The queries a list needs fall with the dimension: 24 below 64, 16 from 64, 4 from 96, 2 from
  // 128, 1 from 192 (256 probes of 1,024 lists: a quarter of a query per probe).
  EXPECT_EQ(auto_scan_kernel(1024 * 23, 1, 1024, 32, 10), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(1024 * 24, 2, 1024, 32, 10), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(1024 * 8, 2, 1024, 64, 10), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(1024 * 7, 2, 1024, 64, 10), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(1024 * 2, 2, 1024, 96, 10), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(1024, 2, 1024, 128, 10), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(1023, 2, 1024, 128, 10), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(512, 2, 1024, 192, 10), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(511, 2, 1024, 192, 10), AutoScan::Simt);
  // nprobe 1 stays SIMT below a full 64-query tile a list (the seed would be the whole scan).
  EXPECT_EQ(auto_scan_kernel(10000, 1, 1024, 128, 10), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(1024 * 24, 1, 1024, 128, 10), AutoScan::Pruned);
}

TEST(ScanDispatch, PrunedPastK32FromSixtyFourDimensionsInLargeBatches) {
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 64, 100), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 64, 1024, 960, 48), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 63, 100), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 128, 128), AutoScan::Pruned);
  // From 1,000 queries averaging 15 a probed list (16 at d 64: pruned_min_per_list).
  EXPECT_EQ(auto_scan_kernel(1000, 16, 1024, 128, 48), AutoScan::Pruned);  // 15.6 a list
  EXPECT_EQ(auto_scan_kernel(999, 16, 1024, 128, 48), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(1000, 15, 1024, 128, 48), AutoScan::Simt);  // 14.6 a list
  EXPECT_EQ(auto_scan_kernel(1000, 16, 1024, 64, 48), AutoScan::Simt);   // 15.6 < 16 at d 64
  EXPECT_EQ(auto_scan_kernel(1100, 16, 1024, 64, 48), AutoScan::Pruned);
}

TEST(ScanDispatch, KeysPassAndWidePassPastK128) {
  // k 129-256 from 192 dimensions: the keys pass, in full 64-query tiles.
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 256, 200), AutoScan::Keys);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 960, 256), AutoScan::Keys);
  EXPECT_EQ(auto_scan_kernel(1000, 16, 1024, 960, 200), AutoScan::Simt);  // 15.6 a list
  // k 129-4,096 (kPruneMaxK) at 128-256 four-element dimensions, from 8,192 queries and nprobe 16:
  // the wide pass (to 3,000 until session 73's block sort made its settle cheaper at k 4096).
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 128, 1000), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 256, 500), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 128, 2048), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 128, 3000), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 128, 3001), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 128, 4096), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 64, 1024, 256, 4096), AutoScan::Pruned);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 128, 4097), AutoScan::Simt);  // past the pruned pass's k
  EXPECT_EQ(auto_scan_kernel(8191, 16, 1024, 128, 1000), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(10000, 15, 1024, 128, 1000), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 130, 1000), AutoScan::Simt);  // not four-element rows
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 96, 1000), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(10000, 16, 1024, 260, 1000), AutoScan::Simt);
  EXPECT_EQ(auto_scan_kernel(8191, 16, 1024, 128, 4096), AutoScan::Simt);
}
// The wide pass's seed, where it still seeds: the best measured at k 1000 (H100, 1M x 128, session
// 61) up to k 1,024, 5 / 7 / 11 / 19 probes at nprobe 16 / 32 / 64 / 128; more past it, where
// k 2048 had wanted 8 at nprobe 16 and 16-20 at 64.
TEST(ScanDispatch, WideSeedProbesAreTheMeasuredBest) {
  for (int64_t k : {129, 1000, 1024}) {
    EXPECT_EQ(wide_seed_probes(16, k), 5) << k;
    EXPECT_EQ(wide_seed_probes(32, k), 7) << k;
    EXPECT_EQ(wide_seed_probes(64, k), 11) << k;
    EXPECT_EQ(wide_seed_probes(128, k), 19) << k;
  }
  EXPECT_EQ(wide_seed_probes(16, 2048), 6);
  EXPECT_EQ(wide_seed_probes(64, 2048), 15);
  EXPECT_EQ(wide_seed_probes(64, 4096), 15);
}
// The wide pass defers its re-scoring where k is under 3.2% of a query's probed rows (scan_dispatch.hpp),
// at the points session 80 measured on 1M rows in 1,024 lists and session 81 ran dispatched: per tile
// at nprobe 16 (k 1000: 6.4%, k 4096: 26%), at the nprobe 32 tie (k 1000: 3.2%, not under) and at
// nprobe 64, k 4096 (6.4%); deferred at nprobe 64, k 1000 (1.6%). Large shapes do not overflow.
TEST(ScanDispatch, WidePassDefersItsRescoringWhereKIsUnder3Point2PercentOfTheProbedRows) {
  const int64_t n = 1000000, nlist = 1024;
  EXPECT_FALSE(wide_defers_rescoring(1000, 16, nlist, n));
  EXPECT_FALSE(wide_defers_rescoring(4096, 16, nlist, n));
  EXPECT_FALSE(wide_defers_rescoring(1000, 32, nlist, n));
  EXPECT_FALSE(wide_defers_rescoring(4096, 64, nlist, n));
  EXPECT_TRUE(wide_defers_rescoring(1000, 64, nlist, n));
  EXPECT_TRUE(wide_defers_rescoring(999, 32, nlist, n));
  EXPECT_TRUE(wide_defers_rescoring(4096, 1024, 1 << 20, int64_t{1} << 40));
  EXPECT_FALSE(wide_defers_rescoring(4096, 1, 1 << 20, int64_t{1} << 30));
}
