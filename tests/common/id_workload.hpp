// Workloads of issue "ids as first-class", shared by the CPU tests (CI) and their GPU twins:
// random interleaved add / remove / update against a host model, filtered search against an
// index holding only the permitted vectors, and the results contract used to compare them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.hpp"

namespace ivftest {

// "The same results" (shared/docs/results-contract.md): distances equal within fp32 rounding;
// ids equal except inside a group of tied distances; the k-th distance matching. Returns "" or
// the first difference.
inline std::string same_results(const std::vector<int64_t>& ai, const std::vector<float>& ad,
                                const std::vector<int64_t>& bi, const std::vector<float>& bd, int64_t n, int64_t k,
                                double rel_tol = 1e-5) {
  auto close = [&](float x, float y) {
    if (std::isinf(x) || std::isinf(y)) return x == y;
    return std::abs(double(x) - y) <= rel_tol * (1.0 + std::max(std::abs(double(x)), std::abs(double(y))));
  };
  for (int64_t q = 0; q < n; ++q) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = q * k + j;
      if (!close(ad[e], bd[e]))
        return "row " + std::to_string(q) + " rank " + std::to_string(j) + ": distance " + std::to_string(ad[e]) +
               " vs " + std::to_string(bd[e]);
      if ((ai[e] == -1) != (bi[e] == -1)) return "row " + std::to_string(q) + " rank " + std::to_string(j) + ": padding differs";
    }
    // Tie groups: the ids of each group must match as sets, except the group that reaches rank
    // k-1 (which the cut may split differently).
    for (int64_t j = 0; j < k;) {
      int64_t end = j + 1;
      while (end < k && close(ad[q * k + end], ad[q * k + j])) ++end;
      if (end < k) {
        std::vector<int64_t> x(ai.begin() + q * k + j, ai.begin() + q * k + end);
        std::vector<int64_t> y(bi.begin() + q * k + j, bi.begin() + q * k + end);
        std::sort(x.begin(), x.end());
        std::sort(y.begin(), y.end());
        if (x != y) return "row " + std::to_string(q) + " ranks " + std::to_string(j) + ".." + std::to_string(end - 1) + ": ids differ";
      }
      j = end;
    }
  }
  return "";
}

struct Searched {
  std::vector<int64_t> ids;
  std::vector<float> dists;
};

inline Searched search_all(const ivf_index* idx, const std::vector<float>& q, int64_t nq, int64_t dim, int64_t k,
                           int64_t nprobe, const ivf_filter* filter = nullptr) {
  Searched r;
  r.ids.assign(static_cast<std::size_t>(nq * k), -7);
  r.dists.assign(r.ids.size(), 0.0f);
  auto p = make_params({{IVF_PARAM_NPROBE, nprobe}});
  if (filter) EXPECT_EQ(ivf_params_set_ptr(p.get(), IVF_PARAM_FILTER, const_cast<ivf_filter*>(filter)), IVF_OK);
  EXPECT_EQ(ivf_search(idx, p.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, r.ids.data(), r.dists.data()), IVF_OK)
      << ivf_last_error_message();
  return r;
}

// An index with the centroids of `trained_empty` (serialized bytes of a trained index with no
// vectors) holding exactly `rows` (id -> vectors).
inline IndexPtr fresh_index(const std::vector<unsigned char>& trained_empty, int32_t backend,
                            const std::multimap<int64_t, std::vector<float>>& rows, int64_t dim, int64_t budget = 0) {
  auto p = make_params({{IVF_PARAM_BACKEND, backend}, {IVF_PARAM_DEVICE_BUDGET, budget}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_deserialize(trained_empty.data(), trained_empty.size(), p.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr idx(raw);
  if (rows.empty()) return idx;
  std::vector<float> x;
  std::vector<int64_t> ids;
  for (const auto& [id, v] : rows) {
    ids.push_back(id);
    x.insert(x.end(), v.begin(), v.end());
  }
  EXPECT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, static_cast<int64_t>(ids.size()), dim, ids.data()), IVF_OK)
      << ivf_last_error_message();
  return idx;
}

inline std::vector<unsigned char> bytes_of(const ivf_index* idx) {
  size_t size = 0;
  EXPECT_EQ(ivf_serialize(idx, nullptr, 0, &size), IVF_OK);
  std::vector<unsigned char> b(size);
  EXPECT_EQ(ivf_serialize(idx, b.data(), b.size(), &size), IVF_OK);
  return b;
}

// Interleaved add / remove / update / search against a host model (id -> vectors), `steps`
// operations; after every few steps the index's results equal a fresh index of the survivors.
// budget, shards, mode: IVF_PARAM_DEVICE_BUDGET, IVF_PARAM_SHARDS and IVF_PARAM_SHARD_MODE of the
// index under test (the fresh indexes it is compared with are plain).
inline void run_id_workload(int32_t backend, bool unique, int steps, uint64_t seed, int64_t budget = 0,
                            int64_t shards = 1, int64_t mode = IVF_SHARD_SPLIT) {
  const int64_t dim = 16, nlist = 16, k = 10, nq = 20;
  std::mt19937_64 rng(seed);
  const std::vector<float> pool = clustered_vectors(4000, dim, 40, seed + 1);
  const std::vector<float> queries = clustered_vectors(nq, dim, 40, seed + 2);
  auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend}, {IVF_PARAM_DEVICE_BUDGET, budget},
                        {IVF_PARAM_UNIQUE_IDS, unique ? 1 : 0}, {IVF_PARAM_SHARDS, shards}, {IVF_PARAM_SHARD_MODE, mode}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), pool.data(), IVF_DTYPE_F32, 4000, dim), IVF_OK);
  const std::vector<unsigned char> trained_empty = bytes_of(idx.get());
  std::multimap<int64_t, std::vector<float>> model;
  // Ids from a small range, spread over the int64 line (negatives, large values): repeats in
  // the duplicate mode, collisions to refuse in the unique mode.
  auto random_id = [&] {
    const int64_t base[] = {0, -5000, int64_t{1} << 40, (int64_t{1} << 62) - 100, -(int64_t{1} << 50)};
    // Unique ids need room to stay unique; duplicate mode wants repeats.
    return base[rng() % 5] + static_cast<int64_t>(rng() % (unique ? 100000 : 200));
  };
  auto row = [&] {
    const int64_t r = static_cast<int64_t>(rng() % 4000);
    return std::vector<float>(pool.begin() + r * dim, pool.begin() + (r + 1) * dim);
  };
  int64_t checks = 0, removed_total = 0;
  for (int step = 0; step < steps; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 5) {  // add a batch
      const int64_t n = 1 + static_cast<int64_t>(rng() % 40);
      std::vector<float> x;
      std::vector<int64_t> ids;
      std::map<int64_t, int> in_batch;
      for (int64_t i = 0; i < n; ++i) {
        int64_t id = random_id();
        if (unique) {
          for (int tries = 0; model.count(id) || in_batch.count(id); ++tries) {
            ASSERT_LT(tries, 1000) << "no free id found";
            id = random_id();
          }
          in_batch[id] = 1;
        }
        std::vector<float> v = row();
        x.insert(x.end(), v.begin(), v.end());
        ids.push_back(id);
      }
      ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK) << ivf_last_error_message();
      for (int64_t i = 0; i < n; ++i) model.emplace(ids[i], std::vector<float>(x.begin() + i * dim, x.begin() + (i + 1) * dim));
      if (unique && !model.empty()) {  // a repeated id is refused and changes nothing
        const int64_t taken = model.begin()->first;
        const std::vector<float> v = row();
        int64_t before = 0, after = 0;
        ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_STATE_VERSION, &before), IVF_OK);
        EXPECT_EQ(ivf_add(idx.get(), v.data(), IVF_DTYPE_F32, 1, dim, &taken), IVF_ERR_INVALID_ARGUMENT);
        ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_STATE_VERSION, &after), IVF_OK);
        EXPECT_EQ(before, after);
      }
    } else if (op < 8) {  // remove some ids (present and absent)
      std::vector<int64_t> ids;
      const int64_t n = 1 + static_cast<int64_t>(rng() % 20);
      for (int64_t i = 0; i < n; ++i) ids.push_back(rng() % 3 == 0 || model.empty() ? random_id()
                                                                                     : std::next(model.begin(), rng() % model.size())->first);
      int64_t removed = -1;
      ASSERT_EQ(ivf_remove(idx.get(), nullptr, ids.data(), n, &removed), IVF_OK) << ivf_last_error_message();
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      int64_t expect = 0;
      for (int64_t id : ids) expect += static_cast<int64_t>(model.erase(id));
      EXPECT_EQ(removed, expect);
      removed_total += removed;
    } else {  // update: replace some ids (present or new) with new rows
      const int64_t n = 1 + static_cast<int64_t>(rng() % 10);
      std::map<int64_t, std::vector<float>> upd;
      while (static_cast<int64_t>(upd.size()) < n)
        upd[rng() % 2 == 0 || model.empty() ? random_id() : std::next(model.begin(), rng() % model.size())->first] = row();
      std::vector<float> x;
      std::vector<int64_t> ids;
      for (const auto& [id, v] : upd) {
        ids.push_back(id);
        x.insert(x.end(), v.begin(), v.end());
      }
      ASSERT_EQ(ivf_update(idx.get(), nullptr, x.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK)
          << ivf_last_error_message();
      for (const auto& [id, v] : upd) {
        model.erase(id);
        model.emplace(id, v);
      }
    }
    int64_t ntotal = -1;
    ASSERT_EQ(ivf_ntotal(idx.get(), &ntotal), IVF_OK);
    ASSERT_EQ(ntotal, static_cast<int64_t>(model.size())) << "after step " << step;
    if (step % 25 == 24 || step == steps - 1) {
      IndexPtr fresh = fresh_index(trained_empty, backend, model, dim, shards > 1 ? 0 : budget);
      for (int64_t nprobe : {int64_t{3}, nlist}) {
        const Searched a = search_all(idx.get(), queries, nq, dim, k, nprobe);
        const Searched b = search_all(fresh.get(), queries, nq, dim, k, nprobe);
        const std::string diff = same_results(a.ids, a.dists, b.ids, b.dists, nq, k);
        ASSERT_EQ(diff, "") << "step " << step << ", nprobe " << nprobe;
      }
      // get and count agree with the model.
      std::vector<int64_t> ask;
      for (auto it = model.begin(); it != model.end() && ask.size() < 30; it = model.upper_bound(it->first)) ask.push_back(it->first);
      ask.push_back(random_id());
      std::vector<float> out(ask.size() * dim, -1.0f);
      std::vector<uint8_t> found(ask.size(), 9);
      std::vector<int64_t> counts(ask.size(), -1);
      ASSERT_EQ(ivf_get(idx.get(), nullptr, ask.data(), static_cast<int64_t>(ask.size()), out.data(), IVF_DTYPE_F32, dim,
                        found.data()), IVF_OK);
      ASSERT_EQ(ivf_count_ids(idx.get(), ask.data(), static_cast<int64_t>(ask.size()), counts.data()), IVF_OK);
      for (std::size_t i = 0; i < ask.size(); ++i) {
        const auto range = model.equal_range(ask[i]);
        const int64_t want = std::distance(range.first, range.second);
        EXPECT_EQ(counts[i], want) << "id " << ask[i];
        EXPECT_EQ(found[i], want > 0 ? 1 : 0) << "id " << ask[i];
        if (want == 0) {
          for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(out[i * dim + j], 0.0f);
          continue;
        }
        bool match = false;  // one of the id's vectors
        for (auto it = range.first; it != range.second; ++it)
          match = match || std::equal(it->second.begin(), it->second.end(), out.begin() + i * dim);
        EXPECT_TRUE(match) << "get returned a vector the id does not hold: id " << ask[i];
      }
      ++checks;
    }
  }
  EXPECT_GT(checks, 0);
  EXPECT_GT(removed_total, 0);
  // A round trip through a file keeps exactly the live vectors and the unique-ids flag.
  const std::vector<unsigned char> b = bytes_of(idx.get());
  ivf_index* raw = nullptr;
  auto lp = make_params({{IVF_PARAM_BACKEND, backend}, {IVF_PARAM_DEVICE_BUDGET, budget}});
  ASSERT_EQ(ivf_deserialize(b.data(), b.size(), lp.get(), &raw), IVF_OK);
  IndexPtr loaded(raw);
  int64_t flag = -1, n_loaded = -1, dead = -1;
  ASSERT_EQ(ivf_index_info(loaded.get(), IVF_INFO_UNIQUE_IDS, &flag), IVF_OK);
  ASSERT_EQ(ivf_index_info(loaded.get(), IVF_INFO_NTOTAL, &n_loaded), IVF_OK);
  ASSERT_EQ(ivf_index_info(loaded.get(), IVF_INFO_REMOVED_ROWS, &dead), IVF_OK);
  EXPECT_EQ(flag, unique ? 1 : 0);
  EXPECT_EQ(n_loaded, static_cast<int64_t>(model.size()));
  EXPECT_EQ(dead, 0);
  const Searched a = search_all(idx.get(), queries, nq, dim, k, nlist);
  const Searched c = search_all(loaded.get(), queries, nq, dim, k, nlist);
  EXPECT_EQ(same_results(a.ids, a.dists, c.ids, c.dists, nq, k), "");
  // The loaded index finds every id (its id map is built from the file).
  std::vector<int64_t> all;
  for (auto it = model.begin(); it != model.end(); it = model.upper_bound(it->first)) all.push_back(it->first);
  if (!all.empty()) {
    const int64_t m = static_cast<int64_t>(all.size());
    std::vector<float> out(static_cast<std::size_t>(m * dim));
    std::vector<uint8_t> found(static_cast<std::size_t>(m));
    std::vector<int64_t> counts(static_cast<std::size_t>(m));
    ASSERT_EQ(ivf_get(loaded.get(), nullptr, all.data(), m, out.data(), IVF_DTYPE_F32, dim, found.data()), IVF_OK);
    ASSERT_EQ(ivf_count_ids(loaded.get(), all.data(), m, counts.data()), IVF_OK);
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_EQ(found[i], 1) << "id " << all[i] << " lost by the round trip";
      EXPECT_EQ(counts[i], static_cast<int64_t>(model.count(all[i])));
    }
  }
}

// A filtered search equals an unfiltered search of an index holding only the permitted
// vectors (same centroids), for allow and deny lists at the given selectivities. The filtered
// index may have several parts (IVF_PARAM_SHARDS, split); the reference has one.
inline void run_filter_workload(int32_t backend, int64_t n, int64_t dim, int64_t nlist, int64_t nq, int64_t k,
                                const std::vector<double>& selectivities, bool huge_ids, int64_t budget = 0,
                                int64_t shards = 1) {
  std::mt19937_64 rng(77);
  const std::vector<float> base = clustered_vectors(n, dim, 4 * nlist, 78);
  const std::vector<float> queries = clustered_vectors(nq, dim, 4 * nlist, 79);
  std::vector<int64_t> ids(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = huge_ids ? (int64_t{1} << 62) - 3 * i : i;
  auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend}, {IVF_PARAM_DEVICE_BUDGET, budget},
                        {IVF_PARAM_SHARDS, shards}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  const std::vector<unsigned char> trained_empty = bytes_of(idx.get());
  ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK) << ivf_last_error_message();
  for (double sel : selectivities) {
    std::vector<int64_t> chosen;
    std::vector<char> in(static_cast<std::size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i)
      if (std::uniform_real_distribution<double>(0, 1)(rng) < sel) {
        chosen.push_back(ids[i]);
        in[i] = 1;
      }
    for (ivf_filter_mode mode : {IVF_FILTER_ALLOW, IVF_FILTER_DENY}) {
      ivf_filter* f = nullptr;
      ASSERT_EQ(ivf_filter_create(&f, chosen.data(), static_cast<int64_t>(chosen.size()), mode), IVF_OK);
      std::multimap<int64_t, std::vector<float>> permitted;
      for (int64_t i = 0; i < n; ++i)
        if (in[i] == (mode == IVF_FILTER_ALLOW ? 1 : 0))
          permitted.emplace(ids[i], std::vector<float>(base.begin() + i * dim, base.begin() + (i + 1) * dim));
      IndexPtr only = fresh_index(trained_empty, backend, permitted, dim, budget);
      for (int64_t nprobe : {int64_t{1}, int64_t{4}, nlist}) {
        const Searched a = search_all(idx.get(), queries, nq, dim, k, nprobe, f);
        const Searched b = search_all(only.get(), queries, nq, dim, k, nprobe);
        EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, nq, k), "")
            << "selectivity " << sel << (mode == IVF_FILTER_ALLOW ? " allow" : " deny") << " nprobe " << nprobe;
      }
      ivf_filter_free(f);
    }
  }
}

}  // namespace ivftest
