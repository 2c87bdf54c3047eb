#include "kmeans_steps.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "vector_ops.hpp"

namespace ivfgpu {

void pick_initial_centroids(const float* x, int64_t n, int64_t dim, int64_t k, std::mt19937_64& rng,
                            float* centroids) {
  std::vector<int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  for (int64_t i = 0; i < k; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, n - 1);
    std::swap(perm[i], perm[pick(rng)]);
  }
  for (int64_t i = 0; i < k; ++i) std::memcpy(centroids + i * dim, x + perm[i] * dim, sizeof(float) * dim);
}

void squared_norms(const float* c, int64_t k, int64_t dim, std::vector<float>& norms) {
  norms.resize(static_cast<std::size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    float s = 0.0f;
    for (int64_t j = 0; j < dim; ++j) s += c[i * dim + j] * c[i * dim + j];
    norms[i] = s;
  }
}

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

void end_iteration(float* c, int64_t k, int64_t dim, int64_t n, std::vector<int64_t>& counts, Metric metric,
                   std::mt19937_64& rng) {
  split_into_empty(c, k, dim, n, counts, rng);
  if (metric == Metric::Cosine) {
    const std::vector<float> unit = normalized_copy(c, k, dim);
    std::memcpy(c, unit.data(), unit.size() * sizeof(float));
  }
}

}  // namespace ivfgpu
