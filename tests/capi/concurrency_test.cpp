// Concurrent searches on one index give exactly the serial results; mutations racing with
// searches never wait for them and never show a search a mix of two states.
#include <atomic>
#include <thread>

#include "common/mutation_stress.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {
constexpr int64_t kDim = 32, kN = 5000, kNq = 64, kK = 10;
}

TEST(Concurrency, EightThreadsMatchSerialRun) {
  auto p = make_params({{IVF_PARAM_NLIST, 32}, {IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NPROBE, 4}});
  auto idx = make_index(kDim, p.get());
  auto data = clustered_vectors(kN, kDim, 64, 1);
  ASSERT_EQ(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, kN, kDim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), data.data(), IVF_DTYPE_F32, kN, kDim, nullptr), IVF_OK);

  constexpr int kThreads = 8, kRounds = 20;
  // Thread t searches query set t with nprobe 1 + t; serial answers first.
  std::vector<std::vector<float>> queries(kThreads);
  std::vector<std::vector<int64_t>> want_ids(kThreads);
  std::vector<std::vector<float>> want_d(kThreads);
  std::vector<ParamsPtr> params;
  for (int t = 0; t < kThreads; ++t) {
    queries[t] = clustered_vectors(kNq, kDim, 64, 100 + t);
    params.push_back(make_params({{IVF_PARAM_NPROBE, 1 + t}}));
    want_ids[t].resize(kNq * kK);
    want_d[t].resize(kNq * kK);
    ASSERT_EQ(ivf_search(idx.get(), params[t].get(), queries[t].data(), IVF_DTYPE_F32, kNq, kDim, kK,
                         want_ids[t].data(), want_d[t].data()), IVF_OK);
  }
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      std::vector<int64_t> ids(kNq * kK);
      std::vector<float> d(kNq * kK);
      for (int r = 0; r < kRounds; ++r) {
        if (ivf_search(idx.get(), params[t].get(), queries[t].data(), IVF_DTYPE_F32, kNq, kDim, kK, ids.data(),
                       d.data()) != IVF_OK)
          ++failures;
        else if (ids != want_ids[t] || d != want_d[t])
          ++mismatches;
      }
    });
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Concurrency, AddsDuringSearchesShowWholeAdds) {
  auto p = make_params({{IVF_PARAM_NLIST, 16}, {IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NPROBE, 16}});
  auto idx = make_index(kDim, p.get());
  auto data = clustered_vectors(4000, kDim, 32, 2);
  ASSERT_EQ(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, 4000, kDim), IVF_OK);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread searcher([&] {
    std::vector<int64_t> ids(kK);
    std::vector<float> d(kK);
    while (!done) {
      // Every snapshot a search sees is a prefix of whole adds: each returned id must be one
      // that was added, and the query (vector 0, added first) finds itself at distance 0.
      if (ivf_search(idx.get(), nullptr, data.data(), IVF_DTYPE_F32, 1, kDim, kK, ids.data(), d.data()) != IVF_OK) ++bad;
      for (int64_t j = 0; j < kK; ++j)
        if (ids[j] < -1 || ids[j] >= 4000) ++bad;
      if (ids[0] != -1 && !(ids[0] == 0 && d[0] == 0.0f)) ++bad;
    }
  });
  for (int64_t b = 0; b < 4000; b += 400)
    ASSERT_EQ(ivf_add(idx.get(), data.data() + b * kDim, IVF_DTYPE_F32, 400, kDim, nullptr), IVF_OK);
  done = true;
  searcher.join();
  EXPECT_EQ(bad.load(), 0);
  int64_t n = 0;
  ASSERT_EQ(ivf_ntotal(idx.get(), &n), IVF_OK);
  EXPECT_EQ(n, 4000);
}

// The writer-starvation bug (an add never returned while threads searched): 8 searchers,
// one adder of 20 batches, one serialiser, every row verified against one published state.
TEST(Concurrency, AddsCompleteUnderSearchLoadAndSearchesSeeOneState) {
  ivftest::StressConfig c;
  c.backend = IVF_BACKEND_CPU;
  c.searchers = 8;
  ivftest::run_mutation_stress(c);
}

// Searches during adds, removes, updates and saves: 4 searchers (CI's 2 cores), 3 seconds.
TEST(Concurrency, IdMutationsUnderSearchLoad) {
  ivftest::run_ids_stress(IVF_BACKEND_CPU, 4, std::chrono::milliseconds(3000));
}
