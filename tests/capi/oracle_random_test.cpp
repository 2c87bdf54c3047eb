// Random indexes checked against a brute-force oracle through the public header, CPU backend:
// every storage type and metric (integer storage under L2 and inner product), one to three
// parts split or replicated, batches with NaN or non-integer rows that must be refused and leave
// the index as it was, removals, updates (of held and absent ids), serialize round trips and
// damaged copies, filters that allow or deny, duplicated rows (ties everywhere) and data at
// scales 1e-3 to 1e12. The oracle is the stored (decoded) rows, read back with ivf_get after
// every add and update; an exhaustive search (nprobe >= nlist) must then return, rank by rank,
// the oracle's distances (to a tolerance of 1e-4 of the largest), ids that are held, permitted
// and distinct, and the metric's padding past the permitted rows. Hostile searches (a wrong
// dimension, k 0, n 0, NULL queries, an infinite query) must be refused.
#include <gtest/gtest.h>
#include <ivfgpu/ivfgpu.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/test_util.hpp"

namespace {

int failures = 0;  // CHECK failures so far: the seeds stop at the first failing one
#define CHECK(c, ...)                                      \
  do {                                                     \
    if (!(c)) {                                            \
      ++failures;                                          \
      char msg_[512];                                      \
      std::snprintf(msg_, sizeof msg_, __VA_ARGS__);       \
      ADD_FAILURE() << msg_ << " [" << ivf_last_error_message() << "]"; \
    }                                                      \
  } while (0)

// A call that must succeed (parameter keys and values the test chose in range).
void must(ivf_status s, const char* what) { EXPECT_EQ(s, IVF_OK) << what << ": " << ivf_last_error_message(); }

struct Model {
  std::map<int64_t, std::vector<float>> rows;  // id -> stored decoded row
};

void run_iterations(int iters, uint64_t seed0) {
  for (int it = 0; it < iters; ++it) {
    std::mt19937_64 rng(seed0 * 1000003 + it);
    auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
    const int64_t dim = pick({1, 2, 3, 4, 5, 7, 8, 16, 31, 64, 100, 129, 960});
    const int64_t nlist = pick({1, 2, 3, 7, 16});
    const int32_t metric = static_cast<int32_t>(rng() % 3);
    const int32_t storage =
        static_cast<int32_t>(pick({IVF_DTYPE_F32, IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8, IVF_DTYPE_I8}));
    const bool integer = storage == IVF_DTYPE_U8 || storage == IVF_DTYPE_I8;
    const int64_t shards = pick({1, 1, 2, 3});
    const int32_t shard_mode = static_cast<int32_t>(rng() % 2);
    ivf_params* cp = nullptr;
    if (ivf_params_create(&cp) != IVF_OK) {
      ADD_FAILURE() << "params";
      return;
    }
    must(ivf_params_set_int(cp, IVF_PARAM_NLIST, nlist), "ivf_params_set_int");
    must(ivf_params_set_int(cp, IVF_PARAM_METRIC, metric), "ivf_params_set_int");
    must(ivf_params_set_int(cp, IVF_PARAM_BACKEND, IVF_BACKEND_CPU), "ivf_params_set_int");
    must(ivf_params_set_int(cp, IVF_PARAM_STORAGE_TYPE, storage), "ivf_params_set_int");
    must(ivf_params_set_int(cp, IVF_PARAM_SEED, static_cast<int64_t>(rng() % 1000)), "ivf_params_set_int");
    if (shards > 1) {
      must(ivf_params_set_int(cp, IVF_PARAM_SHARDS, shards), "ivf_params_set_int");
      must(ivf_params_set_int(cp, IVF_PARAM_SHARD_MODE, shard_mode), "ivf_params_set_int");
    }
    ivf_index* idx = nullptr;
    ivf_status st = ivf_create(&idx, dim, cp);
    ivf_params_free(cp);
    if (integer && metric == IVF_METRIC_COSINE) {  // refused by design: unit rows are not integers
      CHECK(st == IVF_ERR_UNSUPPORTED && idx == nullptr, "integer cosine create status %d", st);
      ivf_free(idx);
      continue;
    }
    CHECK(st == IVF_OK, "create dim %ld nlist %ld metric %d storage %d shards %ld", (long)dim, (long)nlist, metric,
          storage, (long)shards);
    if (st != IVF_OK) continue;
    const int64_t sc = pick({1, 1, 2, 3, 4});
    // f16 refuses what its range cannot hold (|x| < 65,520): no 1e12 there.
    const float scale = integer                                    ? 1.0f
                        : sc == 2                                  ? 1000.0f
                        : sc == 3                                  ? 1e-3f
                        : sc == 4 && storage != IVF_DTYPE_F16      ? 1e12f
                                                                   : 1.0f;
    const bool dups = rng() % 3 == 0;  // rows repeated: ties everywhere
    auto gen = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n * dim));
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (auto& x : v) {
        if (storage == IVF_DTYPE_U8) x = static_cast<float>(rng() % 256);
        else if (storage == IVF_DTYPE_I8) x = static_cast<float>(static_cast<int>(rng() % 256) - 128);
        else x = g(rng) * scale;
      }
      if (dups)
        for (int64_t i = 1; i < n; ++i)
          if (rng() % 2 == 0) std::copy(v.begin() + (i - 1) * dim, v.begin() + i * dim, v.begin() + i * dim);
      return v;
    };
    const int64_t ntrain = nlist + static_cast<int64_t>(rng() % 300);
    std::vector<float> tr = gen(ntrain);
    st = ivf_train(idx, tr.data(), IVF_DTYPE_F32, ntrain, dim);
    CHECK(st == IVF_OK, "train n %ld dim %ld", (long)ntrain, (long)dim);
    Model m;
    int64_t next_id = 0;
    auto refresh = [&](const std::vector<int64_t>& ids) {
      std::vector<float> out(ids.size() * dim);
      std::vector<uint8_t> found(ids.size());
      ivf_status s = ivf_get(idx, nullptr, ids.data(), static_cast<int64_t>(ids.size()), out.data(), IVF_DTYPE_F32,
                             dim, found.data());
      CHECK(s == IVF_OK, "get");
      for (size_t i = 0; i < ids.size(); ++i) {
        CHECK(found[i] == 1, "get found id %ld", (long)ids[i]);
        m.rows[ids[i]] = std::vector<float>(out.begin() + i * dim, out.begin() + (i + 1) * dim);
      }
    };
    const int rounds = 1 + static_cast<int>(rng() % 4);
    for (int r = 0; r < rounds; ++r) {
      const int64_t n = static_cast<int64_t>(rng() % 400);
      std::vector<float> x = gen(n);
      std::vector<int64_t> ids(static_cast<size_t>(n));
      for (auto& id : ids) id = next_id++ * 3 + 7;  // unique, sparse
      // Hostile: a NaN row must be refused and change nothing.
      if (n > 0 && !integer && rng() % 4 == 0) {
        std::vector<float> bad = x;
        bad[static_cast<size_t>(rng() % bad.size())] = NAN;
        int64_t before = -1, after = -2;
        must(ivf_ntotal(idx, &before), "ivf_ntotal");
        CHECK(ivf_add(idx, bad.data(), IVF_DTYPE_F32, n, dim, ids.data()) == IVF_ERR_INVALID_ARGUMENT, "NaN add");
        must(ivf_ntotal(idx, &after), "ivf_ntotal");
        CHECK(before == after, "NaN add changed ntotal %ld -> %ld", (long)before, (long)after);
      }
      if (integer && n > 0 && rng() % 4 == 0) {
        std::vector<float> bad = x;
        bad[static_cast<size_t>(rng() % bad.size())] = 0.5f;
        CHECK(ivf_add(idx, bad.data(), IVF_DTYPE_F32, n, dim, ids.data()) == IVF_ERR_INVALID_ARGUMENT,
              "non-integer add to integer storage");
      }
      st = ivf_add(idx, x.data(), IVF_DTYPE_F32, n, dim, ids.data());
      CHECK(st == IVF_OK || (n == 0 && st == IVF_ERR_INVALID_ARGUMENT), "add n %ld status %d", (long)n, st);
      if (st == IVF_OK && n > 0) refresh(ids);
      // Removals and updates.
      if (!m.rows.empty() && rng() % 2 == 0) {
        std::vector<int64_t> rm;
        for (auto& kv : m.rows)
          if (rng() % 5 == 0) rm.push_back(kv.first);
        rm.push_back(-5);  // absent
        int64_t removed = -1;
        CHECK(ivf_remove(idx, nullptr, rm.data(), static_cast<int64_t>(rm.size()), &removed) == IVF_OK, "remove");
        CHECK(removed == static_cast<int64_t>(rm.size()) - 1, "removed %ld of %zu", (long)removed, rm.size() - 1);
        for (int64_t id : rm) m.rows.erase(id);
      }
      if (!m.rows.empty() && rng() % 2 == 0) {
        std::vector<int64_t> up;
        for (auto& kv : m.rows)
          if (rng() % 7 == 0) up.push_back(kv.first);
        if (rng() % 2 == 0) up.push_back(next_id++ * 3 + 7);  // an update of an absent id adds it
        std::vector<float> ux = gen(static_cast<int64_t>(up.size()));
        st = ivf_update(idx, nullptr, ux.data(), IVF_DTYPE_F32, static_cast<int64_t>(up.size()), dim, up.data());
        CHECK(st == IVF_OK || (up.empty() && st == IVF_ERR_INVALID_ARGUMENT), "update %zu status %d", up.size(), st);
        if (st == IVF_OK && !up.empty()) refresh(up);
      }
    }
    int64_t nt = -1;
    CHECK(ivf_ntotal(idx, &nt) == IVF_OK && nt == static_cast<int64_t>(m.rows.size()), "ntotal %ld model %zu",
          (long)nt, m.rows.size());
    // Serialize round trip (and a corrupted copy must be refused, not crash).
    if (rng() % 3 == 0) {
      size_t size = 0;
      st = ivf_serialize(idx, nullptr, 0, &size);
      if (st == IVF_OK || st == IVF_ERR_BUFFER_TOO_SMALL) {
        std::vector<unsigned char> buf(size);
        CHECK(ivf_serialize(idx, buf.data(), buf.size(), &size) == IVF_OK, "serialize");
        std::vector<unsigned char> bad = buf;
        if (!bad.empty()) bad[rng() % bad.size()] ^= static_cast<unsigned char>(1 + rng() % 255);
        ivf_index* b = nullptr;
        ivf_params* lp = nullptr;
        must(ivf_params_create(&lp), "ivf_params_create");
        must(ivf_params_set_int(lp, IVF_PARAM_BACKEND, IVF_BACKEND_CPU), "ivf_params_set_int");
        ivf_status bs = ivf_deserialize(bad.data(), bad.size(), lp, &b);
        CHECK(bs != IVF_OK || b != nullptr, "corrupt deserialize ok without handle");
        if (b) ivf_free(b);
        ivf_index* c = nullptr;
        st = ivf_deserialize(buf.data(), buf.size(), lp, &c);
        CHECK(st == IVF_OK, "deserialize status %d", st);
        ivf_params_free(lp);
        if (st == IVF_OK) {
          ivf_free(idx);
          idx = c;
        }
      } else {
        CHECK(false, "serialize size status %d", st);
      }
    }
    // Exhaustive searches against the oracle.
    const int64_t nq = 1 + static_cast<int64_t>(rng() % 20);
    std::vector<float> q = gen(nq);
    if (integer && rng() % 2 == 0)  // real-valued queries on integer rows too
      for (auto& v : q) v += 0.25f;
    const int64_t k = pick({1, 2, 5, 10, 100, 1000});
    const bool use_filter = rng() % 3 == 0;
    const int32_t fmode = static_cast<int32_t>(rng() % 2);
    std::set<int64_t> fset;
    for (auto& kv : m.rows)
      if (rng() % 3 == 0) fset.insert(kv.first);
    std::vector<int64_t> fids(fset.begin(), fset.end());
    ivf_filter* filter = nullptr;
    if (use_filter)
      CHECK(ivf_filter_create(&filter, fids.data(), static_cast<int64_t>(fids.size()), fmode) == IVF_OK, "filter");
    ivf_params* sp = nullptr;
    must(ivf_params_create(&sp), "ivf_params_create");
    must(ivf_params_set_int(sp, IVF_PARAM_NPROBE, nlist + static_cast<int64_t>(rng() % 3)), "ivf_params_set_int");
    if (filter) must(ivf_params_set_ptr(sp, IVF_PARAM_FILTER, filter), "ivf_params_set_ptr");
    std::vector<int64_t> ids(static_cast<size_t>(nq * k), 12345);
    std::vector<float> dists(static_cast<size_t>(nq * k), 12345.0f);
    st = ivf_search(idx, sp, q.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data());
    CHECK(st == IVF_OK, "search status %d nq %ld k %ld", st, (long)nq, (long)k);
    const bool larger = metric != IVF_METRIC_L2;
    if (st == IVF_OK) {
      for (int64_t i = 0; i < nq; ++i) {
        std::vector<float> qq(q.begin() + i * dim, q.begin() + (i + 1) * dim);
        if (metric == IVF_METRIC_COSINE) {
          double s = 0;
          for (float v : qq) s += double(v) * v;
          s = std::sqrt(s);
          if (s > 0)
            for (auto& v : qq) v = static_cast<float>(v / s);
        }
        std::vector<std::pair<double, int64_t>> truth;
        for (auto& kv : m.rows) {
          if (filter && (fset.count(kv.first) > 0) != (fmode == IVF_FILTER_ALLOW)) continue;
          double d = 0;
          for (int64_t j = 0; j < dim; ++j) {
            const double a = qq[j], b = kv.second[j];
            d += larger ? a * b : (a - b) * (a - b);
          }
          truth.push_back({larger ? -d : d, kv.first});
        }
        std::sort(truth.begin(), truth.end());
        std::map<int64_t, double> dist_of;
        for (auto& t : truth) dist_of[t.second] = larger ? -t.first : t.first;
        double mag = 1;
        for (auto& t : truth) mag = std::max(mag, std::fabs(t.first));
        const double tol = 1e-4 * mag + 1e-3;
        std::set<int64_t> seen;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t id = ids[i * k + j];
          const float d = dists[i * k + j];
          if (j < static_cast<int64_t>(truth.size())) {
            const double want = larger ? -truth[j].first : truth[j].first;
            CHECK(std::fabs(d - want) <= tol, "it %d q %ld rank %ld dist %.6g want %.6g (metric %d storage %d dim %ld)",
                  it, (long)i, (long)j, d, want, metric, storage, (long)dim);
            CHECK(dist_of.count(id) == 1, "it %d q %ld rank %ld id %ld not a live permitted id", it, (long)i, (long)j,
                  (long)id);
            if (dist_of.count(id)) CHECK(std::fabs(d - dist_of[id]) <= tol, "it %d id %ld dist %.6g true %.6g", it,
                                         (long)id, d, dist_of[id]);
            CHECK(seen.insert(id).second, "it %d q %ld id %ld twice", it, (long)i, (long)id);
          } else {
            CHECK(id == -1 && std::isinf(d) && (larger ? d < 0 : d > 0), "it %d q %ld rank %ld pad id %ld d %g", it,
                  (long)i, (long)j, (long)id, d);
          }
        }
      }
    }
    // Hostile searches.
    CHECK(ivf_search(idx, sp, q.data(), IVF_DTYPE_F32, nq, dim + 1, k, ids.data(), dists.data()) ==
              IVF_ERR_INVALID_ARGUMENT, "dim mismatch");
    CHECK(ivf_search(idx, sp, q.data(), IVF_DTYPE_F32, nq, dim, 0, ids.data(), dists.data()) ==
              IVF_ERR_INVALID_ARGUMENT, "k 0");
    CHECK(ivf_search(idx, sp, q.data(), IVF_DTYPE_F32, 0, dim, k, ids.data(), dists.data()) ==
              IVF_ERR_INVALID_ARGUMENT, "n 0");
    CHECK(ivf_search(idx, sp, nullptr, IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data()) ==
              IVF_ERR_INVALID_ARGUMENT, "null queries");
    if (!integer) {
      std::vector<float> bq = q;
      bq[0] = INFINITY;
      CHECK(ivf_search(idx, sp, bq.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data()) ==
                IVF_ERR_INVALID_ARGUMENT, "inf query");
    }
    ivf_params_free(sp);
    ivf_filter_free(filter);
    ivf_free(idx);
  }
}

}  // namespace

// Stops at the first failing iteration's batch of messages (each CHECK adds one).
TEST(CapiOracle, RandomIndexesMatchBruteForceOnTheStoredRows) {
  const auto [first, count] = ivftest::soak_seeds(4);
  for (uint64_t seed = first; seed < first + count && failures == 0; ++seed) run_iterations(150, seed);
}
