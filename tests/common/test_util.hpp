// Helpers shared by the test programs: RAII for C handles, data generation, dataset loading.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ivfgpu/ivfgpu.h"

namespace ivftest {

struct IndexDeleter {
  void operator()(ivf_index* p) const { ivf_free(p); }
};
struct ParamsDeleter {
  void operator()(ivf_params* p) const { ivf_params_free(p); }
};
using IndexPtr = std::unique_ptr<ivf_index, IndexDeleter>;
using ParamsPtr = std::unique_ptr<ivf_params, ParamsDeleter>;

// The seeds a randomised test runs, as (first, count): (1, default_count), unless
// IVFTEST_SOAK_SEEDS=n asks for a longer local soak (as under the sanitizers): n seeds from
// IVFTEST_SOAK_FIRST (default 1). A value that is not a number from 1 to 10^9 (digits only:
// strtoull alone would take "-1" as 2^64 - 1) is ignored.
inline std::pair<uint64_t, uint64_t> soak_seeds(uint64_t default_count) {
  const auto positive = [](const char* name) -> uint64_t {
    const char* e = std::getenv(name);
    if (e == nullptr || *e < '0' || *e > '9') return 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(e, &end, 10);
    return *end == '\0' && v <= 1000000000ull ? static_cast<uint64_t>(v) : 0;
  };
  const uint64_t count = positive("IVFTEST_SOAK_SEEDS"), first = positive("IVFTEST_SOAK_FIRST");
  if (count == 0) return {1, default_count};
  return {first == 0 ? 1 : first, count};
}

// Skips (visibly) a test that needs a usable CUDA device, through the public API.
inline bool have_gpu() {
  int32_t n = 0;
  return ivf_cuda_device_count(&n) == IVF_OK && n > 0;
}
#define IVFTEST_REQUIRE_GPU() \
  if (!::ivftest::have_gpu()) GTEST_SKIP() << "no usable CUDA device: GPU test skipped"

inline ParamsPtr make_params(std::initializer_list<std::pair<ivf_param_key, int64_t>> kv) {
  ivf_params* p = nullptr;
  EXPECT_EQ(ivf_params_create(&p), IVF_OK);
  for (auto [k, v] : kv) EXPECT_EQ(ivf_params_set_int(p, k, v), IVF_OK) << ivf_last_error_message();
  return ParamsPtr(p);
}

inline IndexPtr make_index(int64_t dim, const ivf_params* params) {
  ivf_index* idx = nullptr;
  EXPECT_EQ(ivf_create(&idx, dim, params), IVF_OK) << ivf_last_error_message();
  return IndexPtr(idx);
}

// A CUDA index of x (n x dim f32) stored as `storage`: trained on at most 100,000 of the rows,
// then every row added. Null (with a failure recorded) when it cannot be made.
inline IndexPtr cuda_index_of(int64_t dim, int64_t nlist, int32_t metric, ivf_dtype storage, const std::vector<float>& x) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, metric},
                        {IVF_PARAM_STORAGE_TYPE, storage}});
  IndexPtr idx = make_index(dim, p.get());
  if (!idx) return idx;
  const int64_t n = static_cast<int64_t>(x.size()) / dim;
  EXPECT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, std::min<int64_t>(n, 100000), dim), IVF_OK)
      << ivf_last_error_message();
  EXPECT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
  return idx;
}

inline std::vector<float> random_vectors(int64_t n, int64_t dim, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n * dim));
  for (auto& x : v) x = normal(rng);
  return v;
}

// Gaussian mixture as in performance.md: centres N(0,1), points centre + 0.35 N(0,1).
inline std::vector<float> clustered_vectors(int64_t n, int64_t dim, int64_t centres, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> c(static_cast<std::size_t>(centres * dim));
  std::mt19937_64 crng(42);
  for (auto& x : c) x = normal(crng);
  std::uniform_int_distribution<int64_t> pick(0, centres - 1);
  std::vector<float> v(static_cast<std::size_t>(n * dim));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ci = pick(rng);
    for (int64_t j = 0; j < dim; ++j) v[i * dim + j] = c[ci * dim + j] + 0.35f * normal(rng);
  }
  return v;
}

// Directory of the shared datasets: $IVFGPU_DATA_DIR, else the one the build was configured with.
inline std::string data_dir() {
  if (const char* env = std::getenv("IVFGPU_DATA_DIR")) return env;
  return IVFGPU_DATA_DIR;
}

inline bool file_exists(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f) std::fclose(f);
  return f != nullptr;
}

// Reads an .fvecs (T = float) or .ivecs (T = int32_t) file; returns rows, sets dim.
template <class T>
std::vector<T> read_vecs(const std::string& path, int64_t& dim, int64_t& rows) {
  std::vector<T> out;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  int32_t d = 0;
  rows = 0;
  while (std::fread(&d, sizeof d, 1, f) == 1) {
    std::size_t old = out.size();
    out.resize(old + static_cast<std::size_t>(d));
    if (std::fread(out.data() + old, sizeof(T), static_cast<std::size_t>(d), f) != static_cast<std::size_t>(d)) break;
    ++rows;
  }
  std::fclose(f);
  dim = d;
  return out;
}

// recall@k: fraction of the true k nearest (first k of each ground-truth row) found in the
// k returned ids.
inline double recall_at_k(const std::vector<int64_t>& ids, const std::vector<int32_t>& gt,
                          int64_t nq, int64_t k, int64_t gt_cols) {
  int64_t hits = 0;
  for (int64_t q = 0; q < nq; ++q)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t r = 0; r < k; ++r)
        if (ids[q * k + r] == gt[q * gt_cols + j]) {
          ++hits;
          break;
        }
  return double(hits) / double(nq * k);
}

}  // namespace ivftest
