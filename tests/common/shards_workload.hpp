// Workloads shared by the CPU (tests/capi/shards_test.cpp) and CUDA (tests/gpu/shards_gpu_test.cpp)
// tests of an index of several parts.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

#include "id_workload.hpp"
#include "test_util.hpp"

namespace ivftest {

// 16 threads searching one index of 2 parts at once, each call of its own shape (queries, k,
// nprobe), get exactly what the same calls got one after another.
inline void sixteen_threads_equal_a_serial_replay(int32_t backend, int64_t mode) {
  const int64_t dim = 16, nlist = 16, n = 8000;
  const auto base = clustered_vectors(n, dim, 64, 4);
  auto p = make_params({{IVF_PARAM_BACKEND, backend}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_SHARDS, 2},
                        {IVF_PARAM_SHARD_MODE, mode}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  std::vector<std::vector<float>> qs;
  std::vector<Searched> serial;
  for (int t = 0; t < 16; ++t) {
    qs.push_back(clustered_vectors(1 + 13 * t, dim, 64, 100 + t));
    serial.push_back(search_all(idx.get(), qs[t], 1 + 13 * t, dim, 1 + t, 1 + t % 4));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 4; ++r) {
        const Searched s = search_all(idx.get(), qs[t], 1 + 13 * t, dim, 1 + t, 1 + t % 4);
        if (s.ids != serial[t].ids || s.dists != serial[t].dists) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace ivftest
