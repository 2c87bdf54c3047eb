// Every entry point against bad input: the documented status, a message, no crash, nothing
// written outside the caller's buffers, and the index unchanged after a failed call.
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <thread>

#include "common/test_util.hpp"

using namespace ivftest;

namespace {

constexpr int64_t kDim = 8;
constexpr int64_t kNlist = 4;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

ParamsPtr cpu_params() {
  return make_params({{IVF_PARAM_NLIST, kNlist}, {IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NPROBE, 2}});
}

struct Trained {
  IndexPtr index;
  std::vector<float> data;
};

Trained trained_index(int64_t n = 200) {
  auto p = cpu_params();
  Trained t{make_index(kDim, p.get()), random_vectors(n, kDim, 7)};
  EXPECT_EQ(ivf_train(t.index.get(), t.data.data(), IVF_DTYPE_F32, n, kDim), IVF_OK) << ivf_last_error_message();
  EXPECT_EQ(ivf_add(t.index.get(), t.data.data(), IVF_DTYPE_F32, n, kDim, nullptr), IVF_OK) << ivf_last_error_message();
  return t;
}

int64_t ntotal_of(const ivf_index* idx) {
  int64_t n = -42;
  EXPECT_EQ(ivf_ntotal(idx, &n), IVF_OK);
  return n;
}

// Search results for fixed queries: equal before and after a failed call proves "unchanged".
std::pair<std::vector<int64_t>, std::vector<float>> fingerprint(const ivf_index* idx) {
  auto q = random_vectors(5, kDim, 99);
  std::vector<int64_t> ids(5 * 7);
  std::vector<float> d(5 * 7);
  EXPECT_EQ(ivf_search(idx, nullptr, q.data(), IVF_DTYPE_F32, 5, kDim, 7, ids.data(), d.data()), IVF_OK);
  return {ids, d};
}

void expect_failure(ivf_status got, ivf_status want) {
  EXPECT_EQ(got, want) << "got " << ivf_status_string(got) << ": " << ivf_last_error_message();
  EXPECT_NE(std::string(ivf_last_error_message()), "") << "a failure must leave a message";
}

}  // namespace

TEST(Status, StringsAreDistinctAndNeverNull) {
  std::set<std::string> seen;
  for (ivf_status s = 0; s >= -12; --s) {
    ASSERT_NE(ivf_status_string(s), nullptr);
    EXPECT_TRUE(seen.insert(ivf_status_string(s)).second) << "duplicate string for " << s;
  }
  EXPECT_STREQ(ivf_status_string(-999), "unknown status");
  EXPECT_STREQ(ivf_status_string(IVF_OK), "ok");
}

TEST(Status, LastErrorIsThreadLocalNeverNullAndClearedOnSuccess) {
  EXPECT_EQ(ivf_params_create(nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(ivf_last_error_message(), "");
  std::string other;
  std::thread([&] { other = ivf_last_error_message(); }).join();
  EXPECT_EQ(other, "") << "another thread must not see this thread's message";
  ivf_params* p = nullptr;
  ASSERT_EQ(ivf_params_create(&p), IVF_OK);
  EXPECT_STREQ(ivf_last_error_message(), "");
  ivf_params_free(p);
}

TEST(Version, RuntimeMatchesHeader) {
  std::string expect = std::to_string(IVF_VERSION_MAJOR) + "." + std::to_string(IVF_VERSION_MINOR) +
                       "." + std::to_string(IVF_VERSION_PATCH);
  EXPECT_EQ(std::string(ivf_version()), expect);
  EXPECT_EQ(ivf_abi_version(), static_cast<uint32_t>(IVF_ABI_VERSION));
}

TEST(Api, FunctionTableIsVersioned) {
  const ivf_api_v1* api = ivf_get_api(1);
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->struct_size, sizeof(ivf_api_v1));
  EXPECT_EQ(api->abi_version, 1u);
  EXPECT_EQ(api->search, &ivf_search);
  EXPECT_EQ(ivf_get_api(0), nullptr);
  EXPECT_EQ(ivf_get_api(2), nullptr);
}

TEST(Params, UnknownKeyOutOfBoundsAndNull) {
  auto p = make_params({});
  expect_failure(ivf_params_set_int(p.get(), 9999, 1), IVF_ERR_UNSUPPORTED);
  expect_failure(ivf_params_set_int(p.get(), IVF_PARAM_NLIST, 0), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_params_set_int(p.get(), IVF_PARAM_NPROBE, 0), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_params_set_int(p.get(), IVF_PARAM_METRIC, 3), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_params_set_int(nullptr, IVF_PARAM_NLIST, 4), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_params_set_ptr(p.get(), IVF_PARAM_NLIST, nullptr), IVF_ERR_UNSUPPORTED);
  int64_t v = 0;
  ASSERT_EQ(ivf_params_get_int(p.get(), IVF_PARAM_NLIST, &v), IVF_OK);
  EXPECT_EQ(v, 1024) << "a refused set must leave the default";
  ASSERT_EQ(ivf_params_get_int(p.get(), IVF_PARAM_NPROBE, &v), IVF_OK);
  EXPECT_EQ(v, 8);
  expect_failure(ivf_params_get_int(p.get(), IVF_PARAM_NLIST, nullptr), IVF_ERR_INVALID_ARGUMENT);
  int64_t lo = 0, hi = 0;
  ASSERT_EQ(ivf_param_bounds(IVF_PARAM_METRIC, &lo, &hi), IVF_OK);
  EXPECT_EQ(lo, IVF_METRIC_L2);
  EXPECT_EQ(hi, IVF_METRIC_COSINE);
  expect_failure(ivf_param_bounds(9999, &lo, &hi), IVF_ERR_UNSUPPORTED);
  ivf_params_free(nullptr);  // a no-op
}

TEST(Create, RejectsBadArguments) {
  auto p = cpu_params();
  ivf_index* idx = reinterpret_cast<ivf_index*>(0x1);
  expect_failure(ivf_create(nullptr, kDim, p.get()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_create(&idx, 0, p.get()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_create(&idx, -5, p.get()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_create(&idx, kInt64Max, p.get()), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(idx, reinterpret_cast<ivf_index*>(0x1)) << "out must be untouched on failure";
  ivf_free(nullptr);  // a no-op
}

TEST(Create, CudaWithoutDeviceIsUnsupported) {
  int32_t devices = -1;
  ASSERT_EQ(ivf_cuda_device_count(&devices), IVF_OK);
  if (devices > 0) GTEST_SKIP() << "a CUDA device exists; this checks the no-device path";
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}});
  ivf_index* idx = nullptr;
  expect_failure(ivf_create(&idx, kDim, p.get()), IVF_ERR_UNSUPPORTED);
  EXPECT_EQ(idx, nullptr);
  // AUTO falls back to the CPU.
  auto a = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_AUTO}});
  auto index = make_index(kDim, a.get());
  int64_t backend = 0;
  ASSERT_EQ(ivf_index_info(index.get(), IVF_INFO_BACKEND, &backend), IVF_OK);
  EXPECT_EQ(backend, IVF_BACKEND_CPU);
}

TEST(Train, RejectsBadArgumentsAndStaysUntrained) {
  auto p = cpu_params();
  auto idx = make_index(kDim, p.get());
  auto data = random_vectors(100, kDim, 1);
  expect_failure(ivf_train(nullptr, data.data(), IVF_DTYPE_F32, 100, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), nullptr, IVF_DTYPE_F32, 100, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, 0, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, -1, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, 100, kDim + 1), IVF_ERR_INVALID_ARGUMENT);
  // An f32 index takes f32 data only (compact data goes to an index that stores that type).
  expect_failure(ivf_train(idx.get(), data.data(), IVF_DTYPE_F16, 100, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), data.data(), IVF_DTYPE_U8, 100, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), data.data(), 99, 100, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), data.data(), 77, 100, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, kNlist - 1, kDim), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, kInt64Max / 2, kDim), IVF_ERR_INVALID_ARGUMENT);
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    auto poisoned = data;
    poisoned[37 * kDim + 3] = bad;
    expect_failure(ivf_train(idx.get(), poisoned.data(), IVF_DTYPE_F32, 100, kDim), IVF_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ivf_last_error_message()).find("row 37"), std::string::npos) << ivf_last_error_message();
  }
  int64_t trained = -1;
  ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_IS_TRAINED, &trained), IVF_OK);
  EXPECT_EQ(trained, 0);
  // Searching or adding before training is a state error.
  std::vector<int64_t> ids(3, 77);
  std::vector<float> d(3, 7.0f);
  expect_failure(ivf_search(idx.get(), nullptr, data.data(), IVF_DTYPE_F32, 1, kDim, 3, ids.data(), d.data()),
                 IVF_ERR_INVALID_STATE);
  EXPECT_EQ(ids, std::vector<int64_t>(3, 77));
  expect_failure(ivf_add(idx.get(), data.data(), IVF_DTYPE_F32, 10, kDim, nullptr), IVF_ERR_INVALID_STATE);
}

TEST(Train, RefusedOnceVectorsAreHeldAllowedAfterReset) {
  auto t = trained_index();
  expect_failure(ivf_train(t.index.get(), t.data.data(), IVF_DTYPE_F32, 200, kDim), IVF_ERR_INVALID_STATE);
  EXPECT_EQ(ntotal_of(t.index.get()), 200);
  ASSERT_EQ(ivf_reset(t.index.get()), IVF_OK);
  EXPECT_EQ(ntotal_of(t.index.get()), 0);
  EXPECT_EQ(ivf_train(t.index.get(), t.data.data(), IVF_DTYPE_F32, 200, kDim), IVF_OK);
}

TEST(Add, FailedAddsLeaveTheIndexUnchanged) {
  auto t = trained_index();
  const auto before = fingerprint(t.index.get());
  auto extra = random_vectors(10, kDim, 3);
  expect_failure(ivf_add(t.index.get(), nullptr, IVF_DTYPE_F32, 10, kDim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_add(t.index.get(), extra.data(), IVF_DTYPE_F32, 0, kDim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_add(t.index.get(), extra.data(), IVF_DTYPE_F32, 10, 3, nullptr), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_add(t.index.get(), extra.data(), IVF_DTYPE_I8, 10, kDim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_add(t.index.get(), extra.data(), IVF_DTYPE_F32, kInt64Max / 4, kDim, nullptr),
                 IVF_ERR_INVALID_ARGUMENT);
  extra[9 * kDim] = std::nanf("");
  expect_failure(ivf_add(t.index.get(), extra.data(), IVF_DTYPE_F32, 10, kDim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  extra[9 * kDim] = 0.5f;
  std::vector<int64_t> ids(10, 5);
  ids[4] = -1;
  expect_failure(ivf_add(t.index.get(), extra.data(), IVF_DTYPE_F32, 10, kDim, ids.data()), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ntotal_of(t.index.get()), 200);
  EXPECT_EQ(fingerprint(t.index.get()), before);
}

// Under L2 and inner product a row whose squared norm passes FLT_MAX / 8 is refused (its
// distances could overflow float, and an inner product of such rows summed +inf and -inf into a
// NaN distance); cosine normalises first and accepts it. Found by the random API test.
TEST(Add, RowsWhoseDistancesCouldOverflowAreRefused) {
  auto t = trained_index();
  const auto before = fingerprint(t.index.get());
  auto rows = random_vectors(3, kDim, 4);
  rows[2 * kDim] = 1e19f;  // its square alone is 1e38 > 4.25e37
  expect_failure(ivf_add(t.index.get(), rows.data(), IVF_DTYPE_F32, 3, kDim, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ivf_last_error_message()).find("row 2 has a squared norm"), std::string::npos)
      << ivf_last_error_message();
  std::vector<int64_t> ids(3 * 5);
  std::vector<float> d(3 * 5);
  expect_failure(ivf_search(t.index.get(), nullptr, rows.data(), IVF_DTYPE_F32, 3, kDim, 5, ids.data(), d.data()),
                 IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fingerprint(t.index.get()), before);
  rows[2 * kDim] = 1e18f;  // 1e36: inside the bound
  EXPECT_EQ(ivf_add(t.index.get(), rows.data(), IVF_DTYPE_F32, 3, kDim, nullptr), IVF_OK) << ivf_last_error_message();
  ASSERT_EQ(ivf_search(t.index.get(), nullptr, rows.data(), IVF_DTYPE_F32, 3, kDim, 5, ids.data(), d.data()), IVF_OK);
  for (float v : d) EXPECT_FALSE(std::isnan(v));

  auto cp = make_params({{IVF_PARAM_NLIST, kNlist}, {IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_METRIC, IVF_METRIC_COSINE}});
  IndexPtr cosine = make_index(kDim, cp.get());
  const auto base = random_vectors(200, kDim, 7);
  ASSERT_EQ(ivf_train(cosine.get(), base.data(), IVF_DTYPE_F32, 200, kDim), IVF_OK);
  rows[2 * kDim] = 1e19f;
  EXPECT_EQ(ivf_add(cosine.get(), rows.data(), IVF_DTYPE_F32, 3, kDim, nullptr), IVF_OK) << ivf_last_error_message();
}

TEST(Search, RejectsBadArgumentsWithoutWriting) {
  auto t = trained_index();
  auto q = random_vectors(4, kDim, 5);
  const int64_t k = 5;
  std::vector<int64_t> ids(4 * k, 1234);
  std::vector<float> d(4 * k, 9.0f);
  auto untouched = [&] {
    EXPECT_EQ(ids, std::vector<int64_t>(4 * k, 1234));
    EXPECT_EQ(d, std::vector<float>(4 * k, 9.0f));
  };
  expect_failure(ivf_search(nullptr, nullptr, q.data(), IVF_DTYPE_F32, 4, kDim, k, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, nullptr, IVF_DTYPE_F32, 4, kDim, k, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, q.data(), IVF_DTYPE_F32, 0, kDim, k, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, q.data(), IVF_DTYPE_F32, 4, kDim - 1, k, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, q.data(), IVF_DTYPE_F32, 4, kDim, 0, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, q.data(), IVF_DTYPE_F32, 4, kDim, -3, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, q.data(), IVF_DTYPE_F32, 4, kDim, k, nullptr, d.data()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, q.data(), IVF_DTYPE_F32, 4, kDim, k, ids.data(), nullptr), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, q.data(), IVF_DTYPE_F32, 4, kDim, kInt64Max / 2, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_search(t.index.get(), nullptr, q.data(), IVF_DTYPE_F32, kInt64Max / 8, kDim, k, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  auto nanq = q;
  nanq[2 * kDim + 1] = std::numeric_limits<float>::infinity();
  expect_failure(ivf_search(t.index.get(), nullptr, nanq.data(), IVF_DTYPE_F32, 4, kDim, k, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  auto dev = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  expect_failure(ivf_search(t.index.get(), dev.get(), q.data(), IVF_DTYPE_F32, 4, kDim, k, ids.data(), d.data()), IVF_ERR_INVALID_ARGUMENT);
  untouched();
}

TEST(Search, KLargerThanCandidatesPadsAndCanariesSurvive) {
  auto t = trained_index(50);
  auto q = random_vectors(3, kDim, 11);
  const int64_t k = 80, guard = 16;
  auto all = make_params({{IVF_PARAM_NPROBE, kNlist}});
  std::vector<int64_t> ids(3 * k + guard, 0x5A5A5A5A);
  std::vector<float> d(3 * k + guard, 1234.5f);
  ASSERT_EQ(ivf_search(t.index.get(), all.get(), q.data(), IVF_DTYPE_F32, 3, kDim, k, ids.data(), d.data()), IVF_OK);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t j = 0; j < 50; ++j) {
      EXPECT_GE(ids[r * k + j], 0);
      if (j > 0) EXPECT_LE(d[r * k + j - 1], d[r * k + j]) << "best first";
    }
    for (int64_t j = 50; j < k; ++j) {
      EXPECT_EQ(ids[r * k + j], -1);
      EXPECT_EQ(d[r * k + j], std::numeric_limits<float>::infinity());
    }
  }
  for (int64_t g = 0; g < guard; ++g) {
    EXPECT_EQ(ids[3 * k + g], 0x5A5A5A5A) << "wrote past n*k";
    EXPECT_EQ(d[3 * k + g], 1234.5f) << "wrote past n*k";
  }
}

TEST(Search, InnerProductPadsWithMinusInfinity) {
  auto p = make_params({{IVF_PARAM_NLIST, 2}, {IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_METRIC, IVF_METRIC_INNER_PRODUCT}, {IVF_PARAM_NPROBE, 2}});
  auto idx = make_index(kDim, p.get());
  auto data = random_vectors(6, kDim, 2);
  ASSERT_EQ(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, 6, kDim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), data.data(), IVF_DTYPE_F32, 6, kDim, nullptr), IVF_OK);
  std::vector<int64_t> ids(10);
  std::vector<float> d(10);
  ASSERT_EQ(ivf_search(idx.get(), nullptr, data.data(), IVF_DTYPE_F32, 1, kDim, 10, ids.data(), d.data()), IVF_OK);
  for (int j = 1; j < 6; ++j) EXPECT_GE(d[j - 1], d[j]) << "largest first";
  for (int j = 6; j < 10; ++j) {
    EXPECT_EQ(ids[j], -1);
    EXPECT_EQ(d[j], -std::numeric_limits<float>::infinity());
  }
}

TEST(Search, NprobeAboveNlistIsClamped) {
  auto t = trained_index();
  auto q = random_vectors(6, kDim, 13);
  auto at_nlist = make_params({{IVF_PARAM_NPROBE, kNlist}});
  auto huge = make_params({{IVF_PARAM_NPROBE, 1000000}});
  std::vector<int64_t> a(60), b(60);
  std::vector<float> da(60), db(60);
  ASSERT_EQ(ivf_search(t.index.get(), at_nlist.get(), q.data(), IVF_DTYPE_F32, 6, kDim, 10, a.data(), da.data()), IVF_OK);
  ASSERT_EQ(ivf_search(t.index.get(), huge.get(), q.data(), IVF_DTYPE_F32, 6, kDim, 10, b.data(), db.data()), IVF_OK);
  EXPECT_EQ(a, b);
  EXPECT_EQ(da, db);
}

TEST(Search, EmptyTrainedIndexPadsEveryRow) {
  auto p = cpu_params();
  auto idx = make_index(kDim, p.get());
  auto data = random_vectors(40, kDim, 4);
  ASSERT_EQ(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, 40, kDim), IVF_OK);
  std::vector<int64_t> ids(4, 9);
  std::vector<float> d(4, 0.0f);
  ASSERT_EQ(ivf_search(idx.get(), nullptr, data.data(), IVF_DTYPE_F32, 2, kDim, 2, ids.data(), d.data()), IVF_OK);
  EXPECT_EQ(ids, std::vector<int64_t>(4, -1));
}

TEST(Info, ReportsTheIndex) {
  auto t = trained_index();
  int64_t v = 0;
  ASSERT_EQ(ivf_index_info(t.index.get(), IVF_INFO_DIM, &v), IVF_OK);
  EXPECT_EQ(v, kDim);
  ASSERT_EQ(ivf_index_info(t.index.get(), IVF_INFO_NLIST, &v), IVF_OK);
  EXPECT_EQ(v, kNlist);
  ASSERT_EQ(ivf_index_info(t.index.get(), IVF_INFO_METRIC, &v), IVF_OK);
  EXPECT_EQ(v, IVF_METRIC_L2);
  ASSERT_EQ(ivf_index_info(t.index.get(), IVF_INFO_BACKEND, &v), IVF_OK);
  EXPECT_EQ(v, IVF_BACKEND_CPU);
  ASSERT_EQ(ivf_index_info(t.index.get(), IVF_INFO_DEVICE, &v), IVF_OK);
  EXPECT_EQ(v, -1);
  ASSERT_EQ(ivf_index_info(t.index.get(), IVF_INFO_NTOTAL, &v), IVF_OK);
  EXPECT_EQ(v, 200);
  ASSERT_EQ(ivf_index_info(t.index.get(), IVF_INFO_NPROBE, &v), IVF_OK);
  EXPECT_EQ(v, 2);
  ASSERT_EQ(ivf_index_info(t.index.get(), IVF_INFO_HOST_MEMORY_BYTES, &v), IVF_OK);
  EXPECT_GE(v, 200 * kDim * 4);
  expect_failure(ivf_index_info(t.index.get(), 999, &v), IVF_ERR_UNSUPPORTED);
  expect_failure(ivf_index_info(t.index.get(), IVF_INFO_DIM, nullptr), IVF_ERR_INVALID_ARGUMENT);
  expect_failure(ivf_ntotal(nullptr, &v), IVF_ERR_INVALID_ARGUMENT);
}

TEST(Add, CallerIdsAreReturned) {
  auto p = cpu_params();
  auto idx = make_index(kDim, p.get());
  auto data = random_vectors(100, kDim, 21);
  ASSERT_EQ(ivf_train(idx.get(), data.data(), IVF_DTYPE_F32, 100, kDim), IVF_OK);
  std::vector<int64_t> ids(100);
  for (int i = 0; i < 100; ++i) ids[i] = 5000000000LL + 3 * i;
  ASSERT_EQ(ivf_add(idx.get(), data.data(), IVF_DTYPE_F32, 100, kDim, ids.data()), IVF_OK);
  auto all = make_params({{IVF_PARAM_NPROBE, kNlist}});
  std::vector<int64_t> out(1);
  std::vector<float> d(1);
  for (int i : {0, 17, 99}) {
    ASSERT_EQ(ivf_search(idx.get(), all.get(), data.data() + i * kDim, IVF_DTYPE_F32, 1, kDim, 1, out.data(), d.data()), IVF_OK);
    EXPECT_EQ(out[0], ids[i]);
    EXPECT_EQ(d[0], 0.0f);
  }
  // Sequential ids continue from ntotal.
  ASSERT_EQ(ivf_add(idx.get(), data.data(), IVF_DTYPE_F32, 1, kDim, nullptr), IVF_OK);
  EXPECT_EQ(ntotal_of(idx.get()), 101);
}
