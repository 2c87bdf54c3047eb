// CPU distance primitives. Coarse work (query x centroid) is GEMM-shaped and goes through
// BLAS; distances that are returned to users are computed directly, term by term, so the
// reference carries no ||q||^2 + ||x||^2 - 2q.x cancellation error.
#pragma once

#include <cstdint>

#include "../element_codec.hpp"
#include "../types.hpp"

namespace ivfgpu::cpu {

// Exact squared L2 distance or inner product between an f32 query and a stored row of element
// type T (decoded to float term by term), written once over the element type. Eight (sixteen
// for byte rows) independent partial sums: a float reduction in one accumulator cannot be
// vectorised without reassociation, eight can. The summation order is fixed, so results repeat
// on every run.
template <class T>
float exact_distance(const float* a, const T* b, int64_t dim, Metric metric) {
  const HostDecoder<T> x;  // exact; f16 by table
  // 16 lanes for byte rows: GCC widens 16 bytes at once (8 ran at half the f32 speed).
  constexpr int64_t kLanes = sizeof(T) == 1 ? 16 : 8;
  float acc[kLanes] = {};
  const int64_t body = dim - dim % kLanes;
  float xv[kLanes];  // a block decoded first: the conversion then vectorises on its own
  if (metric == Metric::L2) {
    for (int64_t j = 0; j < body; j += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) xv[l] = x(b[j + l]);
      for (int64_t l = 0; l < kLanes; ++l) {
        const float d = a[j + l] - xv[l];
        acc[l] += d * d;
      }
    }
    for (int64_t j = body; j < dim; ++j) {
      const float d = a[j] - x(b[j]);
      acc[0] += d * d;
    }
  } else {
    for (int64_t j = 0; j < body; j += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) xv[l] = x(b[j + l]);
      for (int64_t l = 0; l < kLanes; ++l) acc[l] += a[j + l] * xv[l];
    }
    for (int64_t j = body; j < dim; ++j) acc[0] += a[j] * x(b[j]);
  }
  if constexpr (kLanes == 16)
    for (int64_t l = 0; l < 8; ++l) acc[l] += acc[l + 8];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// Integer rows (uint8, int8) against an integer query of the same type: the exact distance in
// int64, rounded once to float (uint8 L2 at d = 784 passes 2^24).
template <class T>
float exact_integer_distance(const T* a, const T* b, int64_t dim, Metric metric) {
  int64_t acc = 0;
  if (metric == Metric::L2) {
    for (int64_t j = 0; j < dim; ++j) {
      const int64_t d = static_cast<int64_t>(a[j]) - static_cast<int64_t>(b[j]);
      acc += d * d;
    }
  } else {
    for (int64_t j = 0; j < dim; ++j) acc += static_cast<int64_t>(a[j]) * static_cast<int64_t>(b[j]);
  }
  return static_cast<float>(acc);
}

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
