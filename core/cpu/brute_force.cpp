#include "brute_force.hpp"

#include "../parallel.hpp"
#include "../topk.hpp"
#include "distances.hpp"

namespace ivfgpu::cpu {

void exact_knn(const float* base, int64_t nb, const float* queries, int64_t nq, int64_t dim,
               int64_t k, Metric metric, int64_t* ids, float* dists, int threads) {
  const Metric kernel = metric == Metric::L2 ? Metric::L2 : Metric::InnerProduct;
  parallel_for(nq, resolve_threads(threads), 1, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      TopK top(k, larger_is_better(metric));
      for (int64_t i = 0; i < nb; ++i)
        top.push(exact_distance(queries + q * dim, base + i * dim, dim, kernel), i);
      top.write(ids + q * k, dists + q * k);
    }
  });
}

}  // namespace ivfgpu::cpu
