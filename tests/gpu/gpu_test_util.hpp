// Helpers shared by the GPU tests: data, a GPU index and its CPU twin, and the comparison of
// two result sets under the library's contract (distances within fp32 rounding, ids equal
// except at distance ties, padding identical).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.hpp"
#include "core/index.hpp"

namespace gputest {

using ivfgpu::BackendKind;
using ivfgpu::BuildParams;
using ivfgpu::Index;
using ivfgpu::Metric;

#define IVFGPU_REQUIRE_GPU()                                                          \
  do {                                                                                \
    if (ivfgpu::cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device: GPU test skipped"; \
  } while (0)
// A CUDA runtime call in a test body that must succeed (the caller includes cuda_runtime.h).
#define IVFGPU_CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

// Gaussian mixture: `centres` centres N(0,1), spread 0.35 (the benchmark's distribution).
inline std::vector<float> mixture(int64_t n, int64_t dim, int64_t centres, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> c(static_cast<std::size_t>(centres * dim));
  for (auto& v : c) v = g(rng);
  std::uniform_int_distribution<int64_t> pick(0, centres - 1);
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ci = pick(rng);
    for (int64_t j = 0; j < dim; ++j) x[i * dim + j] = c[ci * dim + j] + 0.35f * g(rng);
  }
  return x;
}

inline BuildParams params_for(int64_t nlist, Metric metric, BackendKind backend) {
  BuildParams p;
  p.nlist = nlist;
  p.metric = metric;
  p.backend = backend;
  p.kmeans_iters = 10;
  return p;
}

struct Result {
  std::vector<int64_t> ids;
  std::vector<float> dists;
};

inline Result search(const Index& idx, const std::vector<float>& q, int64_t n, int64_t k, int64_t nprobe) {
  Result r;
  r.ids.assign(static_cast<std::size_t>(n * k), -7);
  r.dists.assign(static_cast<std::size_t>(n * k), std::numeric_limits<float>::quiet_NaN());
  ivfgpu::SearchRequest a;
  a.queries = ivfgpu::MatrixView::host_f32(q.data(), n, idx.dim());
  a.k = k;
  a.nprobe = nprobe;
  a.ids = r.ids.data();
  a.dists = r.dists.data();
  idx.search(a);
  return r;
}

// A trained and filled GPU index and a CPU index holding exactly the same model.
struct Twin {
  std::unique_ptr<Index> gpu, cpu;
};

inline Twin make_twin(const std::vector<float>& base, int64_t n, int64_t dim, int64_t nlist, Metric metric) {
  Twin t;
  t.gpu = std::make_unique<Index>(dim, params_for(nlist, metric, BackendKind::Cuda));
  t.gpu->train(base.data(), n);
  t.gpu->add(base.data(), n, nullptr);
  ivfgpu::HostModel model = t.gpu->snapshot();
  t.cpu = std::make_unique<Index>(model, params_for(nlist, metric, BackendKind::Cpu));
  return t;
}

// Exact distance as the library defines it (squared L2, or dot product), in double.
inline double exact(const float* a, const float* b, int64_t dim, Metric metric) {
  double s = 0;
  for (int64_t j = 0; j < dim; ++j) s += metric == Metric::L2 ? double(a[j] - b[j]) * double(a[j] - b[j]) : double(a[j]) * b[j];
  return s;
}

struct Compare {
  int64_t rows_mismatched = 0;
  int64_t bad_distance = 0;   // a returned distance that is not the id's true distance
  int64_t bad_order = 0;
  int64_t bad_padding = 0;
  std::string first_problem;
};

// base: the vectors (row = id, sequential ids); queries as searched (normalised for cosine).
inline Compare compare(const Result& g, const Result& c, int64_t n, int64_t k, int64_t dim, Metric metric,
                       const std::vector<float>& base, const std::vector<float>& queries) {
  Compare out;
  const bool larger = metric != Metric::L2;
  double max_norm2 = 0;
  for (std::size_t i = 0; i < base.size() / dim; ++i) {
    double s = 0;
    for (int64_t j = 0; j < dim; ++j) s += double(base[i * dim + j]) * base[i * dim + j];
    max_norm2 = std::max(max_norm2, s);
  }
  for (int64_t q = 0; q < n; ++q) {
    double qn = 0;
    for (int64_t j = 0; j < dim; ++j) qn += double(queries[q * dim + j]) * queries[q * dim + j];
    const double tol = 2e-5 * (qn + max_norm2) + 1e-30;
    bool row_ok = true;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = q * k + j;
      const int64_t gi = g.ids[e], ci = c.ids[e];
      const float gd = g.dists[e], cd = c.dists[e];
      if ((gi == -1) != (ci == -1)) row_ok = false;
      if (gi == -1) {
        const float pad = larger ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
        if (gd != pad) {
          ++out.bad_padding;
          if (out.first_problem.empty()) out.first_problem = "bad padding at row " + std::to_string(q);
        }
        continue;
      }
      if (gi < 0 || gi >= static_cast<int64_t>(base.size() / dim)) {
        ++out.bad_distance;
        if (out.first_problem.empty()) out.first_problem = "id out of range at row " + std::to_string(q);
        continue;
      }
      const double truth = exact(queries.data() + q * dim, base.data() + gi * dim, dim, metric);
      if (std::abs(truth - gd) > tol) {
        ++out.bad_distance;
        if (out.first_problem.empty())
          out.first_problem = "row " + std::to_string(q) + " col " + std::to_string(j) + ": returned " +
                              std::to_string(gd) + " for id " + std::to_string(gi) + ", true " + std::to_string(truth);
      }
      if (j > 0 && g.ids[e - 1] != -1) {
        const float prev = g.dists[e - 1];
        if (larger ? gd > prev : gd < prev) ++out.bad_order;
      }
      if (ci == -1) continue;
      if (std::abs(double(gd) - double(cd)) > tol) row_ok = false;
      // Equal distance at every rank: ids may differ only inside a tie (the returned id's own
      // distance was checked above).
    }
    if (!row_ok) {
      ++out.rows_mismatched;
      if (out.first_problem.empty()) out.first_problem = "row " + std::to_string(q) + " differs from the CPU";
    }
  }
  return out;
}

inline void expect_equivalent(const Result& g, const Result& c, int64_t n, int64_t k, int64_t dim, Metric metric,
                              const std::vector<float>& base, const std::vector<float>& queries,
                              int64_t allowed_rows, const std::string& what) {
  const Compare r = compare(g, c, n, k, dim, metric, base, queries);
  EXPECT_EQ(r.bad_distance, 0) << what << ": " << r.first_problem;
  EXPECT_EQ(r.bad_order, 0) << what;
  EXPECT_EQ(r.bad_padding, 0) << what << ": " << r.first_problem;
  EXPECT_LE(r.rows_mismatched, allowed_rows) << what << ": " << r.first_problem;
}

inline std::vector<float> normalized(const std::vector<float>& x, int64_t dim) {
  std::vector<float> y(x);
  for (std::size_t i = 0; i < x.size() / dim; ++i) {
    float s = 0;
    for (int64_t j = 0; j < dim; ++j) s += y[i * dim + j] * y[i * dim + j];
    if (s > 0) {
      const float inv = 1.0f / std::sqrt(s);
      for (int64_t j = 0; j < dim; ++j) y[i * dim + j] *= inv;
    }
  }
  return y;
}

}  // namespace gputest
