// Ids as first-class on the CPU backend (CI): remove / update / get / count against a host
// model, filtered search against an index of the permitted vectors only, unique ids, filters'
// edge cases. GPU twins: tests/gpu/ids_gpu_test.cpp.
#include <limits>
#include <string>

#include "common/id_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

TEST(Ids, RandomWorkloadDuplicateIds) { run_id_workload(IVF_BACKEND_CPU, false, 1500, 11); }
TEST(Ids, RandomWorkloadUniqueIds) { run_id_workload(IVF_BACKEND_CPU, true, 1500, 12); }

TEST(Filters, MatchAnIndexOfThePermittedVectors) {
  run_filter_workload(IVF_BACKEND_CPU, 20000, 24, 32, 50, 10, {0.001, 0.01, 0.1, 0.5, 1.0}, false);
}
TEST(Filters, HugeSparseIds) { run_filter_workload(IVF_BACKEND_CPU, 5000, 8, 16, 30, 10, {0.01, 0.5}, true); }

TEST(Filters, EdgeCases) {
  ivf_filter* f = nullptr;
  EXPECT_EQ(ivf_filter_create(nullptr, nullptr, 0, IVF_FILTER_ALLOW), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_filter_create(&f, nullptr, 3, IVF_FILTER_ALLOW), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_filter_create(&f, nullptr, 0, 7), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(f, nullptr);
  ivf_filter_free(nullptr);
  // An empty allow list permits nothing (every row padded); an empty deny list everything.
  const int64_t dim = 8, n = 500;
  const auto x = random_vectors(n, dim, 5);
  auto p = make_params({{IVF_PARAM_NLIST, 4}, {IVF_PARAM_BACKEND, IVF_BACKEND_CPU}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  ASSERT_EQ(ivf_filter_create(&f, nullptr, 0, IVF_FILTER_ALLOW), IVF_OK);
  Searched r = search_all(idx.get(), x, 3, dim, 5, 4, f);
  for (int64_t id : r.ids) EXPECT_EQ(id, -1);
  ivf_filter_free(f);
  ASSERT_EQ(ivf_filter_create(&f, nullptr, 0, IVF_FILTER_DENY), IVF_OK);
  r = search_all(idx.get(), x, 3, dim, 5, 4, f);
  EXPECT_EQ(r.ids[0], 0);
  int64_t host = -1, device = -1;
  EXPECT_EQ(ivf_filter_bytes(f, &host, &device), IVF_OK);
  EXPECT_GE(host, 0);
  EXPECT_EQ(device, 0);
  ivf_filter_free(f);
  // Extreme ids (INT64_MIN, INT64_MAX, -1 never matches a row but is a legal set member).
  const int64_t extreme[] = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1, 0};
  ASSERT_EQ(ivf_filter_create(&f, extreme, 4, IVF_FILTER_ALLOW), IVF_OK);
  r = search_all(idx.get(), x, 1, dim, 5, 4, f);
  EXPECT_EQ(r.ids[0], 0);
  EXPECT_EQ(r.ids[1], -1);
  ivf_filter_free(f);
}

TEST(Ids, ArgumentsAndPolicies) {
  const int64_t dim = 8, n = 300;
  const auto x = random_vectors(n, dim, 6);
  auto p = make_params({{IVF_PARAM_NLIST, 4}, {IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_UNIQUE_IDS, 1}});
  IndexPtr idx = make_index(dim, p.get());
  int64_t removed = -1;
  const int64_t one = 1;
  EXPECT_EQ(ivf_remove(idx.get(), nullptr, &one, 1, &removed), IVF_ERR_INVALID_STATE);
  ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  // Sequential ids continue after the largest one held.
  ASSERT_EQ(ivf_remove(idx.get(), nullptr, &one, 1, &removed), IVF_OK);
  EXPECT_EQ(removed, 1);
  ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, 1, dim, nullptr), IVF_OK);
  int64_t count = -1;
  const int64_t next = n;
  ASSERT_EQ(ivf_count_ids(idx.get(), &next, 1, &count), IVF_OK);
  EXPECT_EQ(count, 1);
  // Repeats inside one add or update are refused; nothing changes.
  const int64_t twice[] = {5000, 5000};
  EXPECT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, 2, dim, twice), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_update(idx.get(), nullptr, x.data(), IVF_DTYPE_F32, 2, dim, twice), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_update(idx.get(), nullptr, x.data(), IVF_DTYPE_F32, 2, dim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  // An update with a NaN row changes nothing (all or nothing).
  std::vector<float> bad(x.begin(), x.begin() + 2 * dim);
  bad[dim + 1] = std::nanf("");
  const int64_t pair[] = {2, 3};
  int64_t v0 = 0, v1 = 0;
  ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_STATE_VERSION, &v0), IVF_OK);
  EXPECT_EQ(ivf_update(idx.get(), nullptr, bad.data(), IVF_DTYPE_F32, 2, dim, pair), IVF_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_STATE_VERSION, &v1), IVF_OK);
  EXPECT_EQ(v0, v1);
  // get: wrong dimension, NULL outputs, n = 0.
  std::vector<float> out(dim);
  EXPECT_EQ(ivf_get(idx.get(), nullptr, pair, 1, out.data(), IVF_DTYPE_F32, dim + 1, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_get(idx.get(), nullptr, pair, 1, nullptr, IVF_DTYPE_F32, dim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_get(idx.get(), nullptr, pair, 0, nullptr, IVF_DTYPE_F32, dim, nullptr), IVF_OK);
  EXPECT_EQ(ivf_remove(idx.get(), nullptr, nullptr, 0, nullptr), IVF_OK);
  EXPECT_EQ(ivf_remove(idx.get(), nullptr, nullptr, 2, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_count_ids(idx.get(), pair, 2, nullptr), IVF_ERR_INVALID_ARGUMENT);
  // get returns the stored vector.
  uint8_t found = 0;
  ASSERT_EQ(ivf_get(idx.get(), nullptr, &pair[1], 1, out.data(), IVF_DTYPE_F32, dim, &found), IVF_OK);
  EXPECT_EQ(found, 1);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), x.begin() + 3 * dim));
  int64_t unique = -1;
  ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_UNIQUE_IDS, &unique), IVF_OK);
  EXPECT_EQ(unique, 1);
  // After INT64_MAX is held no sequential id is left: refused, nothing changes (the check
  // comes before any id is counted out: counting past INT64_MAX was undefined behaviour).
  const int64_t top = std::numeric_limits<int64_t>::max();
  ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, 1, dim, &top), IVF_OK);
  int64_t held = -1, after = -1;
  ASSERT_EQ(ivf_ntotal(idx.get(), &held), IVF_OK);
  EXPECT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, 2, dim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ivf_last_error_message()).find("no sequential ids left"), std::string::npos);
  ASSERT_EQ(ivf_ntotal(idx.get(), &after), IVF_OK);
  EXPECT_EQ(after, held);
}

// Removing most rows compacts the lists without changing any result.
TEST(Ids, CompactionChangesNoResult) {
  const int64_t dim = 12, n = 3000, k = 8, nq = 20;
  const auto x = clustered_vectors(n, dim, 30, 9);
  const auto q = clustered_vectors(nq, dim, 30, 10);
  auto p = make_params({{IVF_PARAM_NLIST, 8}, {IVF_PARAM_BACKEND, IVF_BACKEND_CPU}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  const auto trained_empty = bytes_of(idx.get());
  ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  std::multimap<int64_t, std::vector<float>> model;
  for (int64_t i = 0; i < n; ++i) model.emplace(i, std::vector<float>(x.begin() + i * dim, x.begin() + (i + 1) * dim));
  std::vector<int64_t> gone;
  for (int64_t i = 0; i < n; i += 3) gone.push_back(i);  // a third: past the compaction threshold
  for (std::size_t c = 0; c < gone.size(); c += 100) {
    const int64_t m = std::min<int64_t>(100, static_cast<int64_t>(gone.size() - c));
    ASSERT_EQ(ivf_remove(idx.get(), nullptr, gone.data() + c, m, nullptr), IVF_OK);
  }
  for (int64_t id : gone) model.erase(id);
  int64_t dead = -1;
  ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_REMOVED_ROWS, &dead), IVF_OK);
  EXPECT_LT(dead * 4, n) << "compaction did not run";
  IndexPtr fresh = fresh_index(trained_empty, IVF_BACKEND_CPU, model, dim);
  for (int64_t nprobe : {2, 8}) {
    const Searched a = search_all(idx.get(), q, nq, dim, k, nprobe);
    const Searched b = search_all(fresh.get(), q, nq, dim, k, nprobe);
    EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, nq, k), "");
  }
}
