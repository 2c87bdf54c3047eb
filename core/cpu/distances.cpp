#include "distances.hpp"
#include "../progress.hpp"

#include <cblas.h>

#include <algorithm>
#include <vector>


namespace ivfgpu::cpu {

void coarse_scores(const float* x, int64_t n, const float* centroids, const float* centroid_norms,
                   int64_t nc, int64_t dim, Metric metric, float* scores) {
  // scores = x * centroids^T, then fold in the norm term. BLAS takes int sizes; callers block
  // rows so n * nc stays far below 2^31.
  const bool l2 = metric == Metric::L2;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(nc),
              static_cast<int>(dim), l2 ? -2.0f : -1.0f, x, static_cast<int>(dim), centroids,
              static_cast<int>(dim), 0.0f, scores, static_cast<int>(nc));
  if (l2)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < nc; ++c) scores[i * nc + c] += centroid_norms[c];
}

void nearest_centroids(const float* x, int64_t n, const float* centroids, const float* centroid_norms,
                       int64_t nc, int64_t dim, Metric metric, int64_t* assign) {
  // Blocks run one after another: OpenBLAS already spreads one GEMM over the cores.
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(8192, (int64_t{1} << 24) / nc));
  std::vector<float> scores;
  for (int64_t i0 = 0; i0 < n; i0 += block) {
    progress::poll();  // train and add spend their time here
    const int64_t rows = std::min(block, n - i0);
    scores.resize(static_cast<std::size_t>(rows * nc));
    coarse_scores(x + i0 * dim, rows, centroids, centroid_norms, nc, dim, metric, scores.data());
    for (int64_t i = 0; i < rows; ++i) {
      const float* s = scores.data() + i * nc;
      assign[i0 + i] = std::min_element(s, s + nc) - s;
    }
  }
}

}  // namespace ivfgpu::cpu
