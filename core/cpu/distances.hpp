// CPU distance primitives. Coarse work (query x centroid) is GEMM-shaped and goes through
// BLAS; distances that are returned to users are computed directly, term by term, so the
// reference carries no ||q||^2 + ||x||^2 - 2q.x cancellation error.
#pragma once

#include <cstdint>

#include "../types.hpp"

namespace ivfgpu::cpu {

// Exact squared L2 distance or inner product between two dim-vectors.
float exact_distance(const float* a, const float* b, int64_t dim, Metric metric);

// For n rows of x, scores[i * nc + c] against nc centroids, ordered so that SMALLER is
// better for every metric: ||c||^2 - 2 x.c for L2 (||x||^2 dropped: constant per row),
// -x.c for inner product. Row-blocked; scores must hold n * nc floats.
void coarse_scores(const float* x, int64_t n, const float* centroids, const float* centroid_norms,
                   int64_t nc, int64_t dim, Metric metric, float* scores);

// Nearest centroid of each of n rows (by coarse_scores), into assign[n]. Works in blocks so
// memory stays bounded for any n.
void nearest_centroids(const float* x, int64_t n, const float* centroids, const float* centroid_norms,
                       int64_t nc, int64_t dim, Metric metric, int64_t* assign);

}  // namespace ivfgpu::cpu
