// Exact k-nearest-neighbour search over a flat array: the ground truth the tests compare
// every IVF search against (the oracle lives with the tests, not in the library).
#pragma once

#include <cstdint>

#include "core/cpu/distances.hpp"
#include "core/cpu/parallel.hpp"
#include "core/cpu/topk.hpp"
#include "core/types.hpp"

namespace ivftest {

// ids are row numbers of base; results best first and padded like ivf_search.
inline void exact_knn(const float* base, int64_t nb, const float* queries, int64_t nq, int64_t dim, int64_t k,
                      ivfgpu::Metric metric, int64_t* ids, float* dists, int threads = 0) {
  using namespace ivfgpu;
  const Metric kernel = metric == Metric::L2 ? Metric::L2 : Metric::InnerProduct;
  parallel_for(nq, resolve_threads(threads), 1, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      TopK top(k, larger_is_better(metric));
      for (int64_t i = 0; i < nb; ++i) top.push(cpu::exact_distance(queries + q * dim, base + i * dim, dim, kernel), i);
      top.write(ids + q * k, dists + q * k);
    }
  });
}

}  // namespace ivftest
