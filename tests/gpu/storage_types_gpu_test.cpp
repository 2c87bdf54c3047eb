// Compact storage types (IVF_PARAM_STORAGE_TYPE: f16, bf16, uint8, int8, and f32 beside them) on
// the CUDA backend, through the C ABI only: the GPU twin of tests/capi/storage_types_test.cpp.
//
// Every search is compared with a CPU index holding the same centroids and the same lists: the
// CPU index is trained, its (empty, trained) file opens as the CUDA index, the CUDA index adds
// the rows, and its filled file opens back on the CPU. So only the search differs, and the
// comparison is the results contract (../shared/docs/results-contract.md): every returned
// distance is the exact distance to the stored (decoded) row within fp32 rounding, or exactly
// the integer rounded once to float for integer queries against integer rows; distances rank by
// rank equal within that rounding; ids equal outside ties; padding identical. The coarse GEMMs
// of the two backends round differently, so a query whose nprobe-th and (nprobe+1)-th centroid
// scores are within fp32 rounding of each other may probe another list: such a query is skipped
// when (and only when) its rows differ, and each test prints how many were.
//
// The grid (type x metric x k x dim x nprobe, sampled so that the binary runs in well under a
// minute on an H100; nothing here is large but the budget and bigann cases):
//   - TypeGrid: every type {f32, f16, bf16, uint8, int8} x every metric it takes {L2, IP,
//     cosine for the floating types} at dims {3, 31, 129}, 3000 rows, nlist 32, 32 queries,
//     k {1, 10, 100, 1000} x nprobe {1, 5, nlist}; integer types x cosine: ivf_create refuses.
//   - DimGrid: every dim {1, 3, 8, 31, 96, 128, 129, 200, 960} for four (type, metric) pairs
//     {f16 L2, bf16 IP, uint8 L2, int8 IP}, 6000 rows, nlist 64, 16 queries, k {1, 100, 4096}
//     x nprobe {4, nlist} (k 4096 at nprobe 4 also checks the padding).
//   Each search runs twice: with f32 queries (real-valued, also for the integer types) and
//   with the queries given in the storage type (integer queries: exact integer distances).
// Then: ivf_get in f32 and in the storage type; refusals of values a type cannot hold (index
// unchanged); device memory falling with the element size; save / load and load-time
// conversion; a small device budget over uint8 lists. Recall on bigann10k (real uint8 data,
// uint8 and f32 queries) is tests/capi/storage_types_test.cpp's, which runs on CUDA as
// gpu_storage_types_capi_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/dtypes.hpp"
#include "common/id_workload.hpp"
#include "common/test_util.hpp"
#include "typed_twin.hpp"

using namespace ivftest;
using namespace ivftest::typed;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::string param_name(const ::testing::TestParamInfo<ivf_dtype>& p) { return type_name(p.param); }

constexpr ivf_dtype kAllTypes[] = {IVF_DTYPE_F32, IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8, IVF_DTYPE_I8};
constexpr ivf_dtype kCompactTypes[] = {IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8, IVF_DTYPE_I8};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Results against the CPU

class TypeGrid : public ::testing::TestWithParam<ivf_dtype> {};

TEST_P(TypeGrid, EveryMetricMatchesTheCpu) {
  IVFTEST_REQUIRE_GPU();
  const ivf_dtype t = GetParam();
  Tally tally;
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_COSINE}) {
    if (is_int(t) && metric == IVF_METRIC_COSINE) {
      // Integer rows cannot be unit-normalised: refused up front, on CUDA as on the CPU.
      auto p = make_params(
          {{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_METRIC, metric}, {IVF_PARAM_STORAGE_TYPE, t}});
      ivf_index* raw = nullptr;
      EXPECT_EQ(ivf_create(&raw, 16, p.get()), IVF_ERR_UNSUPPORTED) << type_name(t);
      EXPECT_EQ(raw, nullptr);
      ivf_free(raw);
      EXPECT_NE(std::string(ivf_last_error_message()).find("cosine"), std::string::npos) << ivf_last_error_message();
      continue;
    }
    for (int64_t dim : {int64_t{3}, int64_t{31}, int64_t{129}})
      check_case(t, metric, dim, 3000, 32, 32, {1, 10, 100, 1000}, {1, 5, 32}, tally);
  }
  report(tally, type_name(t));
}

INSTANTIATE_TEST_SUITE_P(GpuStorageTypes, TypeGrid, ::testing::ValuesIn(kAllTypes), param_name);

class DimGrid : public ::testing::TestWithParam<ivf_dtype> {};

TEST_P(DimGrid, EveryDimMatchesTheCpu) {
  IVFTEST_REQUIRE_GPU();
  const ivf_dtype t = GetParam();
  const int32_t metric = (t == IVF_DTYPE_F16 || t == IVF_DTYPE_U8) ? IVF_METRIC_L2 : IVF_METRIC_INNER_PRODUCT;
  Tally tally;
  for (int64_t dim : {1, 3, 8, 31, 96, 128, 129, 200, 960})
    check_case(t, metric, dim, 6000, 64, 16, {1, 100, 4096}, {4, 64}, tally);
  report(tally, type_name(t));
}

INSTANTIATE_TEST_SUITE_P(GpuStorageTypes, DimGrid, ::testing::ValuesIn(kCompactTypes), param_name);

// ---------------------------------------------------------------------------------------------
// Stored values

// ivf_get in f32 returns the decoded stored rows and in the storage type the stored values: for
// f16 / bf16 the round-to-nearest-even of the f32 input, for the integer types the integers;
// rows added in the storage type come back verbatim; cosine rows are unit length, normalised
// then rounded like the CPU's.
TEST(GpuStorageTypes, GetReturnsTheStoredValues) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 37, n = 400, nlist = 4;
  for (ivf_dtype t : kAllTypes) {
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_COSINE}) {
      if (is_int(t) && metric == IVF_METRIC_COSINE) continue;
      SCOPED_TRACE(std::string(type_name(t)) + " " + metric_name(metric));
      const std::vector<float> x = data_for(t, n, dim, 8, 5, 6);
      IndexPtr trainer = typed_index(IVF_BACKEND_CPU, t, metric, dim, nlist);
      ASSERT_EQ(ivf_train(trainer.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK) << ivf_last_error_message();
      const Bytes trained = bytes_of(trainer.get());
      IndexPtr gpu = open_bytes(trained, IVF_BACKEND_CUDA), cpu = open_bytes(trained, IVF_BACKEND_CPU);
      ASSERT_TRUE(gpu && cpu);
      const auto ids = iota_ids(n, 1000);
      ASSERT_EQ(ivf_add(gpu.get(), x.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK) << ivf_last_error_message();
      ASSERT_EQ(ivf_add(cpu.get(), x.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK) << ivf_last_error_message();
      const Bytes raw_g = get_rows(gpu.get(), ids, t, dim), raw_c = get_rows(cpu.get(), ids, t, dim);
      const std::vector<float> f_g = decode(get_rows(gpu.get(), ids, IVF_DTYPE_F32, dim), IVF_DTYPE_F32);
      const std::vector<float> f_c = decode(get_rows(cpu.get(), ids, IVF_DTYPE_F32, dim), IVF_DTYPE_F32);
      // f32 get is the decoding of the stored values.
      EXPECT_EQ(f_g, decode(raw_g, t));
      if (metric != IVF_METRIC_COSINE) {
        EXPECT_TRUE(raw_g == encode(x, t)) << "the stored values are not the RNE rounding / the integers of the input";
        EXPECT_EQ(f_g, decode(encode(x, t), t));
        EXPECT_TRUE(raw_g == raw_c) << "CUDA and CPU store different values";
      } else {
        // Normalised in f32 (the summation order may differ from the CPU's), then rounded: within
        // one unit of the type of the CPU's row, and unit length.
        const double rel = t == IVF_DTYPE_F32 ? 1e-6 : t == IVF_DTYPE_F16 ? 1.0 / 1024 : 1.0 / 128;
        int64_t off = 0;
        for (std::size_t i = 0; i < f_g.size(); ++i)
          if (std::abs(double(f_g[i]) - f_c[i]) > rel * std::max(std::abs(f_g[i]), std::abs(f_c[i])) + 1e-7) ++off;
        EXPECT_EQ(off, 0) << "stored cosine rows differ from the CPU's by more than one unit";
        for (int64_t i = 0; i < n; ++i) {
          double s = 0;
          for (int64_t j = 0; j < dim; ++j) s += double(f_g[i * dim + j]) * f_g[i * dim + j];
          EXPECT_NEAR(std::sqrt(s), 1.0, 4 * rel * std::sqrt(double(dim)) + 1e-6) << "row " << i;
        }
      }
      // An absent id: found 0 and a row of zeros, in either type.
      {
        const int64_t absent = 5;
        std::vector<float> zf(dim, 9.0f);
        Bytes zr(static_cast<std::size_t>(dim) * elem_size(t), 0xAB);
        uint8_t found = 9;
        ASSERT_EQ(ivf_get(gpu.get(), nullptr, &absent, 1, zf.data(), IVF_DTYPE_F32, dim, &found), IVF_OK);
        EXPECT_EQ(found, 0);
        EXPECT_EQ(zf, std::vector<float>(dim, 0.0f));
        ASSERT_EQ(ivf_get(gpu.get(), nullptr, &absent, 1, zr.data(), t, dim, &found), IVF_OK);
        EXPECT_EQ(found, 0);
        EXPECT_TRUE(std::all_of(zr.begin(), zr.end(), [](unsigned char b) { return b == 0; }));
      }
      // Rows given in the storage type are stored verbatim (L2: cosine normalises them).
      if (metric != IVF_METRIC_COSINE && t != IVF_DTYPE_F32) {
        const Bytes raw = encode(data_for(t, 50, dim, 8, 5, 7), t);
        const auto more = iota_ids(50, 5000);
        ASSERT_EQ(ivf_add(gpu.get(), raw.data(), t, 50, dim, more.data()), IVF_OK) << ivf_last_error_message();
        EXPECT_TRUE(get_rows(gpu.get(), more, t, dim) == raw);
        EXPECT_EQ(decode(get_rows(gpu.get(), more, IVF_DTYPE_F32, dim), IVF_DTYPE_F32), decode(raw, t));
      }
    }
  }
  // Known roundings, on the device's conversion path: f16 ties to even (2049 -> 2048,
  // 2051 -> 2052), 0.1 to the nearest f16, -3 as 0xc200, a subnormal; bf16 ties to even.
  {
    const int64_t d = 5;
    std::vector<float> train(64 * d);
    for (std::size_t i = 0; i < train.size(); ++i) train[i] = static_cast<float>(i % 7);
    IndexPtr h = typed_index(IVF_BACKEND_CUDA, IVF_DTYPE_F16, IVF_METRIC_L2, d, 2);
    ASSERT_TRUE(h);
    ASSERT_EQ(ivf_train(h.get(), train.data(), IVF_DTYPE_F32, 64, d), IVF_OK) << ivf_last_error_message();
    const float row[5] = {2049.0f, 2051.0f, 0.1f, -3.0f, 1e-6f};
    const int64_t id = 42;
    ASSERT_EQ(ivf_add(h.get(), row, IVF_DTYPE_F32, 1, d, &id), IVF_OK) << ivf_last_error_message();
    float back[5];
    uint16_t raw[5];
    ASSERT_EQ(ivf_get(h.get(), nullptr, &id, 1, back, IVF_DTYPE_F32, d, nullptr), IVF_OK);
    ASSERT_EQ(ivf_get(h.get(), nullptr, &id, 1, raw, IVF_DTYPE_F16, d, nullptr), IVF_OK);
    EXPECT_EQ(back[0], 2048.0f);
    EXPECT_EQ(back[1], 2052.0f);
    EXPECT_EQ(back[2], 0.0999755859375f);
    EXPECT_EQ(raw[3], 0xc200u);
    EXPECT_EQ(raw[4], to_f16(1e-6f));  // 17 x 2^-24, a subnormal
    EXPECT_EQ(raw[4], 0x0011u);
    IndexPtr b = typed_index(IVF_BACKEND_CUDA, IVF_DTYPE_BF16, IVF_METRIC_L2, d, 2);
    ASSERT_TRUE(b);
    ASSERT_EQ(ivf_train(b.get(), train.data(), IVF_DTYPE_F32, 64, d), IVF_OK) << ivf_last_error_message();
    // (3e38, near bf16's top, is refused under L2 before any rounding: its squared norm passes
    // FLT_MAX / 8. A large value inside that bound instead.)
    const float brow[5] = {1.00390625f, 1.01171875f, 3.0e18f, -0.0f, 0.1f};
    ASSERT_EQ(ivf_add(b.get(), brow, IVF_DTYPE_F32, 1, d, &id), IVF_OK) << ivf_last_error_message();
    ASSERT_EQ(ivf_get(b.get(), nullptr, &id, 1, back, IVF_DTYPE_F32, d, nullptr), IVF_OK);
    ASSERT_EQ(ivf_get(b.get(), nullptr, &id, 1, raw, IVF_DTYPE_BF16, d, nullptr), IVF_OK);
    EXPECT_EQ(back[0], 1.0f);
    EXPECT_EQ(back[1], 1.015625f);
    for (int j = 0; j < 5; ++j) EXPECT_EQ(raw[j], to_bf16(brow[j])) << j;
  }
}

// f32 input a type cannot hold (not an integer in range for uint8 / int8; beyond f16's range;
// NaN) is refused with IVF_ERR_INVALID_ARGUMENT naming the row, and the index is unchanged:
// same ntotal, same state version, same rows. So are data and queries of another compact type.
TEST(GpuStorageTypes, ValuesATypeCannotHoldAreRefused) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 4, n = 64;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Bad {
    ivf_dtype type;
    std::vector<float> values;
  };
  const Bad cases[] = {{IVF_DTYPE_U8, {1.5f, 256.0f, -1.0f, 0.25f, 1e9f, nan}},
                       {IVF_DTYPE_I8, {200.0f, 128.0f, -129.0f, 0.5f, 127.5f, nan}},
                       {IVF_DTYPE_F16, {1e6f, -70000.0f, nan}}};
  for (const Bad& bad : cases) {
    const ivf_dtype t = bad.type;
    SCOPED_TRACE(type_name(t));
    std::vector<float> x(n * dim);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7);
    IndexPtr idx = typed_index(IVF_BACKEND_CUDA, t, IVF_METRIC_L2, dim, 2);
    ASSERT_TRUE(idx);
    ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK) << ivf_last_error_message();
    ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
    const int64_t version = info(idx.get(), IVF_INFO_STATE_VERSION);
    const auto ids = iota_ids(n);
    const Bytes before = get_rows(idx.get(), ids, t, dim);
    for (float v : bad.values) {
      std::vector<float> y = x;
      y[5 * dim + 2] = v;
      EXPECT_EQ(ivf_add(idx.get(), y.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_ERR_INVALID_ARGUMENT) << v;
      if (is_int(t) && !std::isnan(v)) {
        EXPECT_NE(std::string(ivf_last_error_message()).find("row 5"), std::string::npos)
            << v << ": " << ivf_last_error_message();
      }
      // An update of existing ids with the value: refused too, the old rows kept.
      const int64_t upd[2] = {3, 4};
      const float rows2[2 * 4] = {1, 2, 3, 4, 5, 6, v, 8};
      EXPECT_EQ(ivf_update(idx.get(), nullptr, rows2, IVF_DTYPE_F32, 2, dim, upd), IVF_ERR_INVALID_ARGUMENT) << v;
      EXPECT_EQ(info(idx.get(), IVF_INFO_NTOTAL), n) << v;
      EXPECT_EQ(info(idx.get(), IVF_INFO_STATE_VERSION), version) << v;
    }
    EXPECT_TRUE(get_rows(idx.get(), ids, t, dim) == before) << "a refused call changed the stored rows";
    // Another element type than f32 and the storage type: refused.
    const ivf_dtype other = t == IVF_DTYPE_F16 ? IVF_DTYPE_U8 : IVF_DTYPE_F16;
    const Bytes o(static_cast<std::size_t>(2 * dim) * elem_size(other), 0);
    EXPECT_EQ(ivf_add(idx.get(), o.data(), other, 2, dim, nullptr), IVF_ERR_INVALID_ARGUMENT);
    std::vector<int64_t> rid(2);
    std::vector<float> rd(2);
    EXPECT_EQ(ivf_search(idx.get(), nullptr, o.data(), other, 1, dim, 2, rid.data(), rd.data()),
              IVF_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(info(idx.get(), IVF_INFO_NTOTAL), n);
    EXPECT_EQ(info(idx.get(), IVF_INFO_STATE_VERSION), version);
  }
  // uint8 queries to an f32 CUDA index: refused.
  {
    IndexPtr f = typed_index(IVF_BACKEND_CUDA, IVF_DTYPE_F32, IVF_METRIC_L2, dim, 2);
    std::vector<float> x(n * dim);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5);
    ASSERT_EQ(ivf_train(f.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    const uint8_t q[4] = {1, 2, 3, 4};
    int64_t i = 0;
    float d = 0;
    EXPECT_EQ(ivf_search(f.get(), nullptr, q, IVF_DTYPE_U8, 1, dim, 1, &i, &d), IVF_ERR_INVALID_ARGUMENT);
  }
}

// ---------------------------------------------------------------------------------------------
// Memory

// The same rows in each type: the device holds fewer list bytes as the element shrinks (f16 and
// bf16 under 0.6x f32's, uint8 and int8 under 0.35x; 8-byte ids ride along with each row).
TEST(GpuStorageTypes, DeviceMemoryFallsWithTheType) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 512, n = 20000, nlist = 64;
  // Integers in [0, 127]: every type holds them exactly.
  std::vector<float> x = data_for(IVF_DTYPE_U8, n, dim, 2 * nlist, 11, 12);
  for (float& v : x) v = std::floor(v / 2.0f);
  IndexPtr trainer = typed_index(IVF_BACKEND_CPU, IVF_DTYPE_F32, IVF_METRIC_L2, dim, nlist);
  ASSERT_EQ(ivf_train(trainer.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  const Bytes trained = bytes_of(trainer.get());
  int64_t list_f32 = 0, dev_f32 = 0;
  for (ivf_dtype t : kAllTypes) {
    IndexPtr idx = open_bytes(trained, IVF_BACKEND_CUDA, t);
    ASSERT_TRUE(idx);
    ASSERT_EQ(info(idx.get(), IVF_INFO_STORAGE_TYPE), t);
    ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
    const int64_t lists = info(idx.get(), IVF_INFO_RESIDENT_BYTES), dev = info(idx.get(), IVF_INFO_DEVICE_MEMORY_BYTES);
    std::printf("%-5s: list bytes on the device %lld, device memory %lld (id map %lld), host memory %lld\n",
                type_name(t), static_cast<long long>(lists), static_cast<long long>(dev),
                static_cast<long long>(info(idx.get(), IVF_INFO_ID_MAP_BYTES)),
                static_cast<long long>(info(idx.get(), IVF_INFO_HOST_MEMORY_BYTES)));
    EXPECT_GE(lists, n * dim * static_cast<int64_t>(elem_size(t))) << type_name(t) << ": the rows must be held";
    EXPECT_LE(lists, dev) << type_name(t);
    if (t == IVF_DTYPE_F32) {
      list_f32 = lists;
      dev_f32 = dev;
      continue;
    }
    const double limit = elem_size(t) == 2 ? 0.6 : 0.35;
    EXPECT_LT(double(lists), limit * double(list_f32)) << type_name(t) << " list bytes vs f32's";
    EXPECT_LT(double(dev), limit * double(dev_f32)) << type_name(t) << " device memory vs f32's";
  }
}

// ---------------------------------------------------------------------------------------------
// Files

// A compact CUDA index (trained on the device) saved and loaded back on CUDA keeps its type,
// its bytes and its results bit for bit; an f32 file opened with a storage type converts.
TEST(GpuStorageTypes, SaveAndLoadKeepTheTypeAndTheResults) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 48, n = 4000, nlist = 32, nq = 200;
  const int32_t metric_of[] = {IVF_METRIC_COSINE, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT};
  for (int i = 0; i < 4; ++i) {
    const ivf_dtype t = kCompactTypes[i];
    const int32_t metric = metric_of[i];
    SCOPED_TRACE(std::string(type_name(t)) + " " + metric_name(metric));
    const std::vector<float> x = data_for(t, n, dim, 2 * nlist, 21, 22);
    const std::vector<float> qbase = data_for(t, nq, dim, 2 * nlist, 21, 23);
    const std::vector<float> qf = is_int(t) ? jittered(qbase, 24) : qbase;
    const Bytes qs = encode(qbase, t);
    IndexPtr idx = typed_index(IVF_BACKEND_CUDA, t, metric, dim, nlist);
    ASSERT_TRUE(idx);
    ASSERT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK) << ivf_last_error_message();
    ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
    const std::string path = ::testing::TempDir() + "gpu_storage_" + type_name(t) + ".ivf";
    ASSERT_EQ(ivf_save(idx.get(), path.c_str()), IVF_OK) << ivf_last_error_message();
    auto lp = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}});
    ivf_index* raw = nullptr;
    ASSERT_EQ(ivf_load(path.c_str(), lp.get(), &raw), IVF_OK) << ivf_last_error_message();
    IndexPtr back(raw);
    std::remove(path.c_str());
    EXPECT_EQ(info(back.get(), IVF_INFO_BACKEND), IVF_BACKEND_CUDA);
    EXPECT_EQ(info(back.get(), IVF_INFO_STORAGE_TYPE), t);
    EXPECT_EQ(info(back.get(), IVF_INFO_NTOTAL), n);
    EXPECT_TRUE(bytes_of(back.get()) == bytes_of(idx.get())) << "the loaded index serialises differently";
    for (int64_t nprobe : {int64_t{3}, nlist})
      for (int64_t k : {int64_t{10}, int64_t{100}}) {
        EXPECT_TRUE(identical(search_as(idx.get(), qf.data(), IVF_DTYPE_F32, nq, dim, k, nprobe),
                              search_as(back.get(), qf.data(), IVF_DTYPE_F32, nq, dim, k, nprobe)))
            << "f32 queries, nprobe " << nprobe << " k " << k;
        EXPECT_TRUE(identical(search_as(idx.get(), qs.data(), t, nq, dim, k, nprobe),
                              search_as(back.get(), qs.data(), t, nq, dim, k, nprobe)))
            << type_name(t) << " queries, nprobe " << nprobe << " k " << k;
      }
  }
  // An f32 CUDA index of integer rows, opened on CUDA as uint8: the same results (the values are
  // exact in uint8); real rows cannot become uint8.
  {
    const std::vector<float> x = data_for(IVF_DTYPE_U8, n, dim, 2 * nlist, 31, 32);
    const std::vector<float> q = jittered(data_for(IVF_DTYPE_U8, nq, dim, 2 * nlist, 31, 33), 34);
    IndexPtr f = typed_index(IVF_BACKEND_CUDA, IVF_DTYPE_F32, IVF_METRIC_L2, dim, nlist);
    ASSERT_EQ(ivf_train(f.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK) << ivf_last_error_message();
    ASSERT_EQ(ivf_add(f.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
    IndexPtr u = open_bytes(bytes_of(f.get()), IVF_BACKEND_CUDA, IVF_DTYPE_U8);
    ASSERT_TRUE(u);
    EXPECT_EQ(info(u.get(), IVF_INFO_STORAGE_TYPE), IVF_DTYPE_U8);
    for (int64_t nprobe : {int64_t{3}, nlist}) {
      const Searched a = search_as(f.get(), q.data(), IVF_DTYPE_F32, nq, dim, 10, nprobe);
      const Searched b = search_as(u.get(), q.data(), IVF_DTYPE_F32, nq, dim, 10, nprobe);
      EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, nq, 10), "") << "nprobe " << nprobe;
    }
    const std::vector<float> reals = data_for(IVF_DTYPE_F32, n, dim, 2 * nlist, 31, 35);
    IndexPtr r = typed_index(IVF_BACKEND_CUDA, IVF_DTYPE_F32, IVF_METRIC_L2, dim, nlist);
    ASSERT_EQ(ivf_train(r.get(), reals.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    ASSERT_EQ(ivf_add(r.get(), reals.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
    const Bytes rb = bytes_of(r.get());
    auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_STORAGE_TYPE, IVF_DTYPE_U8}});
    ivf_index* raw = nullptr;
    EXPECT_EQ(ivf_deserialize(rb.data(), rb.size(), p.get(), &raw), IVF_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(raw, nullptr);
    ivf_free(raw);
  }
}

// ---------------------------------------------------------------------------------------------
// The host tier

namespace {
}  // namespace

// uint8 lists several times larger than what a device budget leaves for its cache, opened from
// the unbudgeted index's file: the same kernels over the same rows, so bit-identical results,
// with f32 and uint8 queries. The budget is the smallest the shape takes plus 8 MiB (about
// 81 MiB here, a cache of about 9 MiB for 77 MB of rows): 64 MiB is below any index's minimum
// (the ring, scratch and add shares alone take 72 MiB).
TEST(GpuStorageTypes, BudgetedUint8EqualsUnbudgeted) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 128, nlist = 256, n = 600000, nq = 1000;  // 76.8 MB of rows
  const int64_t budget = minimum_budget(nlist, dim, IVF_DTYPE_U8) + 8 * kMiB;
  std::printf("budget %lld bytes (%.1f MiB) for %lld bytes of uint8 rows\n", static_cast<long long>(budget),
              double(budget) / double(kMiB), static_cast<long long>(n * dim));
  const std::vector<float> qbase = data_for(IVF_DTYPE_U8, nq, dim, 4 * nlist, 41, 43);
  const std::vector<float> qf = jittered(qbase, 44);
  const Bytes qs = encode(qbase, IVF_DTYPE_U8);
  IndexPtr plain = typed_index(IVF_BACKEND_CUDA, IVF_DTYPE_U8, IVF_METRIC_L2, dim, nlist);
  ASSERT_TRUE(plain);
  {
    // Trained and filled with uint8 data (the storage type), in pieces to keep the f32 copy small.
    const int64_t piece = 100000;
    for (int64_t at = 0; at < n; at += piece) {
      const Bytes x = encode(data_for(IVF_DTYPE_U8, piece, dim, 4 * nlist, 41, 42 + 1000 * at), IVF_DTYPE_U8);
      if (at == 0) {
        ASSERT_EQ(ivf_train(plain.get(), x.data(), IVF_DTYPE_U8, piece, dim), IVF_OK) << ivf_last_error_message();
      }
      ASSERT_EQ(ivf_add(plain.get(), x.data(), IVF_DTYPE_U8, piece, dim, nullptr), IVF_OK) << ivf_last_error_message();
    }
  }
  ASSERT_EQ(info(plain.get(), IVF_INFO_NTOTAL), n);
  IndexPtr tight = open_bytes(bytes_of(plain.get()), IVF_BACKEND_CUDA, -1, budget);
  ASSERT_TRUE(tight);
  EXPECT_EQ(info(tight.get(), IVF_INFO_STORAGE_TYPE), IVF_DTYPE_U8);
  EXPECT_EQ(info(tight.get(), IVF_INFO_DEVICE_BUDGET), budget);
  EXPECT_GE(info(tight.get(), IVF_INFO_HOST_TIER_BYTES), n * dim);
  for (int64_t nprobe : {int64_t{1}, int64_t{16}, nlist})
    for (int64_t k : {int64_t{10}, int64_t{100}}) {
      EXPECT_TRUE(identical(search_as(plain.get(), qf.data(), IVF_DTYPE_F32, nq, dim, k, nprobe),
                            search_as(tight.get(), qf.data(), IVF_DTYPE_F32, nq, dim, k, nprobe)))
          << "f32 queries, nprobe " << nprobe << " k " << k;
      EXPECT_TRUE(identical(search_as(plain.get(), qs.data(), IVF_DTYPE_U8, nq, dim, k, nprobe),
                            search_as(tight.get(), qs.data(), IVF_DTYPE_U8, nq, dim, k, nprobe)))
          << "uint8 queries, nprobe " << nprobe << " k " << k;
    }
  EXPECT_GT(info(tight.get(), IVF_INFO_STREAMED_BYTES), 0) << "nothing streamed: the budget did not bind";
  EXPECT_LE(info(tight.get(), IVF_INFO_DEVICE_MEMORY_BYTES), budget);
  EXPECT_LE(info(tight.get(), IVF_INFO_RESIDENT_BYTES), budget);
}
