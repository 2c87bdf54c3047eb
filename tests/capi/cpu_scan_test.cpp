// The CPU backend's two scan orders (core/cpu/block_scan.hpp: list-major and query-major) and
// its two distance kernels (core/cpu/row_distances.hpp: SSE2 baseline and AVX2, every storage
// type) give the same results bit for bit: every storage type and metric, k from 1 to past
// the list sizes, nprobe from 1 to nlist, with removed rows, duplicate ids (exact ties) and
// allow/deny filters.
// IVFGPU_CPU_SCAN and IVFGPU_CPU_SIMD pin the choices per search, so both sides of a comparison
// search the same index. Also: an unpinned search of an index past the rule's 8 MiB, which
// scan_block sends list-major (the API cannot show which order ran: checked once by hand with a
// print), equals the pinned query-major answer.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.hpp"

using namespace ivftest;

namespace {

struct EnvPin {
  EnvPin(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvPin() { unsetenv(name_); }
  const char* name_;
};

struct Result {
  std::vector<int64_t> ids;
  std::vector<float> dists;
};

Result search(const ivf_index* idx, const std::vector<float>& q, int64_t dim, int64_t k, int64_t nprobe,
              const ivf_filter* filter) {
  const int64_t nq = static_cast<int64_t>(q.size()) / dim;
  Result r{std::vector<int64_t>(static_cast<std::size_t>(nq * k)), std::vector<float>(static_cast<std::size_t>(nq * k))};
  auto sp = make_params({{IVF_PARAM_NPROBE, nprobe}});
  if (filter != nullptr) EXPECT_EQ(ivf_params_set_ptr(sp.get(), IVF_PARAM_FILTER, const_cast<ivf_filter*>(filter)), IVF_OK);
  EXPECT_EQ(ivf_search(idx, sp.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, r.ids.data(), r.dists.data()), IVF_OK)
      << ivf_last_error_message();
  return r;
}

// Small integers: many exactly equal distances, so tie order is checked too.
std::vector<float> small_integers(int64_t n, int64_t dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> u(0, 12);
  std::vector<float> v(static_cast<std::size_t>(n * dim));
  for (float& x : v) x = static_cast<float>(u(rng));
  return v;
}

IndexPtr cpu_index(int64_t dim, int64_t nlist, int32_t metric, ivf_dtype storage, const std::vector<float>& x) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, metric},
                        {IVF_PARAM_STORAGE_TYPE, storage}, {IVF_PARAM_KMEANS_ITERS, 4}});
  IndexPtr idx = make_index(dim, p.get());
  if (!idx) return idx;
  const int64_t n = static_cast<int64_t>(x.size()) / dim;
  EXPECT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK) << ivf_last_error_message();
  std::vector<int64_t> ids(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = (i * 7919) % (n / 2);  // every id twice
  EXPECT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK) << ivf_last_error_message();
  return idx;
}

std::string differs(const Result& a, const Result& b) {
  for (std::size_t i = 0; i < a.ids.size(); ++i)
    if (a.ids[i] != b.ids[i] || std::memcmp(&a.dists[i], &b.dists[i], sizeof(float)) != 0)
      return "entry " + std::to_string(i) + ": id " + std::to_string(a.ids[i]) + " vs " + std::to_string(b.ids[i]) +
             ", distance " + std::to_string(a.dists[i]) + " vs " + std::to_string(b.dists[i]);
  return "";
}

}  // namespace

TEST(CpuScan, ListMajorAndQueryMajorGiveTheSameBits) {
  const int64_t n = 6000, dim = 19, nlist = 24, nq = 150;
  const std::vector<float> x = small_integers(n, dim, 1), q = small_integers(nq, dim, 2);
  std::vector<int64_t> some;
  for (int64_t id = 0; id < n / 2; id += 5) some.push_back(id);
  ivf_filter* allow = nullptr;
  ivf_filter* deny = nullptr;
  ASSERT_EQ(ivf_filter_create(&allow, some.data(), static_cast<int64_t>(some.size()), IVF_FILTER_ALLOW), IVF_OK);
  ASSERT_EQ(ivf_filter_create(&deny, some.data(), static_cast<int64_t>(some.size()), IVF_FILTER_DENY), IVF_OK);
  struct Case {
    ivf_dtype storage;
    int32_t metric;
  };
  for (Case c : {Case{IVF_DTYPE_F32, IVF_METRIC_L2}, Case{IVF_DTYPE_F32, IVF_METRIC_INNER_PRODUCT},
                 Case{IVF_DTYPE_F32, IVF_METRIC_COSINE}, Case{IVF_DTYPE_F16, IVF_METRIC_L2},
                 Case{IVF_DTYPE_BF16, IVF_METRIC_INNER_PRODUCT}, Case{IVF_DTYPE_BF16, IVF_METRIC_COSINE},
                 Case{IVF_DTYPE_U8, IVF_METRIC_L2}, Case{IVF_DTYPE_I8, IVF_METRIC_INNER_PRODUCT}}) {
    IndexPtr idx = cpu_index(dim, nlist, c.metric, c.storage, x);
    ASSERT_TRUE(idx);
    std::vector<int64_t> gone;
    for (int64_t id = 1; id < n / 2; id += 9) gone.push_back(id);
    int64_t removed = 0;
    ASSERT_EQ(ivf_remove(idx.get(), nullptr, gone.data(), static_cast<int64_t>(gone.size()), &removed), IVF_OK);
    ASSERT_GT(removed, 0);
    for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{300}})
      for (int64_t nprobe : {int64_t{1}, int64_t{5}, nlist})
        for (const ivf_filter* f : {static_cast<const ivf_filter*>(nullptr), static_cast<const ivf_filter*>(allow),
                                    static_cast<const ivf_filter*>(deny)}) {
          Result list_major, query_major;
          {
            EnvPin pin("IVFGPU_CPU_SCAN", "list");
            list_major = search(idx.get(), q, dim, k, nprobe, f);
          }
          {
            EnvPin pin("IVFGPU_CPU_SCAN", "query");
            query_major = search(idx.get(), q, dim, k, nprobe, f);
          }
          EXPECT_EQ(differs(list_major, query_major), "")
              << "storage " << c.storage << " metric " << c.metric << " k " << k << " nprobe " << nprobe
              << " filter " << (f == nullptr ? "none" : f == allow ? "allow" : "deny");
        }
  }
  ivf_filter_free(allow);
  ivf_filter_free(deny);
}

TEST(CpuScan, BaselineAndWideKernelsGiveTheSameBits) {
  const int64_t n = 4000, nlist = 16, nq = 100;
  for (int64_t dim : {int64_t{7}, int64_t{64}, int64_t{131}}) {
    std::mt19937_64 rng(static_cast<uint64_t>(dim));
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n * dim)), q(static_cast<std::size_t>(nq * dim));
    for (float& v : x) v = g(rng);
    for (float& v : q) v = g(rng);
    // Byte rows take integers: their own data (queries stay real-valued f32).
    const std::vector<float> xi = small_integers(n, dim, static_cast<uint64_t>(dim) + 1);
    for (ivf_dtype storage : {IVF_DTYPE_F32, IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8, IVF_DTYPE_I8})
      for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
        const bool bytes = storage == IVF_DTYPE_U8 || storage == IVF_DTYPE_I8;
        IndexPtr idx = cpu_index(dim, nlist, metric, storage, bytes ? xi : x);
        ASSERT_TRUE(idx);
        for (const char* order : {"list", "query"}) {
          EnvPin pin_order("IVFGPU_CPU_SCAN", order);
          const Result wide = search(idx.get(), q, dim, 20, 4, nullptr);
          Result baseline;
          {
            EnvPin pin("IVFGPU_CPU_SIMD", "baseline");
            baseline = search(idx.get(), q, dim, 20, 4, nullptr);
          }
          EXPECT_EQ(differs(wide, baseline), "") << "dim " << dim << " storage " << storage << " metric " << metric
                                                 << " order " << order;
        }
      }
  }
}

TEST(CpuScan, AnIndexPastTheCacheRuleEqualsTheQueryMajorScan) {
  // 72,000 x 32 f32 rows: 9 MB, past the rule's 8 MiB; 2,000 queries share the 64 lists.
  const int64_t n = 72000, dim = 32, nlist = 64, nq = 2000;
  const std::vector<float> x = random_vectors(n, dim, 5), q = random_vectors(nq, dim, 6);
  IndexPtr idx = cpu_index(dim, nlist, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const Result chosen = search(idx.get(), q, dim, 10, 8, nullptr);
  EnvPin pin("IVFGPU_CPU_SCAN", "query");
  EXPECT_EQ(differs(chosen, search(idx.get(), q, dim, 10, 8, nullptr)), "");
}
