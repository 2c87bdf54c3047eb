// The tensor-core scans against the exact SIMT scan: the pruned pass with on-chip selection
// for k <= 4096 (scan_prune.cuh; bf16 operands, its query tile resident up to 512 dimensions,
// scan_resident.cuh, else scan_mma.cuh; int8 operands for integer queries on integer rows,
// scan_imma.cuh, seeded for k <= 32 by 16-query int8 tiles, scan_seed.cuh, and every other
// pruned pass for k <= 16 by 16-query f16 tiles, scan_seed_f16.cuh; past k 128 its wide
// form, bounded from a sample of every list where its entries are exact, up to 256 dimensions,
// else seeded by several probes) and the keys pass with an exact refinement (TF32, scan_tensor.cuh), in
// one process and at one batch size (IVFGPU_SCAN pins the kernel per search, so the coarse stage
// is the same call both times): the same results per shared/docs/results-contract.md on 1M x 128
// (all 10,000 queries, nprobe 16, k 10, 100, 1000 and 4096, also as the dispatch chooses), on
// constructed near-duplicates and exact duplicates (ties within the error everywhere; all-ties
// lists that overflow the pruned pass's entries, narrow and wide), for both metrics, every
// storage type and odd dimensions (element-wise staging below 4-element rows; partial slabs and
// slices of the resident tile), on the million-row mixture quantised to uint8, and for f16 and bf16
// queries on rows of their type (the native pass) on subnormal, large and near-duplicate data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/id_workload.hpp"
#include "common/test_util.hpp"
#include "typed_twin.hpp"

using namespace ivftest;

namespace {

// kernel "auto": nothing pinned, the dispatch decides (on the million-row batch: the pruned pass
// for k 10, SIMT for k 100, the wide pruned pass for k 1000 and 4096).
struct KernelPin {
  explicit KernelPin(const char* kernel) {
    if (std::string(kernel) != "auto") setenv("IVFGPU_SCAN", kernel, 1);
  }
  ~KernelPin() { unsetenv("IVFGPU_SCAN"); }
};
// The wide pruned pass (k past 128) seeds its bound from this many first probes instead of its
// default four, for as long as the pin lives.
struct SeedProbesPin {
  explicit SeedProbesPin(int probes) { setenv("IVFGPU_SEED_PROBES", std::to_string(probes).c_str(), 1); }
  ~SeedProbesPin() { unsetenv("IVFGPU_SEED_PROBES"); }
};

// IVFGPU_WIDE_SAMPLE: the wide pass's bound from a sample of every n-th row ("32", the default)
// or, "0", from the SIMT seed of its first probes, for as long as the pin lives.
struct WideSamplePin {
  explicit WideSamplePin(const char* every) { setenv("IVFGPU_WIDE_SAMPLE", every, 1); }
  ~WideSamplePin() { unsetenv("IVFGPU_WIDE_SAMPLE"); }
};

// IVFGPU_WIDE_MARGIN: the wide pass's marks by each row's own norm ("row", the default) or by
// the row tile's largest ("tile"), for as long as the pin lives.
struct WideMarginPin {
  explicit WideMarginPin(const char* margin) { setenv("IVFGPU_WIDE_MARGIN", margin, 1); }
  ~WideMarginPin() { unsetenv("IVFGPU_WIDE_MARGIN"); }
};

// IVFGPU_UNITS=static (the tensor kernels' old walk over their work units) while it lives, when
// `on`; unset again on the way out, also when an assertion leaves the test early.
struct StaticUnitsPin {
  explicit StaticUnitsPin(bool on) {
    if (on) setenv("IVFGPU_UNITS", "static", 1);
  }
  ~StaticUnitsPin() { unsetenv("IVFGPU_UNITS"); }
};

Searched search_with(const char* kernel, const ivf_index* idx, const void* q, ivf_dtype qtype, int64_t nq,
                     int64_t dim, int64_t k, int64_t nprobe, const ivf_filter* filter = nullptr) {
  KernelPin pin(kernel);
  Searched s;
  s.ids.resize(static_cast<std::size_t>(nq * k));
  s.dists.resize(s.ids.size());
  auto sp = make_params({{IVF_PARAM_NPROBE, nprobe}});
  if (filter != nullptr) EXPECT_EQ(ivf_params_set_ptr(sp.get(), IVF_PARAM_FILTER, const_cast<ivf_filter*>(filter)), IVF_OK);
  EXPECT_EQ(ivf_search(idx, sp.get(), q, qtype, nq, dim, k, s.ids.data(), s.dists.data()), IVF_OK)
      << ivf_last_error_message();
  return s;
}

// The tensor forms against the SIMT scan on the same batch (queries of qtype at q): "tensor"
// (the pruned pass for k <= 4096, else keys) and, for k <= 256, "keys" too (the pass that writes
// every key), so both forms are checked where both serve. Returns "" or the first difference.
std::string compare_raw(const ivf_index* idx, const void* q, ivf_dtype qtype, int64_t nq, int64_t dim, int64_t k,
                        int64_t nprobe, const ivf_filter* filter = nullptr, bool with_auto = false) {
  const Searched simt = search_with("simt", idx, q, qtype, nq, dim, k, nprobe, filter);
  for (const char* kernel : {"tensor", "keys", "auto"}) {
    if (k > 256 && std::string(kernel) == "keys") continue;
    if (!with_auto && std::string(kernel) == "auto") continue;
    const Searched tensor = search_with(kernel, idx, q, qtype, nq, dim, k, nprobe, filter);
    const std::string diff = same_results(tensor.ids, tensor.dists, simt.ids, simt.dists, nq, k);
    if (!diff.empty()) return std::string(kernel) + ": " + diff;
  }
  return "";
}
// The pruned pass with each operand form it has for integer queries on integer rows ("tensor":
// int8 tensor cores where the shape allows, exact integers; "bf16": bf16 with a margin and exact
// re-scoring) against the SIMT scan.
std::string compare_integer(const ivf_index* idx, const void* q, ivf_dtype qtype, int64_t nq, int64_t dim, int64_t k,
                            int64_t nprobe, const ivf_filter* filter = nullptr) {
  const Searched simt = search_with("simt", idx, q, qtype, nq, dim, k, nprobe, filter);
  for (const char* kernel : {"tensor", "bf16"}) {
    const Searched pruned = search_with(kernel, idx, q, qtype, nq, dim, k, nprobe, filter);
    const std::string diff = same_results(pruned.ids, pruned.dists, simt.ids, simt.dists, nq, k);
    if (!diff.empty()) return std::string(kernel) + ": " + diff;
  }
  return "";
}
// Clustered values (about N(0, 1)) mapped to integers 0..255 (128 + 32 v, rounded, clamped): the
// million-row mixture and the large-k cases as uint8 rows and queries.
std::vector<float> as_uint8_values(std::vector<float> v) {
  for (float& e : v) e = std::min(255.0f, std::max(0.0f, std::nearbyint(128.0f + 32.0f * e)));
  return v;
}

// Removes every third id of ids 0 .. n - 1 and returns a filter denying every fifth (the
// caller frees it; null if either failed): rows the scan excludes, which a full exact scan of an
// overflowed query must leave out as well.
ivf_filter* remove_thirds_deny_fifths(ivf_index* idx, int64_t n) {
  std::vector<int64_t> gone, denied;
  for (int64_t i = 0; i < n; i += 3) gone.push_back(i);
  for (int64_t i = 1; i < n; i += 5) denied.push_back(i);
  int64_t removed = 0;
  if (ivf_remove(idx, nullptr, gone.data(), static_cast<int64_t>(gone.size()), &removed) != IVF_OK) {
    ADD_FAILURE() << ivf_last_error_message();
    return nullptr;
  }
  ivf_filter* f = nullptr;
  EXPECT_EQ(ivf_filter_create(&f, denied.data(), static_cast<int64_t>(denied.size()), IVF_FILTER_DENY), IVF_OK);
  return f;
}
std::string compare(const ivf_index* idx, const std::vector<float>& q, int64_t nq, int64_t dim, int64_t k,
                    int64_t nprobe, const ivf_filter* filter = nullptr, bool with_auto = false) {
  return compare_raw(idx, q.data(), IVF_DTYPE_F32, nq, dim, k, nprobe, filter, with_auto);
}

}  // namespace

TEST(GpuTensorScan, EqualsTheSimtScanOnAMillionVectors) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 1000000, dim = 128, nlist = 1024, nq = 10000;
  const std::vector<float> x = clustered_vectors(n, dim, 2048, 1);
  const std::vector<float> q = clustered_vectors(nq, dim, 2048, 2);
  IndexPtr idx = cuda_index_of(dim, nlist, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  // k 1000 and 4096: the wide pruned pass (its sampled bound) against SIMT.
  for (int64_t k : {int64_t{10}, int64_t{100}, int64_t{1000}, int64_t{4096}})
    EXPECT_EQ(compare(idx.get(), q, nq, dim, k, 16, nullptr, true), "") << "k " << k;
  // Batches whose lists average 0.75 to 16 queries (the dispatch takes the pruned pass from 2
  // at this dimension): the first 48, 128 and 256 queries (past the fused path's 512 probes).
  for (int64_t few : {int64_t{48}, int64_t{128}, int64_t{256}})
    for (int64_t nprobe : {int64_t{16}, int64_t{64}})
      EXPECT_EQ(compare(idx.get(), q, few, dim, 10, nprobe, nullptr, true), "") << "nq " << few << " nprobe " << nprobe;
}

TEST(GpuTensorScan, EqualsTheSimtScanOnNearDuplicates) {
  IVFTEST_REQUIRE_GPU();
  // 300 points, each 60 times: exact copies and copies moved by one to a few ulps of one
  // coordinate, so that hundreds of candidates lie within the TF32 error of the k-th. At 96
  // dimensions the resident bf16 pass; at 640 the staged pass, for fp32 rows on tf32 operands that
  // are not centred (list_tf32_ring_kernel, where the device has wgmma).
  for (int64_t dim : {int64_t{96}, int64_t{640}}) {
    const int64_t nlist = 16, nq = 2000;
    std::mt19937_64 rng(7);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> base(300 * dim);
    for (float& v : base) v = g(rng);
    std::vector<float> x;
    for (int64_t c = 0; c < 60; ++c)
      for (int64_t b = 0; b < 300; ++b) {
        std::vector<float> row(base.begin() + b * dim, base.begin() + (b + 1) * dim);
        if (c % 2 == 1) {
          float& v = row[static_cast<std::size_t>(rng() % dim)];
          for (uint64_t s = rng() % 4 + 1; s > 0; --s) v = std::nextafter(v, 2.0f * v + 1.0f);
        }
        x.insert(x.end(), row.begin(), row.end());
      }
    std::vector<float> q;
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t b = static_cast<int64_t>(rng() % 300);
      for (int64_t j = 0; j < dim; ++j) q.push_back(base[b * dim + j] + (i % 3 == 0 ? 0.0f : 1e-3f * g(rng)));
    }
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
      IndexPtr idx = cuda_index_of(dim, nlist, metric, IVF_DTYPE_F32, x);
      ASSERT_TRUE(idx);
      // Past k 128 the wide pruned pass: at nprobe 2 its seed is the whole scan, at 16 it seeds
      // from four probes.
      for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{32}, int64_t{64}, int64_t{100}, int64_t{1000}, int64_t{3000}})
        for (int64_t nprobe : {int64_t{2}, nlist})
          EXPECT_EQ(compare(idx.get(), q, nq, dim, k, nprobe), "")
              << "dim " << dim << " metric " << metric << " k " << k << " nprobe " << nprobe;
    }
  }
}

// Every row of a list ties every other: two points, 8,000 copies each. The pruned pass then
// cannot leave anything out: each query appends every row it scans, more than its 4,096
// entries hold, and is settled by a full exact scan (a warp list for k <= 32, shared-memory
// sorts past it); the answer is decided by candidate position.
TEST(GpuTensorScan, EqualsTheSimtScanWhenEveryRowTies) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 64, nlist = 2, nq = 500;
  std::mt19937_64 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> point(2 * dim);
  for (float& v : point) v = g(rng);
  std::vector<float> x;
  for (int64_t i = 0; i < 16000; ++i)
    x.insert(x.end(), point.begin() + (i % 2) * dim, point.begin() + (i % 2 + 1) * dim);
  std::vector<float> q;
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 0; j < dim; ++j) q.push_back(point[(i % 2) * dim + j] + 0.1f * g(rng));
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
    IndexPtr idx = cuda_index_of(dim, nlist, metric, IVF_DTYPE_F32, x);
    ASSERT_TRUE(idx);
    for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{32}, int64_t{100}})
      for (int64_t nprobe : {int64_t{1}, nlist})
        EXPECT_EQ(compare(idx.get(), q, nq, dim, k, nprobe), "")
            << "metric " << metric << " k " << k << " nprobe " << nprobe;
    // The full scan of an overflowed query leaves out what the scan excludes: removed rows
    // (every third) and a deny filter (every fifth id).
    ivf_filter* f = remove_thirds_deny_fifths(idx.get(), 16000);
    ASSERT_NE(f, nullptr);
    for (int64_t k : {int64_t{32}, int64_t{100}})
      EXPECT_EQ(compare(idx.get(), q, nq, dim, k, nlist, f), "")
          << "metric " << metric << " k " << k << ", removals and a filter";
    ivf_filter_free(f);
  }
}

// The wide pruned pass (k past 128) where every row ties: four points 3 e_i, 5,000 copies each,
// and queries that are zero in the points' four coordinates, so every row lies at the same
// distance (the same float: the sum reaches 9 at the fourth term either way) and the same inner
// product. Seeded by one probe, a query appends all 15,000 rows of the other three, more than its
// 8,192 entries, and is settled by the full exact scan; seeded by all four (the default at
// nprobe 4) the seed is the whole scan. Ties are decided by candidate position.
TEST(GpuTensorScan, WidePrunedPassEqualsTheSimtScanWhenEveryRowTies) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 64, nlist = 4, nq = 300, copies = 5000, n = 4 * copies;
  std::mt19937_64 rng(13);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n * dim), 0.0f);
  for (int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i * dim + i % 4)] = 3.0f;
  std::vector<float> q(static_cast<std::size_t>(nq * dim), 0.0f);
  for (int64_t i = 0; i < nq; ++i)
    for (int64_t j = 4; j < dim; ++j) q[static_cast<std::size_t>(i * dim + j)] = 0.1f * g(rng);
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
    IndexPtr idx = cuda_index_of(dim, nlist, metric, IVF_DTYPE_F32, x);
    ASSERT_TRUE(idx);
    // The sampled bound (every row within it: the entries overflow), and the SIMT seed.
    for (const char* sample : {"16", "0"}) {
      WideSamplePin sampled(sample);
      for (int seed : {1, 4}) {
        SeedProbesPin pin(seed);
        for (int64_t k : {int64_t{1000}, int64_t{4096}})
          EXPECT_EQ(compare(idx.get(), q, nq, dim, k, nlist), "")
              << "metric " << metric << " k " << k << " sample " << sample << " seed " << seed;
      }
    }
    // The full scan of an overflowed query leaves out removed rows (every third) and rows a deny
    // filter rejects (every fifth id).
    ivf_filter* f = remove_thirds_deny_fifths(idx.get(), n);
    ASSERT_NE(f, nullptr);
    for (const char* sample : {"16", "0"}) {
      WideSamplePin sampled(sample);
      SeedProbesPin pin(1);
      EXPECT_EQ(compare(idx.get(), q, nq, dim, 1000, nlist, f), "")
          << "metric " << metric << " k 1000, removals and a filter, sample " << sample;
    }
    ivf_filter_free(f);
  }
}

// The wide pass's bound is estimated from every n-th row of each probed list (32 by default),
// from a phase of the list's own (scan.cu, sampled_wide_bound; scan_tensor.hpp's sample_phase:
// list % n, so rows 0-3 of every n hold the samples of lists 0-3, whichever list a cluster
// became). Where those are the rows nearest the queries, fewer than k rows lie within it and the
// settle must scan the query in full; where they are the farthest, it lets nearly every row in
// and the entries overflow. Four tight clusters of 4,000 rows; in each, the rows at positions 0-3
// mod n (every list's sample among them) are close to the centre and the rest spread, or the
// rows at positions 4-7 are close and those at 0-3 among the spread ones. Both strides A/B runs
// compare (16 and 32) are pinned in turn.
TEST(GpuTensorScan, WidePassWhoseSampleMisleadsEqualsTheSimtScan) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 128, nlist = 4, per = 4000, nq = 200;
  std::mt19937_64 rng(17);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centre(static_cast<std::size_t>(nlist * dim));
  for (float& v : centre) v = 4.0f * g(rng);
  const auto row_near = [&](int64_t c, float spread, std::vector<float>& out) {
    for (int64_t j = 0; j < dim; ++j) out.push_back(centre[static_cast<std::size_t>(c * dim + j)] + spread * g(rng));
  };
  std::vector<float> q;
  for (int64_t i = 0; i < nq; ++i) row_near(i % nlist, 0.01f, q);
  for (const char* stride : {"16", "32"}) {
    WideSamplePin sampled(stride);
    const int64_t every = std::atoll(stride);
    for (bool close_sampled : {true, false}) {
      // Row i of each cluster is the i-th row its list receives (the clusters interleave).
      std::vector<float> x;
      const int64_t close_from = close_sampled ? 0 : 4;
      for (int64_t i = 0; i < per; ++i) {
        const bool close = i % every >= close_from && i % every < close_from + 4;
        for (int64_t c = 0; c < nlist; ++c) row_near(c, close ? 0.05f : 1.0f, x);
      }
      for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
        IndexPtr idx = cuda_index_of(dim, nlist, metric, IVF_DTYPE_F32, x);
        ASSERT_TRUE(idx);
        for (int64_t k : {int64_t{1000}, int64_t{3000}})
          for (int64_t nprobe : {int64_t{2}, nlist})
            EXPECT_EQ(compare(idx.get(), q, nq, dim, k, nprobe), "")
                << "every " << every << (close_sampled ? ", the samples close" : ", the samples spread")
                << ", metric " << metric << " k " << k << " nprobe " << nprobe;
      }
    }
  }
}

// The wide pass marks a pair by its own row's norm (scan_prune.cuh, wide_row_thresholds), not the
// row tile's largest: a margin that shrinks with the row. Four clusters far apart; in each, 2,000
// rows on a shell of radius 1 around the centre (each moved by a few ulps of one coordinate) and
// 500 rows 30 away, so that a tile's largest norm is ~30 times its shell rows'. Queries sit within
// ~0.01 of a centre: the shell's distances then differ by about the bf16 operands' error, which
// the per-row margin (smaller than the spread) must still cover for every row within the k-th.
// Both metrics, the rows' fp32 copy in shared memory (64 dimensions) and through L2 (200), and
// the tile-wide margin pinned (IVFGPU_WIDE_MARGIN=tile) as the A/B runs take it.
TEST(GpuTensorScan, WidePassMarksByEachRowsOwnNormOnMixedNorms) {
  IVFTEST_REQUIRE_GPU();
  const int64_t nlist = 4, per_list = 2500, nq = 400;  // every fifth row of a list far: 2,000 on the shell, 500 out
  for (int64_t dim : {int64_t{64}, int64_t{200}}) {
    std::mt19937_64 rng(19);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const auto unit = [&] {
      std::vector<float> u(static_cast<std::size_t>(dim));
      double n2 = 0.0;
      for (float& v : u) {
        v = g(rng);
        n2 += static_cast<double>(v) * v;
      }
      for (float& v : u) v = static_cast<float>(v / std::sqrt(n2));
      return u;
    };
    std::vector<float> centre(static_cast<std::size_t>(nlist * dim), 0.0f);
    for (int64_t c = 0; c < nlist; ++c) centre[static_cast<std::size_t>(c * dim + c)] = 200.0f;
    std::vector<float> x;
    for (int64_t i = 0; i < per_list; ++i)
      for (int64_t c = 0; c < nlist; ++c) {
        const std::vector<float> u = unit();
        const float radius = i % 5 == 4 ? 30.0f : 1.0f;  // 1 in 5 far: far rows share the shell's tiles
        std::vector<float> row(static_cast<std::size_t>(dim));
        for (int64_t j = 0; j < dim; ++j) row[j] = centre[static_cast<std::size_t>(c * dim + j)] + radius * u[j];
        float& v = row[static_cast<std::size_t>(rng() % dim)];
        for (uint64_t s = rng() % 4; s > 0; --s) v = std::nextafter(v, 2.0f * v + 1.0f);
        x.insert(x.end(), row.begin(), row.end());
      }
    std::vector<float> q;
    for (int64_t i = 0; i < nq; ++i)
      for (int64_t j = 0; j < dim; ++j)
        q.push_back(centre[static_cast<std::size_t>((i % nlist) * dim + j)] + 0.01f * g(rng) / std::sqrt(dim * 1.0f));
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
      IndexPtr idx = cuda_index_of(dim, nlist, metric, IVF_DTYPE_F32, x);
      ASSERT_TRUE(idx);
      for (const char* margin : {"row", "tile"}) {
        WideMarginPin pin(margin);
        for (int64_t k : {int64_t{1000}, int64_t{2000}})
          for (int64_t nprobe : {int64_t{1}, nlist})
            EXPECT_EQ(compare(idx.get(), q, nq, dim, k, nprobe), "")
                << "dim " << dim << " metric " << metric << " margin " << margin << " k " << k << " nprobe " << nprobe;
      }
    }
  }
}

TEST(GpuTensorScan, EqualsTheSimtScanForEveryTypeAndOddDimensions) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 20000, nlist = 32, nq = 3000;
  for (ivf_dtype t : {IVF_DTYPE_F32, IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8, IVF_DTYPE_I8})
    // 24: the resident pass's two-tile units of one slab (a one-slab wgmma batch); 200: an odd
    // slab count in one-tile units.
    for (int64_t dim : {int64_t{3}, int64_t{24}, int64_t{31}, int64_t{128}, int64_t{200}, int64_t{300}, int64_t{512}})
      for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
        std::vector<float> x = clustered_vectors(n, dim, 64, 10 + dim);
        std::vector<float> q = clustered_vectors(nq, dim, 64, 20 + dim);
        if (t == IVF_DTYPE_U8 || t == IVF_DTYPE_I8) {
          // Integers in range: the clustered values scaled, rounded and clamped.
          const float lo = t == IVF_DTYPE_U8 ? 0.0f : -128.0f, hi = t == IVF_DTYPE_U8 ? 255.0f : 127.0f;
          for (auto* v : {&x, &q})
            for (float& e : *v) e = std::min(hi, std::max(lo, std::nearbyint(e * 40.0f + (lo + hi) / 2.0f)));
        }
        IndexPtr idx = cuda_index_of(dim, nlist, metric, t, x);
        ASSERT_TRUE(idx);
        // k 200: the wide pass, its entries exact at 200 dimensions and re-scored by the settle
        // at the others (odd dimensions; past 256).
        for (int64_t k : {int64_t{1}, int64_t{32}, int64_t{50}, int64_t{200}})
          EXPECT_EQ(compare(idx.get(), q, nq, dim, k, 8), "")
              << "type " << t << " dim " << dim << " metric " << metric << " k " << k;
      }
}

// The staged pass past the resident tile's 512 dimensions (on wgmma list_pair_tile_kernel in
// 128-row steps for f16 and bf16 rows, list_tf32_ring_kernel for f32 rows; list_mma_kernel without
// wgmma and under IVFGPU_STAGED_ROWS=64) where a list holds several row chunks (~4,000 rows a
// list: eight chunks of 512 rows) and several 64-query tiles (~670 queries a list): its units run through a list's
// query tiles before its chunks, so each (query tile, chunk) unit must be reached once. Both
// metrics, f32, f16 and bf16 rows, k 10 and 100 (each through the pruned and the keys pass:
// compare pins both), then every third id removed and a filter denying every fifth; at 640
// dimensions (whole slices) and 580 (a last slab of four dimensions). The tf32 ring's units hold
// two query tiles here (~670 queries a list: the last unit of a list one tile of ~30 queries, its
// second tile empty); gpu_tensor_scan_ring1_test runs this with one-tile units.
TEST(GpuTensorScan, StagedPassEqualsTheSimtScanOnLongListsWithManyQueryTiles) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 24000, nlist = 6, nq = 2000, nprobe = 2;
  for (int64_t dim : {int64_t{640}, int64_t{580}}) {
    const std::vector<float> x = clustered_vectors(n, dim, 6, 70);
    const std::vector<float> q = clustered_vectors(nq, dim, 6, 71);
    for (ivf_dtype t : {IVF_DTYPE_F32, IVF_DTYPE_F16, IVF_DTYPE_BF16})
      for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
        IndexPtr idx = cuda_index_of(dim, nlist, metric, t, x);
        ASSERT_TRUE(idx);
        for (int64_t k : {int64_t{10}, int64_t{100}})
          EXPECT_EQ(compare(idx.get(), q, nq, dim, k, nprobe), "")
              << "type " << t << " metric " << metric << " dim " << dim << " k " << k;
        ivf_filter* f = remove_thirds_deny_fifths(idx.get(), n);
        ASSERT_NE(f, nullptr);
        EXPECT_EQ(compare(idx.get(), q, nq, dim, 10, nprobe, f), "") << "type " << t << " metric " << metric
                                                                      << " dim " << dim << ", removals and a filter";
        ivf_filter_free(f);
      }
  }
}

// The f16 seed (k <= 16, f32 queries, four-element rows: scan_seed_f16.cuh) at shapes the tests
// above do not reach: dimensions off a multiple of 16 (100), past the resident tile (960) and
// past the staged pass's centring (1,100); lists shorter than k (about 24 rows a list, so that
// many queries' first probes hold fewer than k rows and start without a bound); a seed of three
// probes; both metrics; and data scaled to 1e-6 (f16 subnormals: a margin wider than the data's
// gaps, so queries are flagged and scanned exactly) and to 1e6 (past the f16 range: about 85% of
// the centred coordinates, and most uncentred ones, exceed 65,504, so every row's costs are not
// finite and every query is flagged; by construction, the tree counts no flags), whose ~2,500-row
// lists the flagged queries' exact scan cuts into three chunks a probe (kFlaggedRows). Also the
// smallest and largest dimensions it takes: 4 (three of a row's four lanes copy zeros into their
// rings) and 2,048 (kF16SeedMaxDim: 120 KiB of shared memory a block with f32 rows). Each
// against the SIMT scan, and against the SIMT seed (IVFGPU_SEED=simt) too.
TEST(GpuTensorScan, F16SeedEqualsTheSimtScan) {
  IVFTEST_REQUIRE_GPU();
  struct Shape {
    int64_t dim, n, nlist;
    float scale;
  };
  const int64_t nq = 1500;
  for (const Shape& sh : {Shape{100, 30000, 64, 1.0f}, Shape{960, 12000, 32, 1.0f}, Shape{1100, 8000, 16, 1.0f},
                          Shape{128, 6000, 256, 1.0f}, Shape{128, 20000, 32, 1e-6f}, Shape{128, 20000, 8, 1e6f},
                          Shape{4, 8000, 16, 1.0f}, Shape{2048, 3000, 8, 1.0f}}) {
    std::vector<float> x = clustered_vectors(sh.n, sh.dim, 64, 40 + sh.dim);
    std::vector<float> q = clustered_vectors(nq, sh.dim, 64, 50 + sh.dim);
    for (auto* v : {&x, &q})
      for (float& e : *v) e *= sh.scale;
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
      IndexPtr idx = cuda_index_of(sh.dim, sh.nlist, metric, IVF_DTYPE_F32, x);
      ASSERT_TRUE(idx);
      const std::string shape = "dim " + std::to_string(sh.dim) + " scale " + std::to_string(sh.scale) + " metric " +
                                std::to_string(metric);
      for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{16}}) {  // kF16SeedMaxK: 16
        EXPECT_EQ(compare(idx.get(), q, nq, sh.dim, k, 8, nullptr, true), "") << shape << " k " << k;
        {
          SeedProbesPin pin(3);
          EXPECT_EQ(compare(idx.get(), q, nq, sh.dim, k, 8), "") << shape << " k " << k << ", three seed probes";
        }
        setenv("IVFGPU_SEED", "simt", 1);
        EXPECT_EQ(compare(idx.get(), q, nq, sh.dim, k, 8), "") << shape << " k " << k << ", the SIMT seed";
        unsetenv("IVFGPU_SEED");
      }
    }
  }
}

// The native pass (pruned_kernel.hpp, resident_native): f16 or bf16 queries on rows of their type
// go to the tensor cores as they are, uncentred, f16 on f16 tensor cores, and the margin bounds the
// sums alone (margin_terms_exact_operands); for f16 at k 1 and 10 the f16 seed likewise
// (seed_native). It and the bf16 pass on the same batch (IVFGPU_NATIVE16=0) each against the
// SIMT scan, both metrics, k 1 to 128, at dimensions of the resident pass's
// two-tile (32), four-tile (128) and one-tile (200, 512) units; at 128 dimensions also data scaled
// to 1e-6 (f16 subnormals, which the tensor cores may flush: the margin's s and c terms), f16 data
// up to +-60,000 (products past 2^31, sums near fp32's spacing of 2^9 there) and near-duplicates (a
// few rows repeated with each coordinate moved by about an f16 ulp: ties and near-ties within the
// sums' error everywhere).
TEST(GpuTensorScan, NativePassEqualsTheSimtScan) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 20000, nlist = 32, nq = 2000, nprobe = 8;
  enum class Data { Clustered, Subnormal, Large, NearDuplicates };
  struct Case {
    int64_t dim;
    Data data;
  };
  for (ivf_dtype t : {IVF_DTYPE_F16, IVF_DTYPE_BF16})
    for (const Case& c : {Case{32, Data::Clustered}, Case{128, Data::Clustered}, Case{200, Data::Clustered},
                          Case{512, Data::Clustered}, Case{128, Data::Subnormal}, Case{128, Data::Large},
                          Case{128, Data::NearDuplicates}}) {
      const int64_t dim = c.dim;
      std::vector<float> x = clustered_vectors(n, dim, 64, 80 + dim);
      std::vector<float> q = clustered_vectors(nq, dim, 64, 90 + dim);
      if (c.data == Data::NearDuplicates) {
        std::mt19937 rng(7);
        std::uniform_int_distribution<int> nudge(-2, 2);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < dim; ++j) {
            const float v = x[(i % 40) * dim + j];
            x[i * dim + j] = v * (1.0f + static_cast<float>(nudge(rng)) / 1024.0f);
          }
      }
      const float scale = c.data == Data::Subnormal ? 1e-6f : c.data == Data::Large ? 12000.0f : 1.0f;
      for (auto* v : {&x, &q})
        for (float& e : *v) e = std::clamp(e * scale, -60000.0f, 60000.0f);
      // The queries in the storage type (rounded to nearest even), as a caller holding f16 or bf16
      // embeddings passes them: then, and only then, the native pass runs.
      const typed::Bytes qs = typed::encode(q, t);
      const std::string shape = std::string(t == IVF_DTYPE_F16 ? "f16" : "bf16") + " dim " + std::to_string(dim) +
                                " data " + std::to_string(static_cast<int>(c.data));
      for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
        if (c.data == Data::Large && t == IVF_DTYPE_BF16) continue;  // bf16 has fp32's range: nothing new
        IndexPtr idx = cuda_index_of(dim, nlist, metric, t, x);
        ASSERT_TRUE(idx);
        for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{100}, int64_t{128}}) {
          const Searched simt = search_with("simt", idx.get(), qs.data(), t, nq, dim, k, nprobe);
          const Searched native = search_with("tensor", idx.get(), qs.data(), t, nq, dim, k, nprobe);
          EXPECT_EQ(same_results(native.ids, native.dists, simt.ids, simt.dists, nq, k), "")
              << shape << " metric " << metric << " k " << k;
          setenv("IVFGPU_NATIVE16", "0", 1);
          const Searched bf16 = search_with("tensor", idx.get(), qs.data(), t, nq, dim, k, nprobe);
          unsetenv("IVFGPU_NATIVE16");
          EXPECT_EQ(same_results(bf16.ids, bf16.dists, simt.ids, simt.dists, nq, k), "")
              << shape << " metric " << metric << " k " << k << ", the bf16 operands";
        }
      }
    }
}

// The tensor kernels' blocks take their work units from a queue, largest list first
// (next_block_unit); IVFGPU_UNITS=static gives each block every gridDim-th unit in list order. Either
// way each seed and pass must equal the SIMT scan: the f16 seed and the resident pass (f32 d 128),
// the tf32 ring (f32 d 960), the pair-tile pass (f16 rows d 640), the int8 seed and pass (uint8
// rows and queries), and the wide pass (k 300), on clustered lists of unequal sizes.
TEST(GpuTensorScan, EitherWorkUnitOrderEqualsTheSimtScan) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 20000, nlist = 32, nq = 1500;
  struct Shape {
    int64_t dim;
    ivf_dtype type;
  };
  for (const char* units : {"static", "queue"}) {
    const StaticUnitsPin pin(std::string(units) == "static");
    for (const Shape& sh : {Shape{128, IVF_DTYPE_F32}, Shape{960, IVF_DTYPE_F32}, Shape{640, IVF_DTYPE_F16},
                            Shape{128, IVF_DTYPE_U8}}) {
      std::vector<float> x = clustered_vectors(n, sh.dim, 64, 80 + sh.dim), q = clustered_vectors(nq, sh.dim, 64, 81);
      const bool integer = sh.type == IVF_DTYPE_U8;
      if (integer)
        for (auto* v : {&x, &q})
          for (float& e : *v) e = std::min(255.0f, std::max(0.0f, std::nearbyint(e * 40.0f + 128.0f)));
      std::vector<uint8_t> qb(q.begin(), q.end());
      for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
        IndexPtr idx = cuda_index_of(sh.dim, nlist, metric, sh.type, x);
        ASSERT_TRUE(idx);
        for (int64_t k : {int64_t{10}, int64_t{300}}) {
          const std::string where = std::string(units) + " units, dim " + std::to_string(sh.dim) + " type " +
                                    std::to_string(sh.type) + " metric " + std::to_string(metric) + " k " +
                                    std::to_string(k);
          if (integer)
            EXPECT_EQ(compare_integer(idx.get(), qb.data(), IVF_DTYPE_U8, nq, sh.dim, k, 16), "") << where;
          else
            EXPECT_EQ(compare(idx.get(), q, nq, sh.dim, k, 16, nullptr, true), "") << where;
        }
      }
    }
  }
}

// Rows excluded inside the scan (removed ones, a filter's), cosine, and integer queries on
// integer rows (exact integer re-scoring) take the same path through the refinement.
TEST(GpuTensorScan, EqualsTheSimtScanWithRemovalsFiltersCosineAndIntegerQueries) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 30000, nlist = 32, nq = 2000;
  // 128 dimensions: the resident pass's units of four query tiles (resident_query_tiles); 200: one.
  for (int64_t dim : {int64_t{128}, int64_t{200}}) {
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_COSINE}) {
      const std::vector<float> x = clustered_vectors(n, dim, 64, 31);
      const std::vector<float> q = clustered_vectors(nq, dim, 64, 32);
      IndexPtr idx = cuda_index_of(dim, nlist, metric, IVF_DTYPE_F32, x);
      ASSERT_TRUE(idx);
      std::vector<int64_t> gone;
      for (int64_t i = 0; i < n; i += 5) gone.push_back(i);  // a fifth: kept as removed bits, not compacted
      int64_t removed = 0;
      ASSERT_EQ(ivf_remove(idx.get(), nullptr, gone.data(), static_cast<int64_t>(gone.size()), &removed), IVF_OK)
          << ivf_last_error_message();
      ASSERT_EQ(removed, static_cast<int64_t>(gone.size()));
      std::vector<int64_t> allowed;
      for (int64_t i = 0; i < n; i += 7) allowed.push_back(i);
      for (ivf_filter_mode mode : {IVF_FILTER_ALLOW, IVF_FILTER_DENY}) {
        ivf_filter* f = nullptr;
        ASSERT_EQ(ivf_filter_create(&f, allowed.data(), static_cast<int64_t>(allowed.size()), mode), IVF_OK);
        for (int64_t k : {int64_t{10}, int64_t{200}})
          EXPECT_EQ(compare(idx.get(), q, nq, dim, k, 8, f), "")
              << "dim " << dim << " metric " << metric << " mode " << mode << " k " << k;
        ivf_filter_free(f);
      }
      EXPECT_EQ(compare(idx.get(), q, nq, dim, 10, 8), "")
          << "dim " << dim << " metric " << metric << ", removals only";
    }
  }
  // uint8 rows, uint8 queries: exact integers both ways.
  const int64_t dim = 200;
  std::vector<float> xi = clustered_vectors(n, dim, 64, 33), qi = clustered_vectors(nq, dim, 64, 34);
  for (auto* v : {&xi, &qi})
    for (float& e : *v) e = std::min(255.0f, std::max(0.0f, std::nearbyint(e * 40.0f + 128.0f)));
  std::vector<uint8_t> q8(qi.begin(), qi.end());
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
    IndexPtr idx = cuda_index_of(dim, nlist, metric, IVF_DTYPE_U8, xi);
    ASSERT_TRUE(idx);
    for (int64_t k : {int64_t{1}, int64_t{100}})
      EXPECT_EQ(compare_raw(idx.get(), q8.data(), IVF_DTYPE_U8, nq, dim, k, 8), "")
          << "uint8 queries, metric " << metric << " k " << k;
  }
}

// Integer queries on integer rows: the pruned pass on int8 tensor cores (scan_imma.cuh) for
// dimensions that are multiples of 16 up to 1,024 (one slab, two, a partial last slab, several
// slices), against the SIMT scan's exact integer distances, both metrics, k past one tile's 64
// rows; then data where every query's k-th cost is tied many times over (rows from 40 distinct
// points, so the tie order by candidate position decides) with removals and a filter. Integer
// queries of a dimension off the multiple (200) take the bf16 form: both ways checked.
TEST(GpuTensorScan, IntegerPassEqualsTheSimtScan) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 20000, nlist = 32, nq = 1500;
  for (ivf_dtype t : {IVF_DTYPE_U8, IVF_DTYPE_I8}) {
    const float lo = t == IVF_DTYPE_U8 ? 0.0f : -128.0f, hi = t == IVF_DTYPE_U8 ? 255.0f : 127.0f;
    const auto to_type = [&](std::vector<float>& v) {
      for (float& e : v) e = std::min(hi, std::max(lo, std::nearbyint(e * 40.0f + (lo + hi) / 2.0f)));
    };
    // 160: four-tile units of three slabs (the later tiles' wgmma batch one slab short).
    for (int64_t dim :
         {int64_t{16}, int64_t{64}, int64_t{128}, int64_t{160}, int64_t{200}, int64_t{208}, int64_t{784}}) {
      std::vector<float> x = clustered_vectors(n, dim, 64, 40 + dim), q = clustered_vectors(nq, dim, 64, 50 + dim);
      to_type(x);
      to_type(q);
      std::vector<uint8_t> qb(q.size());
      for (std::size_t i = 0; i < q.size(); ++i) qb[i] = static_cast<uint8_t>(static_cast<int>(q[i]));
      for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
        IndexPtr idx = cuda_index_of(dim, nlist, metric, t, x);
        ASSERT_TRUE(idx);
        // k up to 32: seeded by the int8 seed (scan_seed.cuh), 64 and 100 by the SIMT scan; k 300:
        // the wide pass (int8: exact entries; bf16 pinned: the settle's integer re-scoring).
        for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{32}, int64_t{64}, int64_t{100}, int64_t{300}})
          EXPECT_EQ(compare_integer(idx.get(), qb.data(), t, nq, dim, k, 8), "")
              << "type " << t << " dim " << dim << " metric " << metric << " k " << k;
      }
    }
    // Lists shorter than k (~23 rows a list): many queries' first probes hold fewer than k rows;
    // and seeds of three probes, whose rows a query's lanes keep across lists.
    {
      const int64_t dim = 64;
      std::vector<float> x = clustered_vectors(3000, dim, 64, 70), q = clustered_vectors(nq, dim, 64, 71);
      to_type(x);
      to_type(q);
      std::vector<uint8_t> qb(q.size());
      for (std::size_t i = 0; i < q.size(); ++i) qb[i] = static_cast<uint8_t>(static_cast<int>(q[i]));
      for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
        IndexPtr idx = cuda_index_of(dim, 128, metric, t, x);
        ASSERT_TRUE(idx);
        for (int64_t k : {int64_t{10}, int64_t{32}}) {
          EXPECT_EQ(compare_integer(idx.get(), qb.data(), t, nq, dim, k, 8), "")
              << "short lists, type " << t << " metric " << metric << " k " << k;
          SeedProbesPin pin(3);
          EXPECT_EQ(compare_integer(idx.get(), qb.data(), t, nq, dim, k, 8), "")
              << "short lists, three seed probes, type " << t << " metric " << metric << " k " << k;
        }
      }
    }
    // Ties: 40 distinct rows, 500 copies each; queries near them.
    const int64_t dim = 96;
    std::vector<float> points = clustered_vectors(40, dim, 8, 60), x, q = clustered_vectors(nq, dim, 8, 61);
    to_type(points);
    to_type(q);
    for (int64_t i = 0; i < n; ++i) x.insert(x.end(), points.begin() + (i % 40) * dim, points.begin() + (i % 40 + 1) * dim);
    std::vector<uint8_t> qb(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) qb[i] = static_cast<uint8_t>(static_cast<int>(q[i]));
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
      IndexPtr idx = cuda_index_of(dim, 8, metric, t, x);
      ASSERT_TRUE(idx);
      for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{100}})
        EXPECT_EQ(compare_integer(idx.get(), qb.data(), t, nq, dim, k, 4), "")
            << "ties, type " << t << " metric " << metric << " k " << k;
      ivf_filter* f = remove_thirds_deny_fifths(idx.get(), n);
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(compare_integer(idx.get(), qb.data(), t, nq, dim, 10, 4, f), "")
          << "ties with removals and a filter, type " << t << " metric " << metric;
      ivf_filter_free(f);
    }
    // Every row of a list ties: two points, 6,000 copies each. The int8 seed's lanes must drop
    // rows that tie the k-th, so for k <= 32 every query is flagged and scanned again exactly
    // (seed_flagged_kernel; by construction: no counter shows it); past k 32 the pass appends
    // every row, more than the 4,096 entries hold, and the query is settled by the full exact
    // scan; nprobe 1 is the seed alone.
    std::vector<float> two = clustered_vectors(2, dim, 2, 62), xt;
    to_type(two);
    for (int64_t i = 0; i < 12000; ++i) xt.insert(xt.end(), two.begin() + (i % 2) * dim, two.begin() + (i % 2 + 1) * dim);
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
      IndexPtr idx = cuda_index_of(dim, 2, metric, t, xt);
      ASSERT_TRUE(idx);
      for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{64}})
        for (int64_t nprobe : {int64_t{1}, int64_t{2}})
          EXPECT_EQ(compare_integer(idx.get(), qb.data(), t, nq, dim, k, nprobe), "")
              << "all ties, type " << t << " metric " << metric << " k " << k << " nprobe " << nprobe;
      ivf_filter* f = remove_thirds_deny_fifths(idx.get(), 12000);
      ASSERT_NE(f, nullptr);
      EXPECT_EQ(compare_integer(idx.get(), qb.data(), t, nq, dim, 10, 2, f), "")
          << "all ties with removals and a filter, type " << t << " metric " << metric;
      ivf_filter_free(f);
    }
  }
}

// The wide pass at the large k the dispatch gives it (k 1000 and 4,096, up to kPruneMaxK since
// session 73) on compact rows, which the other tests take only to k 300: uint8 rows with uint8
// queries (the int8 pass, exact integers), uint8 rows with f32 queries, and f16 and bf16 rows with
// f32 queries (the bf16 pass, re-scored exactly), in a batch of 8,192 queries so that "auto" takes
// the wide pass too.
TEST(GpuTensorScan, WidePassOnCompactRowsEqualsTheSimtScanAtLargeK) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 200000, dim = 128, nlist = 256, nq = 8192, nprobe = 16;
  for (ivf_dtype t : {IVF_DTYPE_U8, IVF_DTYPE_F16, IVF_DTYPE_BF16}) {
    const bool integer = t == IVF_DTYPE_U8;
    std::vector<float> x = clustered_vectors(n, dim, 512, 31), q = clustered_vectors(nq, dim, 512, 32);
    if (integer) {
      x = as_uint8_values(std::move(x));
      q = as_uint8_values(std::move(q));
    }
    IndexPtr idx = cuda_index_of(dim, nlist, IVF_METRIC_L2, t, x);
    ASSERT_TRUE(idx);
    for (int64_t k : {int64_t{1000}, int64_t{4096}}) {
      EXPECT_EQ(compare(idx.get(), q, nq, dim, k, nprobe, nullptr, true), "") << "type " << t << " k " << k;
      if (integer) {  // the same values as uint8 queries: the int8 pass
        const std::vector<uint8_t> qb(q.begin(), q.end());
        EXPECT_EQ(compare_raw(idx.get(), qb.data(), IVF_DTYPE_U8, nq, dim, k, nprobe, nullptr, true), "")
            << "uint8 queries, k " << k;
      }
    }
  }
}

// The int8 pass on the million-row mixture as integers (uint8 rows and queries): its own seed
// over each query's first probe (k <= 64) and the SIMT seed past it, against the SIMT scan.
TEST(GpuTensorScan, IntegerPassEqualsTheSimtScanOnAMillionRows) {
  IVFTEST_REQUIRE_GPU();
  const int64_t n = 1000000, dim = 128, nlist = 1024, nq = 10000;
  const std::vector<float> x = as_uint8_values(clustered_vectors(n, dim, 2048, 3));
  const std::vector<float> q = as_uint8_values(clustered_vectors(nq, dim, 2048, 4));
  std::vector<uint8_t> qb(q.begin(), q.end());
  IndexPtr idx = cuda_index_of(dim, nlist, IVF_METRIC_L2, IVF_DTYPE_U8, x);
  ASSERT_TRUE(idx);
  for (int64_t k : {int64_t{10}, int64_t{64}, int64_t{100}})
    EXPECT_EQ(compare_raw(idx.get(), qb.data(), IVF_DTYPE_U8, nq, dim, k, 16, nullptr, true), "") << "k " << k;
}
