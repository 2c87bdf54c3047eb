// Several parts on CUDA (IVF_PARAM_SHARDS): with one GPU the two parts share it, with two each
// has its own; either way results equal one part's, ids work the same, and a file written by
// two parts opens on one. The CPU twin (tests/capi/shards_test.cpp) runs in CI.
#include <vector>

#include "common/id_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {
IndexPtr open_as(const std::vector<unsigned char>& bytes, int64_t shards, int64_t mode) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_SHARDS, shards}, {IVF_PARAM_SHARD_MODE, mode}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_deserialize(bytes.data(), bytes.size(), p.get(), &raw), IVF_OK) << ivf_last_error_message();
  return IndexPtr(raw);
}
}  // namespace

TEST(GpuShards, SplitAndReplicatedEqualOnePart) {
  IVFTEST_REQUIRE_GPU();
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
    const int64_t dim = 64, nlist = 128, n = 100000;
    const auto base = clustered_vectors(n, dim, 4 * nlist, 1);
    const auto q = clustered_vectors(5000, dim, 4 * nlist, 2);
    auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, metric}});
    IndexPtr one = make_index(dim, p.get());
    ASSERT_EQ(ivf_train(one.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    const auto trained = bytes_of(one.get());
    IndexPtr split = open_as(trained, 2, IVF_SHARD_SPLIT), replicated = open_as(trained, 2, IVF_SHARD_REPLICATE);
    for (ivf_index* idx : {one.get(), split.get(), replicated.get()})
      ASSERT_EQ(ivf_add(idx, base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
    for (int64_t nprobe : {int64_t{1}, int64_t{16}, nlist})
      for (int64_t k : {int64_t{10}, int64_t{1000}, int64_t{4096}})
        for (int64_t nq : {int64_t{1}, int64_t{5000}}) {
          if (k == 4096 && nq > 1) continue;
          const Searched a = search_all(one.get(), q, nq, dim, k, nprobe);
          for (ivf_index* idx : {split.get(), replicated.get()}) {
            const Searched b = search_all(idx, q, nq, dim, k, nprobe);
            EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, nq, k), "")
                << "metric " << metric << " nprobe " << nprobe << " k " << k << " nq " << nq;
          }
        }
    const auto saved = bytes_of(split.get());
    IndexPtr back = open_as(saved, 1, IVF_SHARD_SPLIT);
    const Searched a = search_all(one.get(), q, 5000, dim, 10, 16), b = search_all(back.get(), q, 5000, dim, 10, 16);
    EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, 5000, 10), "");
  }
}

TEST(GpuShards, IdsWorkTheSame) {
  IVFTEST_REQUIRE_GPU();
  run_id_workload(IVF_BACKEND_CUDA, false, 200, 61, 0, 2, IVF_SHARD_SPLIT);
  run_id_workload(IVF_BACKEND_CUDA, true, 200, 62, 0, 2, IVF_SHARD_REPLICATE);
}

TEST(GpuShards, DeviceMemoryIsRefusedClearly) {
  IVFTEST_REQUIRE_GPU();
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, 4}, {IVF_PARAM_SHARDS, 2}});
  IndexPtr idx = make_index(8, p.get());
  const auto x = random_vectors(100, 8, 3);
  ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, 100, 8), IVF_OK);
  auto dev = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  std::vector<int64_t> ids(10);
  std::vector<float> d(10);
  // Any pointer: refused before it is read.
  EXPECT_EQ(ivf_search(idx.get(), dev.get(), x.data(), IVF_DTYPE_F32, 1, 8, 10, ids.data(), d.data()),
            IVF_ERR_UNSUPPORTED);
}
