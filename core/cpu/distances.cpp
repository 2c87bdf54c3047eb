#include "distances.hpp"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "../progress.hpp"
#include "parallel.hpp"

namespace ivfgpu::cpu {

void coarse_scores(const float* x, int64_t n, const float* centroids, const float* centroid_norms,
                   int64_t nc, int64_t dim, Metric metric, float* scores) {
  // scores = x * centroids^T, then fold in the norm term. BLAS takes int sizes; callers block
  // rows so n * nc stays far below 2^31.
  const bool l2 = metric == Metric::L2;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(nc),
              static_cast<int>(dim), l2 ? -2.0f : -1.0f, x, static_cast<int>(dim), centroids,
              static_cast<int>(dim), 0.0f, scores, static_cast<int>(nc));
  // The norm term and (in nearest_centroids) the argmin are O(n * nc) too: spread over the
  // cores like the GEMM (a single-threaded pass made host k-means of 1M x 4096 take minutes).
  if (l2)
    parallel_for(n, resolve_threads(0), 64, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t c = 0; c < nc; ++c) scores[i * nc + c] += centroid_norms[c];
    });
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
    parallel_for(rows, resolve_threads(0), 64, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i) {
        const float* s = scores.data() + i * nc;
        assign[i0 + i] = std::min_element(s, s + nc) - s;
      }
    });
  }
}

}  // namespace ivfgpu::cpu
