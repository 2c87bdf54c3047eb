// Indexes larger than the GPU (IVF_PARAM_DEVICE_BUDGET): lists in the host tier, streamed
// through a staging ring, a hot-list cache. Every result is compared with an index without a
// budget holding the same centroids and lists: the same kernels over the same rows in the same
// order, so results must be identical (ids and distances, bit for bit), whatever was cached.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/dtypes.hpp"
#include "common/id_workload.hpp"
#include "common/mutation_stress.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

int64_t info(const ivf_index* idx, ivf_info_key key) {
  int64_t v = -1;
  EXPECT_EQ(ivf_index_info(idx, key, &v), IVF_OK) << ivf_last_error_message();
  return v;
}

// The smallest budget an index of this shape takes, read from the error a too-small one gets
// (so the tests do not restate the library's arithmetic).
IndexPtr from_bytes(const std::vector<unsigned char>& bytes, int64_t budget) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_DEVICE_BUDGET, budget}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_deserialize(bytes.data(), bytes.size(), p.get(), &raw), IVF_OK) << ivf_last_error_message();
  return IndexPtr(raw);
}

// Bit-identical results (the tier changes where rows are read from, nothing else).
void expect_identical(const Searched& a, const Searched& b, const std::string& what) {
  ASSERT_EQ(a.ids.size(), b.ids.size());
  EXPECT_EQ(a.ids, b.ids) << what;
  EXPECT_EQ(std::memcmp(a.dists.data(), b.dists.data(), a.dists.size() * sizeof(float)), 0) << what;
}

struct Trio {
  IndexPtr plain, tight, roomy;  // no budget; the minimum budget plus 4 MiB; 1 GiB
};

// Three indexes with one set of centroids and lists: trained and filled once, then copied.
Trio make_trio(int32_t metric, int64_t nlist, int64_t dim, const std::vector<float>& base, int64_t n) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, metric}});
  Trio t;
  t.plain = make_index(dim, p.get());
  EXPECT_EQ(ivf_train(t.plain.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  EXPECT_EQ(ivf_add(t.plain.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  const auto bytes = bytes_of(t.plain.get());
  t.tight = from_bytes(bytes, minimum_budget(nlist, dim) + 4 * kMiB);
  t.roomy = from_bytes(bytes, 1024 * kMiB);
  return t;
}

}  // namespace

TEST(HostTier, TooSmallABudgetIsAClearError) {
  IVFTEST_REQUIRE_GPU();
  const int64_t need = minimum_budget(4096, 128);
  EXPECT_GT(need, 4096 * 128 * 4);  // at least the centroids
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, 4096}, {IVF_PARAM_DEVICE_BUDGET, need}});
  IndexPtr ok = make_index(128, p.get());
  EXPECT_TRUE(ok);
  EXPECT_EQ(info(ok.get(), IVF_INFO_DEVICE_BUDGET), need);
  auto small = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, 4096}, {IVF_PARAM_DEVICE_BUDGET, need - 1}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_create(&raw, 128, small.get()), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(raw, nullptr);
  EXPECT_NE(std::string(ivf_last_error_message()).find("IVF_PARAM_DEVICE_BUDGET"), std::string::npos);
}

// nprobe 1 .. nlist, k up to 1000, batches 1 .. 3000, every metric; then adds of 4x more rows to
// all three indexes, and again.
TEST(HostTier, ResultsEqualAnIndexWithoutABudget) {
  IVFTEST_REQUIRE_GPU();
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_COSINE}) {
    for (int64_t dim : {int64_t{37}, int64_t{64}}) {
      const int64_t nlist = 64, n = 20000;
      const auto base = clustered_vectors(n, dim, 4 * nlist, 1);
      Trio t = make_trio(metric, nlist, dim, base, n);
      ASSERT_TRUE(t.plain && t.tight && t.roomy);
      const auto more = clustered_vectors(4 * n, dim, 4 * nlist, 2);
      for (int round = 0; round < 2; ++round) {
        for (int64_t nq : {int64_t{1}, int64_t{37}, int64_t{3000}}) {
          const auto q = clustered_vectors(nq, dim, 4 * nlist, 100 + nq);
          for (int64_t nprobe : {int64_t{1}, int64_t{5}, nlist}) {
            for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{100}, int64_t{1000}}) {
              if (nq * k > 3000 * 100) continue;  // keeps the test within its time
              const std::string what = "metric " + std::to_string(metric) + " dim " + std::to_string(dim) + " round " +
                                       std::to_string(round) + " nq " + std::to_string(nq) + " nprobe " +
                                       std::to_string(nprobe) + " k " + std::to_string(k);
              const Searched a = search_all(t.plain.get(), q, nq, dim, k, nprobe);
              expect_identical(a, search_all(t.tight.get(), q, nq, dim, k, nprobe), "tight " + what);
              expect_identical(a, search_all(t.roomy.get(), q, nq, dim, k, nprobe), "roomy " + what);
            }
          }
        }
        for (ivf_index* idx : {t.plain.get(), t.tight.get(), t.roomy.get()})
          ASSERT_EQ(ivf_add(idx, more.data(), IVF_DTYPE_F32, 4 * n, dim, nullptr), IVF_OK) << ivf_last_error_message();
      }
      EXPECT_GT(info(t.tight.get(), IVF_INFO_STREAMED_BYTES), 0);
      EXPECT_GT(info(t.roomy.get(), IVF_INFO_CACHE_HITS), 0);
      EXPECT_EQ(info(t.tight.get(), IVF_INFO_NTOTAL), 9 * n);
    }
  }
}

TEST(HostTier, SeventyThousandQueriesInOneCall) {
  IVFTEST_REQUIRE_GPU();
  const int64_t nlist = 128, dim = 32, n = 50000, nq = 70000;
  const auto base = clustered_vectors(n, dim, 4 * nlist, 3);
  Trio t = make_trio(IVF_METRIC_L2, nlist, dim, base, n);
  const auto q = clustered_vectors(nq, dim, 4 * nlist, 4);
  for (int64_t nprobe : {int64_t{1}, nlist}) {
    const Searched a = search_all(t.plain.get(), q, nq, dim, 10, nprobe);
    expect_identical(a, search_all(t.tight.get(), q, nq, dim, 10, nprobe), "tight nprobe " + std::to_string(nprobe));
  }
}

// Two lists of ~40 MiB each through a ring of 4 MiB slots at the smallest budget (whose cache
// holds about 30 MiB): every list is cut into pieces and none is cached.
TEST(HostTier, ListsLargerThanTheRingAreStreamedInPieces) {
  IVFTEST_REQUIRE_GPU();
  const int64_t nlist = 2, dim = 128, n = 160000;
  const auto base = clustered_vectors(n, dim, 2, 5);
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}});
  IndexPtr plain = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(plain.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(plain.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  IndexPtr tight = from_bytes(bytes_of(plain.get()), minimum_budget(nlist, dim));
  const auto q = clustered_vectors(500, dim, 2, 6);
  for (int64_t k : {int64_t{10}, int64_t{1000}, int64_t{4096}})
    for (int64_t nprobe : {int64_t{1}, int64_t{2}})
      expect_identical(search_all(plain.get(), q, 500, dim, k, nprobe), search_all(tight.get(), q, 500, dim, k, nprobe),
                       "k " + std::to_string(k) + " nprobe " + std::to_string(nprobe));
  EXPECT_EQ(info(tight.get(), IVF_INFO_RESIDENT_LISTS), 0);  // no room to cache a 40 MiB list
  EXPECT_GE(info(tight.get(), IVF_INFO_STREAMED_BYTES), 6 * n * dim * 4 / 2);
}

// The budget holds while the index grows to 4x it: by the library's report and by the driver.
TEST(HostTier, TheBudgetHoldsWhileAddingFourTimesIt) {
  IVFTEST_REQUIRE_GPU();
  const int64_t nlist = 256, dim = 64;
  const int64_t budget = minimum_budget(nlist, dim) + 16 * kMiB;
  // Warm the process up first (the CUDA context, cuBLAS, kernel modules belong to the process,
  // not to any index), so the driver's free memory measures the index alone.
  {
    auto wp = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, 4}});
    IndexPtr warm = make_index(dim, wp.get());
    const auto x = random_vectors(1000, dim, 7);
    ASSERT_EQ(ivf_train(warm.get(), x.data(), IVF_DTYPE_F32, 1000, dim), IVF_OK);
    ASSERT_EQ(ivf_add(warm.get(), x.data(), IVF_DTYPE_F32, 1000, dim, nullptr), IVF_OK);
    search_all(warm.get(), x, 10, dim, 10, 4);
  }
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_DEVICE_BUDGET, budget}});
  IndexPtr idx = make_index(dim, p.get());
  const int64_t rows = 4 * budget / (dim * 4);
  const int64_t step = rows / 8;
  const auto train = clustered_vectors(20000, dim, 4 * nlist, 8);
  ASSERT_EQ(ivf_train(idx.get(), train.data(), IVF_DTYPE_F32, 20000, dim), IVF_OK);
  size_t lowest_free = free_before;
  for (int64_t done = 0; done < rows; done += step) {
    const auto x = clustered_vectors(step, dim, 4 * nlist, 100 + done);
    ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, step, dim, nullptr), IVF_OK) << ivf_last_error_message();
    const auto q = clustered_vectors(2000, dim, 4 * nlist, 200 + done);
    search_all(idx.get(), q, 2000, dim, 100, 32);
    EXPECT_LE(info(idx.get(), IVF_INFO_DEVICE_MEMORY_BYTES), budget);
    EXPECT_LE(info(idx.get(), IVF_INFO_RESIDENT_BYTES), budget);
    size_t free_now = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_now, &total), cudaSuccess);
    lowest_free = std::min(lowest_free, free_now);
  }
  EXPECT_GE(info(idx.get(), IVF_INFO_HOST_TIER_BYTES), 4 * budget);
  const int64_t used = static_cast<int64_t>(free_before) - static_cast<int64_t>(lowest_free);
  std::printf("budget %lld bytes; the driver saw at most %lld bytes more in use (%.3f x budget); index %lld rows\n",
              static_cast<long long>(budget), static_cast<long long>(used), double(used) / double(budget),
              static_cast<long long>(info(idx.get(), IVF_INFO_NTOTAL)));
  // The index's own streams, cuBLAS handles and the kernels it loads first (outside any pool:
  // 44 MB measured on the H100, CUDA 13.0, driver 580) are the slack; everything the index
  // allocates comes from the pool the driver caps at the budget.
  EXPECT_LE(used, budget + 64 * kMiB);
}

TEST(HostTier, SixteenSearchThreadsEqualASerialReplay) {
  IVFTEST_REQUIRE_GPU();
  const int64_t nlist = 64, dim = 32, n = 30000;
  const auto base = clustered_vectors(n, dim, 4 * nlist, 9);
  Trio t = make_trio(IVF_METRIC_L2, nlist, dim, base, n);
  std::vector<std::vector<float>> queries;
  std::vector<Searched> expected;
  for (int i = 0; i < 16; ++i) {
    queries.push_back(clustered_vectors(1 + 97 * i, dim, 4 * nlist, 300 + i));
    expected.push_back(search_all(t.plain.get(), queries[i], 1 + 97 * i, dim, 1 + i * 7, 1 + i));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 16; ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 5; ++rep) {
        const Searched s = search_all(t.tight.get(), queries[i], 1 + 97 * i, dim, 1 + i * 7, 1 + i);
        if (s.ids != expected[i].ids || s.dists != expected[i].dists) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// A Zipf-skewed stream over lists: after a few batches most probes hit the cache.
TEST(HostTier, ASkewedStreamMostlyHitsTheCache) {
  IVFTEST_REQUIRE_GPU();
  const int64_t nlist = 256, dim = 64, n = 200000;
  const auto base = clustered_vectors(n, dim, nlist, 10);
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}});
  IndexPtr plain = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(plain.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(plain.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  // A cache of about a quarter of the index (51 MB).
  IndexPtr idx = from_bytes(bytes_of(plain.get()), minimum_budget(nlist, dim) + 14 * kMiB);
  // Queries around the mixture's centres (clustered_vectors draws them from seed 42), the centre
  // picked with Zipf(1.1) over the centre number: each centre is about one list.
  std::vector<float> centre(static_cast<std::size_t>(nlist * dim));
  {
    std::mt19937_64 crng(42);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& x : centre) x = normal(crng);
  }
  std::vector<double> weight(static_cast<std::size_t>(nlist));
  for (int64_t l = 0; l < nlist; ++l) weight[l] = 1.0 / std::pow(double(l + 1), 1.1);
  std::discrete_distribution<int64_t> zipf(weight.begin(), weight.end());
  std::mt19937_64 rng(11);
  std::normal_distribution<float> noise(0.0f, 0.35f);
  int64_t hits0 = 0, miss0 = 0;
  for (int batch = 0; batch < 12; ++batch) {
    std::vector<float> q(static_cast<std::size_t>(2000 * dim));
    for (int64_t i = 0; i < 2000; ++i) {
      const int64_t c = zipf(rng);
      for (int64_t j = 0; j < dim; ++j) q[i * dim + j] = centre[c * dim + j] + noise(rng);
    }
    const Searched a = search_all(plain.get(), q, 2000, dim, 10, 4);
    expect_identical(a, search_all(idx.get(), q, 2000, dim, 10, 4), "batch " + std::to_string(batch));
    if (batch == 3) {
      hits0 = info(idx.get(), IVF_INFO_CACHE_HITS);
      miss0 = info(idx.get(), IVF_INFO_CACHE_MISSES);
    }
  }
  const double hits = double(info(idx.get(), IVF_INFO_CACHE_HITS) - hits0);
  const double misses = double(info(idx.get(), IVF_INFO_CACHE_MISSES) - miss0);
  std::printf("hit rate after warm-up: %.3f (%g hits, %g misses), resident lists %lld\n", hits / (hits + misses), hits,
              misses, static_cast<long long>(info(idx.get(), IVF_INFO_RESIDENT_LISTS)));
  EXPECT_GT(hits / (hits + misses), 0.5);
  EXPECT_GT(info(idx.get(), IVF_INFO_RESIDENT_LISTS), 0);
  EXPECT_LE(info(idx.get(), IVF_INFO_DEVICE_MEMORY_BYTES), info(idx.get(), IVF_INFO_DEVICE_BUDGET));
}

// ivf_load with a budget opens a saved index into the host tier; corruption is still caught.
TEST(HostTier, OpenASavedIndexWithoutLoadingItOntoTheGpu) {
  IVFTEST_REQUIRE_GPU();
  const int64_t nlist = 64, dim = 48, n = 30000;
  const auto base = clustered_vectors(n, dim, 4 * nlist, 13);
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}});
  IndexPtr plain = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(plain.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(plain.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  const std::string path = ::testing::TempDir() + "host_tier_open.ivf";
  ASSERT_EQ(ivf_save(plain.get(), path.c_str()), IVF_OK);
  const int64_t budget = minimum_budget(nlist, dim);  // smaller than the lists: nothing fits
  auto lp = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_DEVICE_BUDGET, budget}});
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_load(path.c_str(), lp.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr opened(raw);
  EXPECT_EQ(info(opened.get(), IVF_INFO_NTOTAL), n);
  EXPECT_EQ(info(opened.get(), IVF_INFO_RESIDENT_LISTS), 0);
  EXPECT_GE(info(opened.get(), IVF_INFO_HOST_TIER_BYTES), n * dim * 4);
  const auto q = clustered_vectors(300, dim, 4 * nlist, 14);
  for (int64_t nprobe : {int64_t{1}, int64_t{8}, nlist})
    expect_identical(search_all(plain.get(), q, 300, dim, 50, nprobe), search_all(opened.get(), q, 300, dim, 50, nprobe),
                     "nprobe " + std::to_string(nprobe));
  // It is a full index: adds, removes and a save round trip work on it.
  ASSERT_EQ(ivf_add(opened.get(), base.data(), IVF_DTYPE_F32, 100, dim, nullptr), IVF_OK);
  ASSERT_EQ(ivf_add(plain.get(), base.data(), IVF_DTYPE_F32, 100, dim, nullptr), IVF_OK);
  expect_identical(search_all(plain.get(), q, 300, dim, 50, 8), search_all(opened.get(), q, 300, dim, 50, 8), "after add");

  // A flipped byte inside the lists, and a truncated file: errors, never a crash.
  std::vector<char> file;
  {
    std::ifstream in(path, std::ios::binary);
    file.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string bad = ::testing::TempDir() + "host_tier_bad.ivf";
  auto write = [&](const std::vector<char>& b) {
    std::ofstream out(bad, std::ios::binary | std::ios::trunc);
    out.write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  std::vector<char> flipped = file;
  flipped[flipped.size() / 2] ^= 0x40;
  write(flipped);
  raw = nullptr;
  EXPECT_EQ(ivf_load(bad.c_str(), lp.get(), &raw), IVF_ERR_CORRUPT_DATA) << ivf_last_error_message();
  EXPECT_EQ(raw, nullptr);
  write(std::vector<char>(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(file.size() * 2 / 3)));
  const ivf_status truncated = ivf_load(bad.c_str(), lp.get(), &raw);
  EXPECT_TRUE(truncated == IVF_ERR_CORRUPT_DATA || truncated == IVF_ERR_IO) << ivf_last_error_message();
  EXPECT_EQ(raw, nullptr);
  std::remove(bad.c_str());
  std::remove(path.c_str());
}

// Remove / update / get / count and filtered search on a budgeted index: the id workloads the
// unbudgeted backends pass, with a budget that caches almost nothing.
TEST(HostTier, IdWorkloads) {
  IVFTEST_REQUIRE_GPU();
  const int64_t budget = minimum_budget(16, 8) + 2 * kMiB;
  run_id_workload(IVF_BACKEND_CUDA, false, 300, 41, budget);
  run_id_workload(IVF_BACKEND_CUDA, true, 300, 42, budget);
}
TEST(HostTier, FilteredSearch) {
  IVFTEST_REQUIRE_GPU();
  run_filter_workload(IVF_BACKEND_CUDA, 50000, 32, 64, 100, 10, {0.01, 0.5}, false, minimum_budget(64, 32) + kMiB);
}
TEST(HostTier, MutationsUnderSixteenSearchers) {
  IVFTEST_REQUIRE_GPU();
  run_ids_stress(IVF_BACKEND_CUDA, 16, std::chrono::milliseconds(3000), minimum_budget(8, 12) + kMiB);
}
