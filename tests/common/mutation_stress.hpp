// The concurrency contract under load (docs/architecture.md, "Concurrency"): searchers run
// back to back while one thread adds batches and one serialises. Every add must complete while
// the searchers keep running (the test fails, rather than hangs, past a bound); every search
// row must be the exact answer of ONE published state between the call's start and end (read
// through IVF_INFO_STATE_VERSION); and the final index must equal a serial replay byte for
// byte. Used by the CPU test (CI) and its GPU twin.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.hpp"

namespace ivftest {

struct StressConfig {
  int32_t backend = IVF_BACKEND_CPU;
  int searchers = 8;
  int batches = 20;
  int64_t batch_rows = 200;
  int64_t dim = 12;
  int64_t nlist = 8;
  int64_t nq = 3;
  int64_t k = 5;
  std::chrono::seconds bound{120};
};

namespace stress_detail {

inline int64_t version_of(const ivf_index* idx) {
  int64_t v = -1;
  EXPECT_EQ(ivf_index_info(idx, IVF_INFO_STATE_VERSION, &v), IVF_OK);
  return v;
}

inline double sq_l2(const float* a, const float* b, int64_t dim) {
  double s = 0;
  for (int64_t j = 0; j < dim; ++j) s += (double(a[j]) - b[j]) * (double(a[j]) - b[j]);
  return s;
}

// True when ids/dists (k per query, nprobe = nlist: exhaustive) is the exact answer over the
// first `rows` base vectors (ids 0..rows-1), under the results contract: distances within fp32
// rounding of the true ones, sorted, the k best distances matching, padding only past `rows`.
inline bool matches_state(const std::vector<float>& base, int64_t rows, const float* queries, int64_t nq, int64_t dim,
                          int64_t k, const int64_t* ids, const float* dists, std::string* why) {
  std::vector<double> truth(static_cast<std::size_t>(rows));
  for (int64_t q = 0; q < nq; ++q) {
    const float* qv = queries + q * dim;
    double qn = 0, bn = 0;
    for (int64_t j = 0; j < dim; ++j) qn += double(qv[j]) * qv[j];
    for (int64_t i = 0; i < rows; ++i) {
      truth[i] = sq_l2(qv, base.data() + i * dim, dim);
      double n = 0;
      for (int64_t j = 0; j < dim; ++j) n += double(base[i * dim + j]) * base[i * dim + j];
      bn = std::max(bn, n);
    }
    const double tol = 1e-5 * (qn + bn) + 1e-12;
    std::vector<double> sorted(truth);
    std::sort(sorted.begin(), sorted.end());
    for (int64_t j = 0; j < k; ++j) {
      const int64_t id = ids[q * k + j];
      const float d = dists[q * k + j];
      if (j >= rows) {
        if (id != -1 || !std::isinf(d)) {
          if (why) *why = "expected padding at rank " + std::to_string(j) + " with " + std::to_string(rows) + " rows";
          return false;
        }
        continue;
      }
      if (id < 0 || id >= rows) {
        if (why) *why = "id " + std::to_string(id) + " not in a state of " + std::to_string(rows) + " rows";
        return false;
      }
      if (std::abs(truth[id] - d) > tol || std::abs(sorted[j] - d) > tol) {
        if (why) *why = "rank " + std::to_string(j) + ": distance " + std::to_string(d) + " for id " + std::to_string(id) +
                        " (true " + std::to_string(truth[id]) + ", k-th best " + std::to_string(sorted[j]) + ")";
        return false;
      }
      for (int64_t i = 0; i < j; ++i)
        if (ids[q * k + i] == id) {
          if (why) *why = "id " + std::to_string(id) + " returned twice";
          return false;
        }
    }
  }
  return true;
}

inline std::vector<unsigned char> serialized(const ivf_index* idx) {
  for (;;) {
    size_t size = 0;
    EXPECT_EQ(ivf_serialize(idx, nullptr, 0, &size), IVF_OK);
    std::vector<unsigned char> bytes(size);
    const ivf_status s = ivf_serialize(idx, bytes.data(), bytes.size(), &size);
    if (s == IVF_ERR_BUFFER_TOO_SMALL) continue;  // an add was published in between
    EXPECT_EQ(s, IVF_OK) << ivf_last_error_message();
    bytes.resize(size);
    return bytes;
  }
}

}  // namespace stress_detail

inline void run_mutation_stress(const StressConfig& c) {
  using namespace stress_detail;
  const int64_t total = c.batches * c.batch_rows;
  const std::vector<float> base = clustered_vectors(total, c.dim, 4 * c.nlist, 7);
  auto params = make_params({{IVF_PARAM_NLIST, c.nlist}, {IVF_PARAM_BACKEND, c.backend}, {IVF_PARAM_NPROBE, c.nlist}});
  IndexPtr idx = make_index(c.dim, params.get());
  ASSERT_TRUE(idx);
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, total, c.dim), IVF_OK) << ivf_last_error_message();
  const int64_t trained_version = version_of(idx.get());
  // State version trained_version + b holds the first b batches.
  auto rows_of = [&](int64_t version) { return (version - trained_version) * c.batch_rows; };

  std::atomic<bool> stop{false};
  std::atomic<int64_t> searches{0}, searches_during_adds{0}, bad{0}, failures{0}, serialisations{0};
  std::atomic<bool> adding{true};
  std::mutex why_mutex;
  std::string first_why;
  std::vector<std::thread> threads;
  for (int t = 0; t < c.searchers; ++t)
    threads.emplace_back([&, t] {
      const std::vector<float> queries = clustered_vectors(c.nq, c.dim, 4 * c.nlist, 1000 + t);
      std::vector<int64_t> ids(static_cast<std::size_t>(c.nq * c.k));
      std::vector<float> dists(ids.size());
      while (!stop.load()) {
        const int64_t v0 = version_of(idx.get());
        const ivf_status s = ivf_search(idx.get(), nullptr, queries.data(), IVF_DTYPE_F32, c.nq, c.dim, c.k, ids.data(),
                                        dists.data());
        const int64_t v1 = version_of(idx.get());
        ++searches;
        if (adding.load()) ++searches_during_adds;
        if (s != IVF_OK) {
          ++failures;
          continue;
        }
        bool ok = false;
        std::string why;
        for (int64_t v = v0; v <= v1 && !ok; ++v)
          ok = matches_state(base, rows_of(v), queries.data(), c.nq, c.dim, c.k, ids.data(), dists.data(), &why);
        if (!ok) {
          ++bad;
          std::lock_guard<std::mutex> lock(why_mutex);
          if (first_why.empty()) first_why = "versions " + std::to_string(v0) + ".." + std::to_string(v1) + ": " + why;
        }
      }
    });
  threads.emplace_back([&] {
    while (!stop.load()) {
      const std::vector<unsigned char> bytes = serialized(idx.get());
      ivf_index* copy = nullptr;
      if (ivf_deserialize(bytes.data(), bytes.size(), nullptr, &copy) != IVF_OK) {
        ++failures;
        continue;
      }
      int64_t n = -1;
      EXPECT_EQ(ivf_ntotal(copy, &n), IVF_OK);
      if (n % c.batch_rows != 0) ++bad;  // a serialisation is one whole state
      ivf_free(copy);
      ++serialisations;
    }
  });

  // The adder: every batch must go in while the searchers run.
  auto adder = std::async(std::launch::async, [&] {
    int done = 0;
    for (int b = 0; b < c.batches; ++b) {
      if (ivf_add(idx.get(), base.data() + b * c.batch_rows * c.dim, IVF_DTYPE_F32, c.batch_rows, c.dim, nullptr) != IVF_OK)
        break;
      ++done;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return done;
  });
  const bool in_time = adder.wait_for(c.bound) == std::future_status::ready;
  // Let the searchers run a little past the last add, then stop them (the adder finishes once
  // they stop even if it was starved, so nothing hangs).
  adding = false;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  const int adds = adder.get();
  for (auto& th : threads) th.join();

  EXPECT_TRUE(in_time) << "the adds did not complete within " << c.bound.count() << " s while searches ran";
  EXPECT_EQ(adds, c.batches);
  EXPECT_GT(searches_during_adds.load(), 0) << "no search overlapped the adds: the test proved nothing";
  EXPECT_GT(serialisations.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(bad.load(), 0) << first_why;

  // The final index equals a serial replay of the same operations.
  IndexPtr serial = make_index(c.dim, params.get());
  ASSERT_EQ(ivf_train(serial.get(), base.data(), IVF_DTYPE_F32, total, c.dim), IVF_OK);
  for (int b = 0; b < c.batches; ++b)
    ASSERT_EQ(ivf_add(serial.get(), base.data() + b * c.batch_rows * c.dim, IVF_DTYPE_F32, c.batch_rows, c.dim, nullptr),
              IVF_OK);
  EXPECT_TRUE(serialized(idx.get()) == serialized(serial.get())) << "final index differs from a serial replay";
  EXPECT_EQ(version_of(idx.get()), trained_version + c.batches);
  std::printf("[stress] %d searchers: %lld searches (%lld during adds), %lld serialisations, %d adds\n", c.searchers,
              static_cast<long long>(searches.load()), static_cast<long long>(searches_during_adds.load()),
              static_cast<long long>(serialisations.load()), adds);
}

}  // namespace ivftest
