// Lloyd's k-means on the CPU: seeded random distinct initial points, BLAS-based assignment,
// and FAISS-style splitting of a populous cluster for every cluster left empty.
#pragma once

#include <cstdint>

#include "../types.hpp"

namespace ivfgpu::cpu {

// Writes k * dim centroids. Assignment uses the index metric (L2: nearest; inner product and
// cosine: largest dot product); cosine centroids are renormalised after every update.
// Requires n >= k. Deterministic for a given seed.
void kmeans(const float* x, int64_t n, int64_t dim, int64_t k, Metric metric, int64_t iters,
            uint64_t seed, float* centroids);

}  // namespace ivfgpu::cpu
