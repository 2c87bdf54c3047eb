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
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
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
  std::string first_why, first_failure;
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
          if (failures++ == 0) {
            std::lock_guard<std::mutex> lock(why_mutex);
            first_failure = std::string("search: status ") + std::to_string(s) + ": " + ivf_last_error_message();
          }
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
      if (const ivf_status s = ivf_deserialize(bytes.data(), bytes.size(), nullptr, &copy); s != IVF_OK) {
        if (failures++ == 0) {
          std::lock_guard<std::mutex> lock(why_mutex);
          first_failure = std::string("deserialize: status ") + std::to_string(s) + ": " + ivf_last_error_message();
        }
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
  EXPECT_EQ(failures.load(), 0) << first_failure;
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

namespace ivftest {

// The ids stress: searchers run back to back while one thread adds, one removes, one updates
// and one saves, for a fixed time. Every mutation completes; every search row is the exact
// answer of one published state between the call's start and end; the final index equals a
// serial replay of the same mutations. The test's own log of states (version -> content) is
// written by the mutators, which the test serialises among themselves (as the library does);
// searchers never wait for them.
inline void run_ids_stress(int32_t backend, int searchers, std::chrono::milliseconds run_for, int64_t budget = 0) {
  using namespace stress_detail;
  const int64_t dim = 12, nlist = 8, k = 5, nq = 2;
  const std::vector<float> pool = clustered_vectors(6000, dim, 32, 21);
  auto params = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend}, {IVF_PARAM_NPROBE, nlist},
                             {IVF_PARAM_DEVICE_BUDGET, budget}});
  IndexPtr idx = make_index(dim, params.get());
  ASSERT_TRUE(idx);
  ASSERT_EQ(ivf_train(idx.get(), pool.data(), IVF_DTYPE_F32, 6000, dim), IVF_OK);

  struct Content {
    std::vector<int64_t> ids;
    std::vector<float> rows;
  };
  using ContentPtr = std::shared_ptr<const Content>;
  std::mutex mutators, log_mutex;
  std::map<int64_t, ContentPtr> log;
  std::map<int64_t, std::vector<float>> model;  // id -> vector (unique ids by construction)
  struct Op {
    int kind;  // 0 add, 1 remove, 2 update
    std::vector<int64_t> ids;
    std::vector<float> rows;
  };
  std::vector<Op> replay;
  auto record = [&] {
    auto c = std::make_shared<Content>();
    for (const auto& [id, v] : model) {
      c->ids.push_back(id);
      c->rows.insert(c->rows.end(), v.begin(), v.end());
    }
    const int64_t v = version_of(idx.get());
    std::lock_guard<std::mutex> lock(log_mutex);
    log[v] = std::move(c);
  };
  record();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> bad{0}, failures{0}, searches{0}, ops_done[3] = {0, 0, 0}, saves{0};
  std::string first_why;
  // A failed call: counted, and the first one's message kept for the report.
  std::mutex fail_mutex;
  std::string first_failure;
  auto failed = [&](const char* what, ivf_status s) {
    if (failures++ == 0) {
      std::lock_guard<std::mutex> lock(fail_mutex);
      first_failure = std::string(what) + ": status " + std::to_string(s) + ": " + ivf_last_error_message();
    }
  };
  std::atomic<int64_t> next_id{0};
  std::atomic<int> turn{0};  // the three mutators take turns (a plain mutex starves two of them)
  auto mutator = [&](int kind) {
    std::mt19937_64 rng(100 + kind);
    while (!stop.load()) {
      if (turn.load() != kind) {
        std::this_thread::yield();
        continue;
      }
      std::lock_guard<std::mutex> serial(mutators);
      struct Pass {
        std::atomic<int>& t;
        int next;
        ~Pass() { t.store(next); }
      } pass{turn, (kind + 1) % 3};
      Op op{kind, {}, {}};
      const int64_t n = 1 + static_cast<int64_t>(rng() % 20);
      if (kind == 1) {
        for (int64_t i = 0; i < n && !model.empty(); ++i) op.ids.push_back(std::next(model.begin(), rng() % model.size())->first);
        if (op.ids.empty()) continue;
      } else {
        std::set<int64_t> taken;
        for (int64_t i = 0; i < n; ++i) {
          int64_t id = (kind == 2 && !model.empty() && rng() % 2) ? std::next(model.begin(), rng() % model.size())->first
                                                                   : next_id++;
          if (!taken.insert(id).second) continue;
          op.ids.push_back(id);
          const int64_t r = static_cast<int64_t>(rng() % 6000);
          op.rows.insert(op.rows.end(), pool.begin() + r * dim, pool.begin() + (r + 1) * dim);
        }
      }
      const int64_t m = static_cast<int64_t>(op.ids.size());
      ivf_status s = IVF_OK;
      if (kind == 0) s = ivf_add(idx.get(), op.rows.data(), IVF_DTYPE_F32, m, dim, op.ids.data());
      if (kind == 1) s = ivf_remove(idx.get(), nullptr, op.ids.data(), m, nullptr);
      if (kind == 2) s = ivf_update(idx.get(), nullptr, op.rows.data(), IVF_DTYPE_F32, m, dim, op.ids.data());
      if (s != IVF_OK) {
        failed(kind == 0 ? "add" : kind == 1 ? "remove" : "update", s);
        continue;
      }
      for (int64_t i = 0; i < m; ++i) {
        if (kind == 1) model.erase(op.ids[i]);
        else model[op.ids[i]] = std::vector<float>(op.rows.begin() + i * dim, op.rows.begin() + (i + 1) * dim);
      }
      replay.push_back(std::move(op));
      record();
      ++ops_done[kind];
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < searchers; ++t)
    threads.emplace_back([&, t] {
      const std::vector<float> queries = clustered_vectors(nq, dim, 32, 500 + t);
      std::vector<int64_t> ids(static_cast<std::size_t>(nq * k));
      std::vector<float> dists(ids.size());
      while (!stop.load()) {
        const int64_t v0 = version_of(idx.get());
        const ivf_status st =
            ivf_search(idx.get(), nullptr, queries.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data());
        if (st != IVF_OK) {
          failed("search", st);
          continue;
        }
        const int64_t v1 = version_of(idx.get());
        ++searches;
        bool ok = false;
        std::string why;
        for (int64_t v = v0; v <= v1 && !ok; ++v) {
          ContentPtr c;
          for (int spin = 0; !c; ++spin) {  // the mutator logs right after its call returns
            {
              std::lock_guard<std::mutex> lock(log_mutex);
              auto it = log.find(v);
              if (it != log.end()) c = it->second;
            }
            if (!c) std::this_thread::sleep_for(std::chrono::microseconds(50));
            if (spin > 200000) break;
          }
          if (!c) break;
          // Renumber: matches_state wants ids 0..rows-1; map the returned ids to positions.
          std::map<int64_t, int64_t> pos;
          for (std::size_t i = 0; i < c->ids.size(); ++i) pos[c->ids[i]] = static_cast<int64_t>(i);
          std::vector<int64_t> local(ids.size());
          for (std::size_t i = 0; i < ids.size(); ++i) {
            auto it = pos.find(ids[i]);
            local[i] = ids[i] == -1 ? -1 : it == pos.end() ? -2 : it->second;
          }
          ok = matches_state(c->rows, static_cast<int64_t>(c->ids.size()), queries.data(), nq, dim, k, local.data(),
                             dists.data(), &why);
        }
        if (!ok) {
          if (bad++ == 0) first_why = "versions " + std::to_string(v0) + ".." + std::to_string(v1) + ": " + why;
        }
      }
    });
  threads.emplace_back(mutator, 0);
  threads.emplace_back(mutator, 1);
  threads.emplace_back(mutator, 2);
  threads.emplace_back([&] {
    while (!stop.load()) {
      const std::vector<unsigned char> b = serialized(idx.get());
      ivf_index* copy = nullptr;
      const ivf_status st = ivf_deserialize(b.data(), b.size(), nullptr, &copy);
      if (st != IVF_OK) failed("deserialize", st);
      ivf_free(copy);
      ++saves;
    }
  });
  std::this_thread::sleep_for(run_for);
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_EQ(bad.load(), 0) << first_why;
  EXPECT_GT(ops_done[0].load(), 0);
  EXPECT_GT(ops_done[1].load(), 0);
  EXPECT_GT(ops_done[2].load(), 0);
  EXPECT_GT(saves.load(), 0);
  // A serial replay of the same mutations gives the same index, search for search.
  IndexPtr serial = make_index(dim, params.get());
  ASSERT_EQ(ivf_train(serial.get(), pool.data(), IVF_DTYPE_F32, 6000, dim), IVF_OK);
  for (const Op& op : replay) {
    const int64_t m = static_cast<int64_t>(op.ids.size());
    if (op.kind == 0) ASSERT_EQ(ivf_add(serial.get(), op.rows.data(), IVF_DTYPE_F32, m, dim, op.ids.data()), IVF_OK);
    if (op.kind == 1) ASSERT_EQ(ivf_remove(serial.get(), nullptr, op.ids.data(), m, nullptr), IVF_OK);
    if (op.kind == 2) ASSERT_EQ(ivf_update(serial.get(), nullptr, op.rows.data(), IVF_DTYPE_F32, m, dim, op.ids.data()), IVF_OK);
  }
  EXPECT_TRUE(serialized(idx.get()) == serialized(serial.get())) << "final index differs from a serial replay";
  std::printf("[ids stress] %d searchers: %lld searches; %lld adds, %lld removes, %lld updates, %lld saves\n", searchers,
              (long long)searches.load(), (long long)ops_done[0].load(), (long long)ops_done[1].load(),
              (long long)ops_done[2].load(), (long long)saves.load());
}

}  // namespace ivftest
