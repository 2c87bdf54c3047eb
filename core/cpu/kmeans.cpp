#include "kmeans.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "../vector_ops.hpp"
#include "distances.hpp"

namespace ivfgpu::cpu {

namespace {

void squared_norms(const float* c, int64_t k, int64_t dim, std::vector<float>& norms) {
  norms.resize(static_cast<std::size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    float s = 0.0f;
    for (int64_t j = 0; j < dim; ++j) s += c[i * dim + j] * c[i * dim + j];
    norms[i] = s;
  }
}

// Each empty cluster takes a copy of a cluster picked with probability proportional to
// (size - 1); the two copies are nudged apart symmetrically so the next assignment splits
// the points between them.
void split_into_empty(float* c, int64_t k, int64_t dim, int64_t n, std::vector<int64_t>& counts,
                      std::mt19937_64& rng) {
  constexpr float kNudge = 1.0f / 1024.0f;
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int64_t e = 0; e < k; ++e) {
    if (counts[e] != 0) continue;
    int64_t donor = 0;
    for (;; donor = (donor + 1) % k) {
      const double p = double(counts[donor] - 1) / double(std::max<int64_t>(1, n - k));
      if (counts[donor] > 1 && uniform(rng) < p) break;
    }
    std::memcpy(c + e * dim, c + donor * dim, sizeof(float) * dim);
    for (int64_t j = 0; j < dim; ++j) {
      const float up = (j % 2 == 0) ? 1 + kNudge : 1 - kNudge;
      const float down = (j % 2 == 0) ? 1 - kNudge : 1 + kNudge;
      c[e * dim + j] *= up;
      c[donor * dim + j] *= down;
    }
    counts[e] = counts[donor] / 2;
    counts[donor] -= counts[e];
  }
}

}  // namespace

void kmeans(const float* x, int64_t n, int64_t dim, int64_t k, Metric metric, int64_t iters,
            uint64_t seed, float* centroids) {
  std::mt19937_64 rng(seed);
  {
    // Initial centroids: k distinct rows chosen at random.
    std::vector<int64_t> perm(static_cast<std::size_t>(n));
    std::iota(perm.begin(), perm.end(), int64_t{0});
    for (int64_t i = 0; i < k; ++i) {
      std::uniform_int_distribution<int64_t> pick(i, n - 1);
      std::swap(perm[i], perm[pick(rng)]);
    }
    for (int64_t i = 0; i < k; ++i)
      std::memcpy(centroids + i * dim, x + perm[i] * dim, sizeof(float) * dim);
  }
  std::vector<float> norms;
  std::vector<int64_t> assign(static_cast<std::size_t>(n)), counts(static_cast<std::size_t>(k));
  std::vector<double> sums(static_cast<std::size_t>(k * dim));
  for (int64_t it = 0; it < iters; ++it) {
    squared_norms(centroids, k, dim, norms);
    nearest_centroids(x, n, centroids, norms.data(), k, dim, metric, assign.data());
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = assign[i];
      ++counts[c];
      double* s = sums.data() + c * dim;
      const float* row = x + i * dim;
      for (int64_t j = 0; j < dim; ++j) s[j] += row[j];
    }
    for (int64_t c = 0; c < k; ++c) {
      if (counts[c] == 0) continue;
      const double inv = 1.0 / double(counts[c]);
      for (int64_t j = 0; j < dim; ++j) centroids[c * dim + j] = float(sums[c * dim + j] * inv);
    }
    split_into_empty(centroids, k, dim, n, counts, rng);
    if (metric == Metric::Cosine) {
      std::vector<float> unit = normalized_copy(centroids, k, dim);
      std::memcpy(centroids, unit.data(), unit.size() * sizeof(float));
    }
  }
}

}  // namespace ivfgpu::cpu
