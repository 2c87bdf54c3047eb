#include "kmeans.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "../kmeans_steps.hpp"
#include "../progress.hpp"
#include "../vector_ops.hpp"
#include "distances.hpp"

namespace ivfgpu::cpu {

void kmeans(const float* x, int64_t n, int64_t dim, int64_t k, Metric metric, int64_t iters,
            uint64_t seed, float* centroids) {
  std::mt19937_64 rng(seed);
  pick_initial_centroids(x, n, dim, k, rng, centroids);
  std::vector<float> norms;
  std::vector<int64_t> assign(static_cast<std::size_t>(n)), counts(static_cast<std::size_t>(k));
  std::vector<double> sums(static_cast<std::size_t>(k * dim));
  for (int64_t it = 0; it < iters; ++it) {
    progress::set(static_cast<double>(it) / static_cast<double>(iters));
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
    end_iteration(centroids, k, dim, n, counts, metric, rng);
  }
}

}  // namespace ivfgpu::cpu
