// Exact k-nearest-neighbour search over a flat array: the ground truth the tests compare
// every IVF search against.
#pragma once

#include <cstdint>

#include "../types.hpp"

namespace ivfgpu::cpu {

// ids are row numbers of base; results best first and padded like ivf_search.
void exact_knn(const float* base, int64_t nb, const float* queries, int64_t nq, int64_t dim,
               int64_t k, Metric metric, int64_t* ids, float* dists, int threads = 0);

}  // namespace ivfgpu::cpu
