// The CUDA backend against the CPU reference on the same model: every dimension class, k from
// 1 to 4096, nprobe from 1 to nlist, batches up to 70,000 queries, skewed and degenerate data.
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"

namespace gputest {
namespace {

// Rows allowed to differ when nprobe < nlist: the two backends' coarse GEMMs round
// differently, so a query whose nprobe-th and (nprobe+1)-th lists are tied to within fp32
// rounding may probe another list. With nprobe == nlist nothing may differ.
int64_t coarse_slack(int64_t nq, int64_t nprobe, int64_t nlist) {
  return nprobe == nlist ? 0 : std::max<int64_t>(1, nq / 200);
}

void check_grid(int64_t dim, Metric metric, int64_t n, int64_t nlist, int64_t nq, const std::vector<int64_t>& ks) {
  std::vector<float> base = mixture(n, dim, 3 * nlist, 100 + dim);
  std::vector<float> queries = mixture(nq, dim, 3 * nlist, 200 + dim);
  Twin t = make_twin(base, n, dim, nlist, metric);
  ASSERT_EQ(t.gpu->ntotal(), n);
  const std::vector<float> base_cmp = metric == Metric::Cosine ? normalized(base, dim) : base;
  const std::vector<float> q_cmp = metric == Metric::Cosine ? normalized(queries, dim) : queries;
  for (int64_t nprobe : {int64_t{1}, int64_t{7}, nlist / 2, nlist}) {
    for (int64_t k : ks) {
      Result g = search(*t.gpu, queries, nq, k, nprobe);
      Result c = search(*t.cpu, queries, nq, k, nprobe);
      expect_equivalent(g, c, nq, k, dim, metric, base_cmp, q_cmp, coarse_slack(nq, nprobe, nlist),
                        "dim " + std::to_string(dim) + " metric " + std::to_string(int(metric)) + " k " +
                            std::to_string(k) + " nprobe " + std::to_string(nprobe));
    }
  }
}

const std::vector<int64_t> kAllK = {1, 10, 100, 256, 257, 1000, 2048, 4096};

class Dims : public ::testing::TestWithParam<int64_t> {};

TEST_P(Dims, L2MatchesCpuForEveryKAndNprobe) {
  IVFGPU_REQUIRE_GPU();
  check_grid(GetParam(), Metric::L2, 3000, 16, 23, kAllK);
}

TEST_P(Dims, InnerProductMatchesCpuForEveryKAndNprobe) {
  IVFGPU_REQUIRE_GPU();
  check_grid(GetParam(), Metric::InnerProduct, 3000, 16, 23, kAllK);
}

INSTANTIATE_TEST_SUITE_P(Gpu, Dims,
                         ::testing::Values(1, 2, 3, 4, 7, 8, 31, 32, 33, 64, 96, 127, 128, 129, 256, 784, 960));

TEST(GpuCorrectness, CosineMatchesCpu) {
  IVFGPU_REQUIRE_GPU();
  check_grid(33, Metric::Cosine, 3000, 16, 23, {1, 10, 257});
}

TEST(GpuCorrectness, QueryCountsUpToSeventyThousand) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 33, n = 20000, nlist = 64;
  std::vector<float> base = mixture(n, dim, 200, 5);
  Twin t = make_twin(base, n, dim, nlist, Metric::L2);
  for (int64_t nq : {int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{70000}}) {
    std::vector<float> queries = mixture(nq, dim, 200, 6 + nq);
    for (int64_t k : {int64_t{10}, int64_t{257}}) {
      if (nq == 70000 && k == 257) continue;  // the CPU oracle's time, not the GPU's
      Result g = search(*t.gpu, queries, nq, k, 7);
      Result c = search(*t.cpu, queries, nq, k, 7);
      expect_equivalent(g, c, nq, k, dim, Metric::L2, base, queries, coarse_slack(nq, 7, nlist),
                        "nq " + std::to_string(nq) + " k " + std::to_string(k));
    }
  }
}

// The search's per-list prefix sums (its groupings' places and its work units') run in one
// block up to kSmallScanMax entries (small_scan.cuh) and through cub's device-wide scan past it:
// nlist 16,383 fills the one-block scan's last round (16,384 unit offsets), 20,000 takes cub's.
TEST(GpuCorrectness, ManyListsOnBothSidesOfTheOneBlockPrefixSums) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 8, n = 48000, nq = 300;
  const std::vector<float> base = mixture(n, dim, 400, 31);
  const std::vector<float> queries = mixture(nq, dim, 400, 32);
  for (int64_t nlist : {int64_t{16383}, int64_t{20000}}) {
    Twin t = make_twin(base, n, dim, nlist, Metric::L2);
    for (int64_t nprobe : {int64_t{1}, int64_t{16}, int64_t{200}}) {
      for (int64_t k : {int64_t{10}, int64_t{300}}) {
        Result g = search(*t.gpu, queries, nq, k, nprobe);
        Result c = search(*t.cpu, queries, nq, k, nprobe);
        expect_equivalent(g, c, nq, k, dim, Metric::L2, base, queries, coarse_slack(nq, nprobe, nlist),
                          "nlist " + std::to_string(nlist) + " nprobe " + std::to_string(nprobe) + " k " +
                              std::to_string(k));
      }
    }
    if (HasFailure()) return;
  }
}

TEST(GpuCorrectness, SkewedDataWithEmptyListsAndOneHugeList) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 24, nlist = 32;
  // 3 tight clusters hold everything but a few points: most lists end up empty or tiny, one
  // list holds ~90%.
  std::vector<float> base = mixture(6000, dim, 3, 11);
  std::vector<float> far = mixture(300, dim, 40, 12);
  for (float& v : far) v *= 6.0f;
  for (int64_t i = 0; i < 5400 * dim; ++i) base[i] = base[i % dim] + 0.01f * static_cast<float>(i % 7);
  base.insert(base.end(), far.begin(), far.end());
  const int64_t n = static_cast<int64_t>(base.size()) / dim;
  std::vector<float> queries = mixture(50, dim, 3, 13);
  Twin t = make_twin(base, n, dim, nlist, Metric::L2);
  for (int64_t nprobe : {int64_t{1}, int64_t{7}, nlist}) {
    for (int64_t k : {int64_t{10}, int64_t{1000}, int64_t{4096}}) {
      Result g = search(*t.gpu, queries, 50, k, nprobe);
      Result c = search(*t.cpu, queries, 50, k, nprobe);
      expect_equivalent(g, c, 50, k, dim, Metric::L2, base, queries, coarse_slack(50, nprobe, nlist),
                        "skewed k " + std::to_string(k) + " nprobe " + std::to_string(nprobe));
    }
  }
}

TEST(GpuCorrectness, IdenticalVectorsTieEverywhere) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 16, n = 2000, nlist = 8;
  std::vector<float> train = mixture(n, dim, 20, 21);
  std::vector<float> same(static_cast<std::size_t>(n * dim));
  for (int64_t i = 0; i < n * dim; ++i) same[i] = train[i % dim];
  Index gpu(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  gpu.train(train.data(), n);
  gpu.add(same.data(), n, nullptr);
  Index cpu(gpu.snapshot(), params_for(nlist, Metric::L2, BackendKind::Cpu));
  std::vector<float> queries = mixture(5, dim, 20, 22);
  for (int64_t k : {int64_t{1}, int64_t{100}, int64_t{2048}}) {
    Result g = search(gpu, queries, 5, k, nlist);
    Result c = search(cpu, queries, 5, k, nlist);
    expect_equivalent(g, c, 5, k, dim, Metric::L2, same, queries, 0, "identical k " + std::to_string(k));
    for (int64_t q = 0; q < 5; ++q) {
      std::vector<int64_t> row(g.ids.begin() + q * k, g.ids.begin() + (q + 1) * k);
      row.erase(std::remove(row.begin(), row.end(), int64_t{-1}), row.end());  // padding
      std::sort(row.begin(), row.end());
      EXPECT_TRUE(std::adjacent_find(row.begin(), row.end()) == row.end()) << "an id returned twice";
    }
  }
}

TEST(GpuCorrectness, PadsWhenFewerCandidatesThanK) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 5, n = 40, nlist = 4;
  std::vector<float> base = mixture(n, dim, 4, 31);
  std::vector<float> queries = mixture(3, dim, 4, 32);
  for (Metric m : {Metric::L2, Metric::InnerProduct}) {
    Twin t = make_twin(base, n, dim, nlist, m);
    for (int64_t nprobe : {int64_t{1}, nlist}) {
      Result g = search(*t.gpu, queries, 3, 100, nprobe);
      Result c = search(*t.cpu, queries, 3, 100, nprobe);
      expect_equivalent(g, c, 3, 100, dim, m, base, queries, 0, "padding");
      if (nprobe == nlist)
        for (int64_t q = 0; q < 3; ++q) EXPECT_EQ(g.ids[q * 100 + n], -1);
    }
  }
  // An empty trained index pads every row.
  Index empty(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  empty.train(base.data(), n);
  Result g = search(empty, queries, 3, 7, 2);
  for (int64_t e = 0; e < 21; ++e) {
    EXPECT_EQ(g.ids[e], -1);
    EXPECT_EQ(g.dists[e], std::numeric_limits<float>::infinity());
  }
}

}  // namespace
}  // namespace gputest
