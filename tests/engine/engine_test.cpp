// The CPU reference pieces the rest is checked against: top-k, brute force, k-means, sampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include "common/test_util.hpp"
#include "common/brute_force.hpp"
#include "core/cpu/distances.hpp"
#include "core/cpu/kmeans.hpp"
#include "core/element_codec.hpp"
#include "core/element_convert.hpp"
#include "core/list_layout.hpp"
#include "core/cpu/topk.hpp"
#include "core/vector_ops.hpp"

using namespace ivfgpu;

// The seeds' unit order (lists_by_size) and the plan's longest rows (largest_lists_prefix) both
// rank lists by size: largest first, equal sizes in id order, empty lists last.
TEST(ListLayout, ListsBySizeLargestFirstTiesById) {
  const std::vector<int64_t> sizes{5, 0, 9, 5, 12, 0, 9};
  EXPECT_EQ(lists_by_size(sizes), (std::vector<int32_t>{4, 2, 6, 0, 3, 1, 5}));
  EXPECT_EQ(largest_lists_prefix(sizes), (std::vector<int64_t>{0, 12, 21, 30, 35, 40, 40, 40}));
  EXPECT_TRUE(lists_by_size({}).empty());
  EXPECT_EQ(lists_by_size({0, 0, 0}), (std::vector<int32_t>{0, 1, 2}));
  // Random sizes over every radix pass (past 2^16, 2^32 and 2^48) and many ties, against a
  // comparison sort; the prefix against the sorted sizes' running sum.
  std::mt19937_64 rng(7);
  for (int64_t top : {int64_t{40}, int64_t{1} << 20, int64_t{1} << 40, int64_t{1} << 52}) {
    std::vector<int64_t> many(3000);
    for (int64_t& v : many) v = static_cast<int64_t>(rng() % static_cast<uint64_t>(top));
    for (std::size_t i = 0; i < many.size(); i += 7) many[i] = many[i / 2];  // ties
    std::vector<int32_t> expect(many.size());
    std::iota(expect.begin(), expect.end(), 0);
    std::stable_sort(expect.begin(), expect.end(), [&](int32_t a, int32_t b) { return many[a] > many[b]; });
    EXPECT_EQ(lists_by_size(many), expect) << "sizes below " << top;
    std::vector<int64_t> sorted(many);
    std::sort(sorted.rbegin(), sorted.rend());
    std::vector<int64_t> prefix(1, 0);
    for (int64_t v : sorted) prefix.push_back(prefix.back() + v);
    EXPECT_EQ(largest_lists_prefix(many), prefix) << "sizes below " << top;
  }
}

TEST(TopK, KeepsTheBestSortedAndBreaksTiesBySmallerId) {
  TopK top(3, false);
  const float d[] = {5, 1, 3, 1, 9, 0.5f};
  for (int i = 0; i < 6; ++i) top.push(d[i], 10 + i);
  int64_t ids[3];
  float out[3];
  top.write(ids, out);
  EXPECT_EQ(ids[0], 15);
  EXPECT_EQ(ids[1], 11) << "tie at 1: smaller id first";
  EXPECT_EQ(ids[2], 13);
  EXPECT_EQ(out[2], 1.0f);
}

TEST(TopK, LargerIsBetterAndPadding) {
  TopK top(4, true);
  top.push(1, 1);
  top.push(3, 2);
  int64_t ids[4];
  float out[4];
  top.write(ids, out);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 1);
  EXPECT_EQ(ids[2], -1);
  EXPECT_EQ(out[3], -std::numeric_limits<float>::infinity());
}

TEST(BruteForce, MatchesANaiveScan) {
  const int64_t nb = 300, nq = 7, dim = 5, k = 9;
  auto base = ivftest::random_vectors(nb, dim, 1);
  auto q = ivftest::random_vectors(nq, dim, 2);
  std::vector<int64_t> ids(nq * k);
  std::vector<float> d(nq * k);
  ivftest::exact_knn(base.data(), nb, q.data(), nq, dim, k, Metric::L2, ids.data(), d.data(), 3);
  for (int64_t i = 0; i < nq; ++i) {
    std::vector<std::pair<double, int64_t>> all;
    for (int64_t j = 0; j < nb; ++j) {
      double s = 0;
      for (int64_t c = 0; c < dim; ++c) s += std::pow(double(q[i * dim + c]) - base[j * dim + c], 2);
      all.push_back({s, j});
    }
    std::sort(all.begin(), all.end());
    for (int64_t r = 0; r < k; ++r) {
      EXPECT_EQ(ids[i * k + r], all[r].second);
      EXPECT_NEAR(d[i * k + r], all[r].first, 1e-4 * std::max(1.0, all[r].first));
    }
  }
}

TEST(KMeans, IsDeterministicAndFindsSeparatedClusters) {
  const int64_t dim = 16, k = 8, n = 4000;
  auto x = ivftest::clustered_vectors(n, dim, k, 3);
  std::vector<float> a(k * dim), b(k * dim);
  cpu::kmeans(x.data(), n, dim, k, Metric::L2, 20, 77, a.data());
  cpu::kmeans(x.data(), n, dim, k, Metric::L2, 20, 77, b.data());
  EXPECT_EQ(a, b) << "same seed, same centroids";
  // Every point should be close to some centroid (well-separated mixture, spread 0.35).
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double best = 1e30;
    for (int64_t c = 0; c < k; ++c) {
      double s = 0;
      for (int64_t j = 0; j < dim; ++j) s += std::pow(double(x[i * dim + j]) - a[c * dim + j], 2);
      best = std::min(best, s);
    }
    worst += best;
  }
  EXPECT_LT(worst / n, 0.35 * 0.35 * dim * 2.5) << "mean squared error too large: clusters not found";
}

TEST(KMeans, EmptyClustersAreReseeded) {
  // 6 distinct points, 3 of them duplicated many times, k = 6: every centroid must end up used
  // and distinct even though random initial picks collide on duplicates.
  const int64_t dim = 2, k = 6;
  std::vector<float> x;
  for (int rep = 0; rep < 50; ++rep) x.insert(x.end(), {0, 0, 10, 10, -10, 5});
  x.insert(x.end(), {100, 100, -100, 100, 100, -100});
  const int64_t n = static_cast<int64_t>(x.size()) / dim;
  std::vector<float> c(k * dim);
  cpu::kmeans(x.data(), n, dim, k, Metric::L2, 10, 5, c.data());
  std::set<std::pair<float, float>> distinct;
  for (int64_t i = 0; i < k; ++i) distinct.insert({c[i * dim], c[i * dim + 1]});
  EXPECT_EQ(distinct.size(), static_cast<std::size_t>(k));
  for (float v : c) EXPECT_TRUE(std::isfinite(v));
}

TEST(Sampling, CapsAndIsSeeded) {
  auto x = ivftest::random_vectors(1000, 3, 4);
  auto a = sample_rows(x.data(), 1000, 3, 100, 9);
  auto b = sample_rows(x.data(), 1000, 3, 100, 9);
  auto c = sample_rows(x.data(), 1000, 3, 100, 10);
  EXPECT_EQ(a.size(), 300u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(sample_rows(x.data(), 50, 3, 100, 9).size(), 150u);
}

TEST(VectorOps, NonFiniteRowsAndNormalisation) {
  std::vector<float> x = {1, 2, 3, 4, 0, 0};
  EXPECT_EQ(first_non_finite_row(x.data(), 3, 2), -1);
  x[3] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_non_finite_row(x.data(), 3, 2), 1);
  auto u = normalized_copy(x.data() + 0, 1, 2);
  EXPECT_NEAR(u[0] * u[0] + u[1] * u[1], 1.0f, 1e-6f);
  std::vector<float> zero = {0, 0};
  EXPECT_EQ(normalized_copy(zero.data(), 1, 2), zero);
}

// first_unusable_row sums eight rows at once on x86; it must refuse exactly the rows a sum per
// row in dimension order refuses, and name the first, for rows at the edge of the bound, NaN
// and Inf anywhere, every dimension (the tail past a multiple of four) and every row count
// (the rows past a multiple of eight).
TEST(VectorOps, FirstUnusableRowEqualsAPerRowSumAtTheEdge) {
  const auto reference = [](const float* x, int64_t n, int64_t dim, bool bounded, bool* non_finite) -> int64_t {
    for (int64_t i = 0; i < n; ++i) {
      float s = 0.0f;
      bool finite = true;
      for (int64_t j = 0; j < dim; ++j) {
        const float v = x[i * dim + j];
        const volatile float sq = v * v;  // rounded, never fused with the add
        s += sq;
        finite = finite && std::isfinite(v);
      }
      if (!(s <= kMaxSquaredNorm) && (!finite || bounded)) {
        *non_finite = !finite;
        return i;
      }
    }
    return -1;
  };
  std::mt19937_64 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  int64_t refused = 0;
  for (int64_t dim : {1, 3, 4, 7, 8, 13, 128}) {
    // Scaled so that a row's squared norm lands near the bound about half the time.
    const float scale = std::sqrt(kMaxSquaredNorm / static_cast<float>(dim)) * 0.99f;
    for (int trial = 0; trial < 300; ++trial) {
      const int64_t n = 1 + trial % 23;
      std::vector<float> x(static_cast<std::size_t>(n * dim));
      for (auto& v : x) v = g(rng) * scale;
      if (trial % 7 == 0) x[rng() % x.size()] = std::numeric_limits<float>::quiet_NaN();
      if (trial % 11 == 0) x[rng() % x.size()] = -std::numeric_limits<float>::infinity();
      for (bool bounded : {true, false}) {
        bool got_nf = false, want_nf = false;
        const int64_t got = first_unusable_row(x.data(), n, dim, bounded, &got_nf);
        const int64_t want = reference(x.data(), n, dim, bounded, &want_nf);
        ASSERT_EQ(got, want) << "dim " << dim << " n " << n << " trial " << trial << " bounded " << bounded;
        if (want >= 0) {
          EXPECT_EQ(got_nf, want_nf);
          ++refused;
        }
      }
    }
  }
  EXPECT_GT(refused, 500) << "the data must exercise refusals";
  // Rows exactly at the edge: a scale found by bisection such that the per-row sum passes at
  // `lo` and fails at `hi`, one float apart. Any other order of additions flips about half of
  // these, so the fast path must add in the reference's order.
  int64_t edges = 0;
  for (int64_t dim : {3, 8, 13, 128}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> shape(static_cast<std::size_t>(dim));
      for (auto& v : shape) v = g(rng);
      const auto row_at = [&](float c) {
        std::vector<float> r(shape.size());
        for (std::size_t j = 0; j < r.size(); ++j) r[j] = shape[j] * c;
        return r;
      };
      const auto passes = [&](float c) {
        bool nf = false;
        const std::vector<float> r = row_at(c);
        return reference(r.data(), 1, dim, true, &nf) < 0;
      };
      float lo = 0.0f, hi = 1e20f;
      while (std::nextafter(lo, hi) < hi) {
        const float mid = lo + (hi - lo) / 2;
        if (mid <= lo || mid >= hi) break;
        (passes(mid) ? lo : hi) = mid;
      }
      if (!passes(lo) || passes(hi)) continue;
      for (float c : {lo, hi}) {
        // The edge row among 15 small rows, at a position that varies over the 8-row blocks.
        std::vector<float> x(static_cast<std::size_t>(16 * dim), 0.5f);
        const int64_t at = trial % 16;
        const std::vector<float> r = row_at(c);
        std::copy(r.begin(), r.end(), x.begin() + at * dim);
        bool got_nf = false, want_nf = false;
        ASSERT_EQ(first_unusable_row(x.data(), 16, dim, true, &got_nf), reference(x.data(), 16, dim, true, &want_nf))
            << "dim " << dim << " trial " << trial << " scale " << c;
      }
      ++edges;
    }
  }
  EXPECT_GT(edges, 100) << "the bisection must find edge rows";
}

// A large f32 matrix is checked on several threads in blocks of rows (element_convert.cpp); the
// answer is still the first refused row and why, wherever the refused rows fall: in one block,
// in several (an earlier block's row wins over a later block's, whichever thread ends first), at
// a block's first or last row, or nowhere.
TEST(VectorOps, ThreadedCheckNamesTheFirstRefusedRow) {
  const int64_t dim = 64, n = 100003;  // 25.6 MB: several blocks of 4 MiB
  std::mt19937_64 rng(9);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  for (auto& v : x) v = g(rng);
  const auto check = [&](bool bounded, bool* non_finite) {
    return ivfgpu::first_unusable(ivfgpu::MatrixView::host_f32(x.data(), n, dim), bounded, non_finite);
  };
  bool nf = true;
  EXPECT_EQ(check(true, &nf), -1);
  const float nan = std::nanf(""), huge = 1e19f;
  const int64_t block = (int64_t{4} << 20) / (dim * 4);  // rows a thread takes at least
  struct Plant {
    int64_t row;
    float value;
  };
  const std::vector<std::vector<Plant>> cases = {
      {{n - 1, nan}},
      {{block * 5 + 3, huge}, {block * 2, nan}},
      {{block, huge}, {block - 1, huge}, {n - 2, nan}},
      {{0, nan}, {n / 2, nan}},
      {{n / 3, huge}},
  };
  for (const auto& plants : cases) {
    std::vector<float> saved = x;
    int64_t want = n;
    bool want_nf = false;
    for (const Plant& p : plants) {
      x[p.row * dim + dim / 2] = p.value;
      if (p.row < want) {
        want = p.row;
        want_nf = std::isnan(p.value);
      }
    }
    bool got_nf = !want_nf;
    EXPECT_EQ(check(true, &got_nf), want);
    EXPECT_EQ(got_nf, want_nf) << "row " << want;
    // Unbounded (cosine): only the non-finite rows are refused.
    int64_t want_unbounded = -1;
    for (const Plant& p : plants)
      if (std::isnan(p.value) && (want_unbounded < 0 || p.row < want_unbounded)) want_unbounded = p.row;
    got_nf = false;
    EXPECT_EQ(check(false, &got_nf), want_unbounded);
    if (want_unbounded >= 0) EXPECT_TRUE(got_nf);
    x = std::move(saved);
  }
}

// The f16 table the CPU scan decodes through holds, for every one of the 65,536 bit patterns,
// exactly the value Half's own conversion gives (NaNs: the same bits), and a distance over f16
// rows equals the one computed from the rows decoded one by one.
TEST(ElementCodec, HalfTableEqualsTheConversionForEveryValue) {
  const ivfgpu::HostDecoder<ivfgpu::Half> table;
  for (uint32_t b = 0; b < 65536; ++b) {
    ivfgpu::Half h;
    h.bits = static_cast<uint16_t>(b);
    const float want = static_cast<float>(h), got = table(h);
    uint32_t wb = 0, gb = 0;
    std::memcpy(&wb, &want, 4);
    std::memcpy(&gb, &got, 4);
    ASSERT_EQ(gb, wb) << "bits " << b;
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 3.0f);
  const int64_t dim = 37;
  std::vector<float> q(dim), decoded(dim);
  std::vector<ivfgpu::Half> row(dim);
  for (int64_t j = 0; j < dim; ++j) {
    q[j] = g(rng);
    row[j] = ivfgpu::to_half(g(rng));
    decoded[j] = static_cast<float>(row[j]);
  }
  for (auto m : {ivfgpu::Metric::L2, ivfgpu::Metric::InnerProduct})
    EXPECT_EQ(ivfgpu::cpu::exact_distance(q.data(), row.data(), dim, m),
              ivfgpu::cpu::exact_distance(q.data(), decoded.data(), dim, m));
}

// first_unusable decodes f16/bf16 rows a block at a time: rows past the first block are found
// at their own index, NaN told apart from a norm past the bound, and a wider bound honoured.
TEST(UnusableRows, CompactRowsAreCheckedBlockByBlock) {
  const int64_t n = 70000, dim = 4;
  std::vector<float> x(static_cast<std::size_t>(n * dim), 0.5f);
  const float edge = std::ldexp(1.0f - std::ldexp(1.0f, -20), 62);  // bf16: rounds to 2^62
  x[69999 * dim] = x[69999 * dim + 1] = edge;                       // 2 x 2^124 > FLT_MAX / 8
  const std::vector<unsigned char> bf = encode_rows(MatrixView::host_f32(x.data(), n, dim), ElementType::BF16, "x");
  const MatrixView rows{bf.data(), ElementType::BF16, n, dim, MemoryKind::Host};
  bool non_finite = true;
  EXPECT_EQ(first_unusable(rows, true, &non_finite), 69999);
  EXPECT_FALSE(non_finite);
  EXPECT_EQ(first_unusable(rows, false, &non_finite), -1);                        // unbounded
  EXPECT_EQ(first_unusable(rows, true, &non_finite, kMaxSquaredNorm * 1.008f), -1);  // room given
  std::vector<uint16_t> half(x.size(), uint16_t{0x3800});  // f16 0.5
  half[66000 * dim + 2] = 0x7e00;                            // f16 NaN
  EXPECT_EQ(first_unusable(MatrixView{half.data(), ElementType::F16, n, dim, MemoryKind::Host}, true, &non_finite),
            66000);
  EXPECT_TRUE(non_finite);
}
