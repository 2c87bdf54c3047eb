// Compact storage types (IVF_PARAM_STORAGE_TYPE: f16, bf16, uint8, int8) on the backend
// IVFTEST_BACKEND names (the CPU in CI; gpu_storage_types_capi_test runs it on CUDA), through
// the C ABI: every type x metric x k x a sample of dims against a brute force over the
// stored (decoded) values read back with ivf_get; conversions and their refusals; persistence;
// FAISS export; load-time conversion; memory in proportion; recall on real uint8 data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/dtypes.hpp"
#include "common/id_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {

int32_t backend() {
  const char* b = std::getenv("IVFTEST_BACKEND");
  return b != nullptr && std::strcmp(b, "cuda") == 0 ? IVF_BACKEND_CUDA : IVF_BACKEND_CPU;
}


// f32 data each type can hold (dtypes.hpp): 16 clusters, integers in range for the integer
// types, reals otherwise.
std::vector<float> data_for(ivf_dtype t, int64_t n, int64_t dim, uint64_t seed) {
  return ivftest::data_for(t, n, dim, 16, seed, seed + 1);
}

IndexPtr typed_index(ivf_dtype t, int32_t metric, int64_t dim, int64_t nlist) {
  auto p = make_params({{IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, metric},
                        {IVF_PARAM_STORAGE_TYPE, t}});
  return make_index(dim, p.get());
}

// The stored values, decoded, in id order (ids 0..n-1).
std::vector<float> stored_rows(const ivf_index* idx, int64_t n, int64_t dim) {
  std::vector<int64_t> ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<float> out(static_cast<std::size_t>(n * dim));
  std::vector<uint8_t> found(static_cast<std::size_t>(n));
  EXPECT_EQ(ivf_get(idx, nullptr, ids.data(), n, out.data(), IVF_DTYPE_F32, dim, found.data()), IVF_OK)
      << ivf_last_error_message();
  for (uint8_t f : found) EXPECT_EQ(f, 1);
  return out;
}

// Exact top-k over `rows` (ids = row numbers) in double: the reference the index must match.
Searched brute(const std::vector<float>& rows, int64_t n, const std::vector<float>& q, int64_t nq, int64_t dim,
               int64_t k, int32_t metric) {
  Searched r;
  r.ids.assign(static_cast<std::size_t>(nq * k), -1);
  r.dists.assign(r.ids.size(), 0.0f);
  const bool larger = metric != IVF_METRIC_L2;
  std::vector<float> qn(q.begin(), q.begin() + nq * dim);
  if (metric == IVF_METRIC_COSINE)
    for (int64_t i = 0; i < nq; ++i) {
      double s = 0;
      for (int64_t j = 0; j < dim; ++j) s += double(qn[i * dim + j]) * qn[i * dim + j];
      const double inv = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
      for (int64_t j = 0; j < dim; ++j) qn[i * dim + j] = float(qn[i * dim + j] * inv);
    }
  for (int64_t i = 0; i < nq; ++i) {
    std::vector<std::pair<double, int64_t>> all;
    for (int64_t r2 = 0; r2 < n; ++r2) {
      double d = 0;
      for (int64_t j = 0; j < dim; ++j) {
        const double a = qn[i * dim + j], b = rows[r2 * dim + j];
        d += larger ? a * b : (a - b) * (a - b);
      }
      all.emplace_back(larger ? -d : d, r2);
    }
    const int64_t m = std::min<int64_t>(k, n);
    std::partial_sort(all.begin(), all.begin() + m, all.end());
    for (int64_t j = 0; j < m; ++j) {
      r.ids[i * k + j] = all[j].second;
      r.dists[i * k + j] = float(larger ? -all[j].first : all[j].first);
    }
    for (int64_t j = m; j < k; ++j)
      r.dists[i * k + j] = larger ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  return r;
}

}  // namespace

// nprobe = nlist makes the search exhaustive: it must equal the brute force over what is stored.
TEST(StorageTypes, EveryTypeMetricKAndDimAgainstABruteForce) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  for (ivf_dtype t : {IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8, IVF_DTYPE_I8}) {
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_COSINE}) {
      if (is_int(t) && metric == IVF_METRIC_COSINE) continue;  // refused: see below
      for (int64_t dim : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{31}, int64_t{96}, int64_t{129}}) {
        const int64_t n = 1200, nlist = 8, nq = 20;
        const auto x = data_for(t, n, dim, 1 + dim);
        const auto q = data_for(t, nq, dim, 1000 + dim);
        IndexPtr idx = typed_index(t, metric, dim, nlist);
        ASSERT_TRUE(idx);
        ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK) << ivf_last_error_message();
        ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
        const std::vector<float> rows = stored_rows(idx.get(), n, dim);
        for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{100}, int64_t{1000}}) {
          const Searched got = search_all(idx.get(), q, nq, dim, k, nlist);
          const Searched want = brute(rows, n, q, nq, dim, k, metric);
          EXPECT_EQ(same_results(got.ids, got.dists, want.ids, want.dists, nq, k, 1e-4), "")
              << type_name(t) << " metric " << metric << " dim " << dim << " k " << k;
        }
        // Queries of the storage type: integer queries against integer rows are exact integers.
        if (is_int(t)) {
          std::vector<unsigned char> qb(static_cast<std::size_t>(nq * dim));
          for (std::size_t i = 0; i < qb.size(); ++i) {
            const int v = static_cast<int>(q[i]);
            qb[i] = static_cast<unsigned char>(static_cast<int8_t>(v));
            if (t == IVF_DTYPE_U8) qb[i] = static_cast<unsigned char>(v);
          }
          std::vector<int64_t> ids(static_cast<std::size_t>(nq * 10));
          std::vector<float> d(ids.size());
          auto sp = make_params({{IVF_PARAM_NPROBE, nlist}});
          ASSERT_EQ(ivf_search(idx.get(), sp.get(), qb.data(), t, nq, dim, 10, ids.data(), d.data()), IVF_OK)
              << ivf_last_error_message();
          const Searched want = brute(rows, n, q, nq, dim, 10, metric);
          EXPECT_EQ(d, want.dists) << type_name(t) << " dim " << dim << ": integer distances are exact";
        }
      }
    }
  }
}

TEST(StorageTypes, ConversionsRoundOrRefuseNamingTheRow) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const int64_t dim = 4;
  std::vector<float> x(64 * dim, 1.0f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
  // uint8: integers in [0, 255] only.
  for (float bad : {1.5f, 256.0f, -1.0f}) {
    IndexPtr idx = typed_index(IVF_DTYPE_U8, IVF_METRIC_L2, dim, 2);
    ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, 64, dim), IVF_OK);
    std::vector<float> y = x;
    y[5 * dim + 2] = bad;
    EXPECT_EQ(ivf_add(idx.get(), y.data(), IVF_DTYPE_F32, 64, dim, nullptr), IVF_ERR_INVALID_ARGUMENT) << bad;
    EXPECT_NE(std::string(ivf_last_error_message()).find("row 5"), std::string::npos) << ivf_last_error_message();
    int64_t n = -1;
    ASSERT_EQ(ivf_ntotal(idx.get(), &n), IVF_OK);
    EXPECT_EQ(n, 0);
  }
  // int8: [-128, 127].
  {
    IndexPtr idx = typed_index(IVF_DTYPE_I8, IVF_METRIC_L2, dim, 2);
    ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, 64, dim), IVF_OK);
    std::vector<float> y = x;
    y[3] = 200.0f;
    EXPECT_EQ(ivf_add(idx.get(), y.data(), IVF_DTYPE_F32, 64, dim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  }
  // f16: out of range refused; in range rounds to nearest even (2049 -> 2048, 2051 -> 2052).
  {
    IndexPtr idx = typed_index(IVF_DTYPE_F16, IVF_METRIC_L2, dim, 2);
    ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, 64, dim), IVF_OK);
    std::vector<float> y(dim, 1e6f);
    int64_t id = 0;
    EXPECT_EQ(ivf_add(idx.get(), y.data(), IVF_DTYPE_F32, 1, dim, &id), IVF_ERR_INVALID_ARGUMENT);
    const float row[4] = {2049.0f, 2051.0f, 0.1f, -3.0f};
    ASSERT_EQ(ivf_add(idx.get(), row, IVF_DTYPE_F32, 1, dim, &id), IVF_OK);
    float back[4];
    uint8_t found = 0;
    ASSERT_EQ(ivf_get(idx.get(), nullptr, &id, 1, back, IVF_DTYPE_F32, dim, &found), IVF_OK);
    EXPECT_EQ(back[0], 2048.0f);
    EXPECT_EQ(back[1], 2052.0f);
    EXPECT_EQ(back[2], 0.0999755859375f);  // the nearest f16
    EXPECT_EQ(back[3], -3.0f);
    // get in the storage type returns the raw f16 bits.
    uint16_t raw[4];
    ASSERT_EQ(ivf_get(idx.get(), nullptr, &id, 1, raw, IVF_DTYPE_F16, dim, &found), IVF_OK);
    EXPECT_EQ(raw[3], 0xc200u);  // -3.0 in binary16
    // f16 data with a NaN is refused like f32 data with one.
    uint16_t nan_row[4] = {0x3c00u, 0x7e00u, 0, 0};
    EXPECT_EQ(ivf_add(idx.get(), nan_row, IVF_DTYPE_F16, 1, dim, &id), IVF_ERR_INVALID_ARGUMENT);
  }
  // bf16: round to nearest even on the top 16 bits.
  {
    IndexPtr idx = typed_index(IVF_DTYPE_BF16, IVF_METRIC_L2, dim, 2);
    ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, 64, dim), IVF_OK);
    // Ties: to 1.0 and to 1.015625. (A value near bf16's top, 3e38, is refused under L2 before
    // any rounding: its squared norm passes FLT_MAX / 8; bad_input_test covers that rule.)
    const float row[4] = {1.00390625f, 1.01171875f, 3.0e18f, 0.0f};
    int64_t id = 9;
    ASSERT_EQ(ivf_add(idx.get(), row, IVF_DTYPE_F32, 1, dim, &id), IVF_OK) << ivf_last_error_message();
    float back[4];
    ASSERT_EQ(ivf_get(idx.get(), nullptr, &id, 1, back, IVF_DTYPE_F32, dim, nullptr), IVF_OK);
    EXPECT_EQ(back[0], 1.0f);
    EXPECT_EQ(back[1], 1.015625f);
    // A row just inside the norm bound in f32 may round past it in bf16 (2^62 (1 - 2^-20)
    // rounds to 2^62: two of them make 2^125 > FLT_MAX / 8). The add took it, so the file
    // it makes must open again.
    const float edge = std::ldexp(1.0f - std::ldexp(1.0f, -20), 62);
    const float big[4] = {edge, edge, 0.0f, 0.0f};
    id = 10;
    ASSERT_EQ(ivf_add(idx.get(), big, IVF_DTYPE_F32, 1, dim, &id), IVF_OK) << ivf_last_error_message();
    std::size_t size = 0;
    ASSERT_EQ(ivf_serialize(idx.get(), nullptr, 0, &size), IVF_OK);
    std::vector<unsigned char> file(size);
    ASSERT_EQ(ivf_serialize(idx.get(), file.data(), size, &size), IVF_OK);
    ivf_index* again = nullptr;
    EXPECT_EQ(ivf_deserialize(file.data(), size, nullptr, &again), IVF_OK) << ivf_last_error_message();
    ivf_free(again);
  }
  // Mixed types: f16 data to a uint8 index, uint8 queries to an f32 index.
  {
    IndexPtr idx = typed_index(IVF_DTYPE_U8, IVF_METRIC_L2, dim, 2);
    ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, 64, dim), IVF_OK);
    std::vector<uint16_t> h(dim * 2, 0x3c00u);
    EXPECT_EQ(ivf_add(idx.get(), h.data(), IVF_DTYPE_F16, 2, dim, nullptr), IVF_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ivf_last_error_message()).find("uint8"), std::string::npos);
    IndexPtr f = typed_index(IVF_DTYPE_F32, IVF_METRIC_L2, dim, 2);
    ASSERT_EQ(ivf_train(f.get(), x.data(), IVF_DTYPE_F32, 64, dim), IVF_OK);
    std::vector<uint8_t> qb(dim, 1);
    int64_t i = 0;
    float d = 0;
    EXPECT_EQ(ivf_search(f.get(), nullptr, qb.data(), IVF_DTYPE_U8, 1, dim, 1, &i, &d), IVF_ERR_INVALID_ARGUMENT);
  }
}

TEST(StorageTypes, CosineNeedsAFloatTypeAndEveryBackendTakesCompactTypes) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  auto p = make_params({{IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_METRIC, IVF_METRIC_COSINE},
                        {IVF_PARAM_STORAGE_TYPE, IVF_DTYPE_U8}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_create(&raw, 8, p.get()), IVF_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ivf_last_error_message()).find("cosine"), std::string::npos);
  // A CUDA index of a compact type is made wherever an f32 one is (refused only without a
  // usable device, for both).
  auto c32 = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}});
  auto c16 = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_STORAGE_TYPE, IVF_DTYPE_F16}});
  ivf_index* f32_raw = nullptr;
  const ivf_status f32_status = ivf_create(&f32_raw, 8, c32.get());
  ivf_free(f32_raw);
  raw = nullptr;
  EXPECT_EQ(ivf_create(&raw, 8, c16.get()), f32_status);
  ivf_free(raw);
  // AUTO picks the backend it picks for f32.
  auto a = make_params({{IVF_PARAM_STORAGE_TYPE, IVF_DTYPE_BF16}, {IVF_PARAM_NLIST, 4}});
  auto a32 = make_params({{IVF_PARAM_NLIST, 4}});
  IndexPtr idx = make_index(8, a.get());
  IndexPtr plain = make_index(8, a32.get());
  int64_t v = -1, w = -2;
  ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_BACKEND, &v), IVF_OK);
  ASSERT_EQ(ivf_index_info(plain.get(), IVF_INFO_BACKEND, &w), IVF_OK);
  EXPECT_EQ(v, w);
  ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_STORAGE_TYPE, &v), IVF_OK);
  EXPECT_EQ(v, IVF_DTYPE_BF16);
  auto bad = make_params({});
  EXPECT_EQ(ivf_params_set_int(bad.get(), IVF_PARAM_STORAGE_TYPE, 5), IVF_ERR_INVALID_ARGUMENT);
}

TEST(StorageTypes, FilesKeepTheTypeAndFaissExportRefusesIt) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const int64_t dim = 16, n = 2000, nlist = 8;
  for (ivf_dtype t : {IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8, IVF_DTYPE_I8}) {
    const auto x = data_for(t, n, dim, 7);
    IndexPtr idx = typed_index(t, IVF_METRIC_L2, dim, nlist);
    ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
    const auto bytes = bytes_of(idx.get());
    ivf_index* raw = nullptr;
    // Opened on the backend under test: without params AUTO takes a GPU where there is one, and
    // the results contract does not promise the CPU's distance bits there.
    auto open = make_params({{IVF_PARAM_BACKEND, backend()}});
    ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), open.get(), &raw), IVF_OK) << ivf_last_error_message();
    IndexPtr back(raw);
    int64_t v = -1;
    ASSERT_EQ(ivf_index_info(back.get(), IVF_INFO_STORAGE_TYPE, &v), IVF_OK);
    EXPECT_EQ(v, t);
    const Searched a = search_all(idx.get(), x, 50, dim, 10, 3), b = search_all(back.get(), x, 50, dim, 10, 3);
    EXPECT_EQ(a.ids, b.ids) << type_name(t);
    EXPECT_EQ(a.dists, b.dists) << type_name(t);
    // Memory falls with the element size: against an f32 index of the same rows, the saving is
    // the rows' bytes times (4 - element size), within 10% (ids, centroids and the id map are
    // the same for both).
    IndexPtr f32 = typed_index(IVF_DTYPE_F32, IVF_METRIC_L2, dim, nlist);
    ASSERT_EQ(ivf_train(f32.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    ASSERT_EQ(ivf_add(f32.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
    int64_t mem = 0, mem32 = 0;
    const int32_t where = backend() == IVF_BACKEND_CUDA ? IVF_INFO_DEVICE_MEMORY_BYTES : IVF_INFO_HOST_MEMORY_BYTES;
    ASSERT_EQ(ivf_index_info(idx.get(), where, &mem), IVF_OK);
    ASSERT_EQ(ivf_index_info(f32.get(), where, &mem32), IVF_OK);
    const int64_t element = (t == IVF_DTYPE_U8 || t == IVF_DTYPE_I8) ? 1 : 2;
    EXPECT_GE(mem32 - mem, n * dim * (4 - element) * 9 / 10) << type_name(t) << ": " << mem << " vs f32 " << mem32;
    const std::string path = ::testing::TempDir() + "storage_faiss.index";
    EXPECT_EQ(ivf_save_faiss(idx.get(), path.c_str()), IVF_ERR_UNSUPPORTED);
    EXPECT_FALSE(file_exists(path));
  }
}

// An f32 file opened with a storage type converts on load (and refuses values it cannot hold).
TEST(StorageTypes, LoadingConvertsAnF32Index) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const int64_t dim = 8, n = 1000;
  const auto x = data_for(IVF_DTYPE_U8, n, dim, 9);  // integers: uint8 holds them exactly
  IndexPtr f = typed_index(IVF_DTYPE_F32, IVF_METRIC_L2, dim, 4);
  ASSERT_EQ(ivf_train(f.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(f.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  const auto bytes = bytes_of(f.get());
  auto p = make_params({{IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_STORAGE_TYPE, IVF_DTYPE_U8}});
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), p.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr u(raw);
  const Searched a = search_all(f.get(), x, 40, dim, 10, 4), b = search_all(u.get(), x, 40, dim, 10, 4);
  EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, 40, 10), "");
  // Real values cannot become uint8.
  const auto reals = data_for(IVF_DTYPE_F32, n, dim, 10);
  IndexPtr r = typed_index(IVF_DTYPE_F32, IVF_METRIC_L2, dim, 4);
  ASSERT_EQ(ivf_train(r.get(), reals.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(r.get(), reals.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  const auto rb = bytes_of(r.get());
  raw = nullptr;
  EXPECT_EQ(ivf_deserialize(rb.data(), rb.size(), p.get(), &raw), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(raw, nullptr);
}

// bigann10k is uint8 data: indexed as uint8 it gives the recall of an f32 index of the same
// data (within 0.002) at every nprobe.
TEST(StorageTypes, Bigann10kAsUint8KeepsTheRecallOfF32) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const std::string dir = data_dir() + "/bigann10k/";
  if (!file_exists(dir + "bigann10k_base.bvecs"))
    GTEST_SKIP() << "SKIPPED LOUDLY: bigann10k not found under " << data_dir()
                 << " (set IVFGPU_DATA_DIR to the shared data directory)";
  int64_t dim = 0, nb = 0, nq = 0, gt_cols = 0, gq = 0, d2 = 0;
  const auto base8 = read_vecs<uint8_t>(dir + "bigann10k_base.bvecs", dim, nb);
  const auto query8 = read_vecs<uint8_t>(dir + "bigann10k_query.bvecs", d2, nq);
  const auto gt = read_vecs<int32_t>(dir + "bigann10k_groundtruth.ivecs", gt_cols, gq);
  ASSERT_GT(nb, 0);
  ASSERT_EQ(dim, d2);
  std::vector<float> base(base8.begin(), base8.end()), query(query8.begin(), query8.end());
  const int64_t nlist = 64, k = 10;
  IndexPtr f = typed_index(IVF_DTYPE_F32, IVF_METRIC_L2, dim, nlist);
  ASSERT_EQ(ivf_train(f.get(), base.data(), IVF_DTYPE_F32, nb, dim), IVF_OK);
  const auto trained = bytes_of(f.get());
  ASSERT_EQ(ivf_add(f.get(), base.data(), IVF_DTYPE_F32, nb, dim, nullptr), IVF_OK);
  auto p = make_params({{IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_STORAGE_TYPE, IVF_DTYPE_U8}});
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_deserialize(trained.data(), trained.size(), p.get(), &raw), IVF_OK);
  IndexPtr u(raw);
  ASSERT_EQ(ivf_add(u.get(), base8.data(), IVF_DTYPE_U8, nb, dim, nullptr), IVF_OK) << ivf_last_error_message();
  for (int64_t nprobe : {int64_t{1}, int64_t{4}, int64_t{16}, int64_t{64}}) {
    const Searched a = search_all(f.get(), query, nq, dim, k, nprobe);
    std::vector<int64_t> ids(static_cast<std::size_t>(nq * k));
    std::vector<float> d(ids.size());
    auto sp = make_params({{IVF_PARAM_NPROBE, nprobe}});
    ASSERT_EQ(ivf_search(u.get(), sp.get(), query8.data(), IVF_DTYPE_U8, nq, dim, k, ids.data(), d.data()), IVF_OK);
    // The uint8 index with f32 queries too (distances in fp32 to the decoded rows).
    const Searched c = search_all(u.get(), query, nq, dim, k, nprobe);
    const double ra = recall_at_k(a.ids, gt, nq, k, gt_cols), rb = recall_at_k(ids, gt, nq, k, gt_cols),
                 rc = recall_at_k(c.ids, gt, nq, k, gt_cols);
    std::printf("bigann10k nprobe %lld: recall f32 %.4f, uint8 (uint8 queries) %.4f, uint8 (f32 queries) %.4f\n",
                static_cast<long long>(nprobe), ra, rb, rc);
    EXPECT_NEAR(ra, rb, 0.002) << "nprobe " << nprobe;
    EXPECT_NEAR(ra, rc, 0.002) << "nprobe " << nprobe << ", f32 queries";
  }
}

// siftsmall, unit-normalised (real values: siftsmall's integers are exact in f16 and bf16),
// stored as f16 and bf16: recall within 0.005 of f32.
TEST(StorageTypes, SiftsmallAsF16AndBf16KeepsTheRecall) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const std::string dir = data_dir() + "/siftsmall/";
  if (!file_exists(dir + "siftsmall_base.fvecs"))
    GTEST_SKIP() << "SKIPPED LOUDLY: siftsmall not found under " << data_dir()
                 << " (set IVFGPU_DATA_DIR to the shared data directory)";
  int64_t dim = 0, nb = 0, nq = 0, gt_cols = 0, gq = 0, d2 = 0;
  auto base = read_vecs<float>(dir + "siftsmall_base.fvecs", dim, nb);
  auto query = read_vecs<float>(dir + "siftsmall_query.fvecs", d2, nq);
  const auto gt = read_vecs<int32_t>(dir + "siftsmall_groundtruth.ivecs", gt_cols, gq);
  auto unit = [&](std::vector<float>& v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t j = 0; j < dim; ++j) s += double(v[i * dim + j]) * v[i * dim + j];
      for (int64_t j = 0; j < dim; ++j) v[i * dim + j] = float(v[i * dim + j] / std::sqrt(s));
    }
  };
  unit(base, nb);
  unit(query, nq);
  const int64_t nlist = 64, k = 10;
  IndexPtr f = typed_index(IVF_DTYPE_F32, IVF_METRIC_L2, dim, nlist);
  ASSERT_EQ(ivf_train(f.get(), base.data(), IVF_DTYPE_F32, nb, dim), IVF_OK);
  const auto trained = bytes_of(f.get());
  ASSERT_EQ(ivf_add(f.get(), base.data(), IVF_DTYPE_F32, nb, dim, nullptr), IVF_OK);
  // The reference: exact neighbours of the normalised data (the shipped ground truth is for
  // the raw vectors).
  const Searched exact = search_all(f.get(), query, nq, dim, k, nlist);
  std::vector<int32_t> truth(exact.ids.begin(), exact.ids.end());
  for (ivf_dtype t : {IVF_DTYPE_F16, IVF_DTYPE_BF16}) {
    auto p = make_params({{IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_STORAGE_TYPE, t}});
    ivf_index* raw = nullptr;
    ASSERT_EQ(ivf_deserialize(trained.data(), trained.size(), p.get(), &raw), IVF_OK);
    IndexPtr c(raw);
    ASSERT_EQ(ivf_add(c.get(), base.data(), IVF_DTYPE_F32, nb, dim, nullptr), IVF_OK) << ivf_last_error_message();
    for (int64_t nprobe : {int64_t{1}, int64_t{8}, int64_t{64}}) {
      const Searched a = search_all(f.get(), query, nq, dim, k, nprobe), b = search_all(c.get(), query, nq, dim, k, nprobe);
      const double ra = recall_at_k(a.ids, truth, nq, k, k), rb = recall_at_k(b.ids, truth, nq, k, k);
      std::printf("siftsmall (unit) nprobe %lld: recall f32 %.4f, %s %.4f\n", static_cast<long long>(nprobe), ra,
                  type_name(t), rb);
      EXPECT_NEAR(ra, rb, 0.005) << type_name(t) << " nprobe " << nprobe;
    }
  }
  (void)gt;
  (void)gq;
}
