#include "cpu_backend.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "../errors.hpp"
#include "../parallel.hpp"
#include "../topk.hpp"
#include "distances.hpp"
#include "kmeans.hpp"

namespace ivfgpu::cpu {

namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(int64_t dim, const BuildParams& params)
      : params_(params), model_(HostModel::empty(dim, params.metric, params.nlist)),
        threads_(resolve_threads(params.num_threads)) {}

  void train(const float* x, int64_t n) override {
    std::vector<float> centroids(static_cast<std::size_t>(params_.nlist * model_.dim));
    kmeans(x, n, model_.dim, params_.nlist, model_.metric, params_.kmeans_iters,
           static_cast<uint64_t>(params_.seed), centroids.data());
    HostModel next = HostModel::empty(model_.dim, model_.metric, model_.nlist);
    next.centroids = std::move(centroids);
    next.compute_centroid_norms();
    next.trained = true;
    model_ = std::move(next);
  }

  void add(const float* x, const int64_t* ids, int64_t n) override {
    const int64_t dim = model_.dim, nlist = model_.nlist;
    std::vector<int64_t> assign(static_cast<std::size_t>(n));
    nearest_centroids(x, n, model_.centroids.data(), model_.centroid_norms.data(), nlist, dim,
                      model_.metric, assign.data());
    // New layout: each list keeps its old vectors, then the new ones in input order.
    std::vector<int64_t> added(static_cast<std::size_t>(nlist), 0);
    for (int64_t a : assign) ++added[a];
    std::vector<int64_t> offsets(static_cast<std::size_t>(nlist) + 1, 0);
    for (int64_t l = 0; l < nlist; ++l) offsets[l + 1] = offsets[l] + model_.list_size(l) + added[l];
    const int64_t total = offsets[nlist];
    std::vector<float> vectors(static_cast<std::size_t>(total * dim));
    std::vector<int64_t> new_ids(static_cast<std::size_t>(total));
    std::vector<int64_t> cursor(offsets.begin(), offsets.end() - 1);
    for (int64_t l = 0; l < nlist; ++l) {
      const int64_t begin = model_.list_offsets[l], size = model_.list_size(l);
      if (size == 0) continue;  // an empty model's arrays may be NULL: memcpy(NULL, 0) is UB
      std::memcpy(vectors.data() + cursor[l] * dim, model_.vectors.data() + begin * dim,
                  sizeof(float) * size * dim);
      std::memcpy(new_ids.data() + cursor[l], model_.ids.data() + begin, sizeof(int64_t) * size);
      cursor[l] += size;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t slot = cursor[assign[i]]++;
      std::memcpy(vectors.data() + slot * dim, x + i * dim, sizeof(float) * dim);
      new_ids[slot] = ids[i];
    }
    // Nothing below can throw: the swap is the commit point.
    model_.list_offsets.swap(offsets);
    model_.vectors.swap(vectors);
    model_.ids.swap(new_ids);
  }

  void reset() override {
    model_.list_offsets.assign(model_.list_offsets.size(), 0);
    model_.vectors.clear();
    model_.vectors.shrink_to_fit();
    model_.ids.clear();
    model_.ids.shrink_to_fit();
  }

  void search(const SearchRequest& req) const override {
    const int64_t dim = model_.dim, nlist = model_.nlist;
    const bool larger = larger_is_better(model_.metric);
    const Metric kernel = larger ? Metric::InnerProduct : Metric::L2;
    // Coarse scores for a block of queries at once (one GEMM), then a parallel scan.
    const int64_t block = std::max<int64_t>(1, std::min<int64_t>(4096, (int64_t{1} << 24) / nlist));
    std::vector<float> scores;
    for (int64_t q0 = 0; q0 < req.n; q0 += block) {
      const int64_t rows = std::min(block, req.n - q0);
      scores.resize(static_cast<std::size_t>(rows * nlist));
      coarse_scores(req.queries + q0 * dim, rows, model_.centroids.data(),
                    model_.centroid_norms.data(), nlist, dim, model_.metric, scores.data());
      parallel_for(rows, threads_, 4, [&](int64_t r0, int64_t r1) {
        std::vector<int64_t> lists(static_cast<std::size_t>(nlist));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t q = q0 + r;
          const float* s = scores.data() + r * nlist;
          std::iota(lists.begin(), lists.end(), int64_t{0});
          std::partial_sort(lists.begin(), lists.begin() + req.nprobe, lists.end(),
                            [s](int64_t a, int64_t b) { return s[a] != s[b] ? s[a] < s[b] : a < b; });
          const float* query = req.queries + q * dim;
          TopK top(req.k, larger);
          for (int64_t p = 0; p < req.nprobe; ++p) {
            const int64_t l = lists[p];
            for (int64_t i = model_.list_offsets[l]; i < model_.list_offsets[l + 1]; ++i)
              top.push(exact_distance(query, model_.vectors.data() + i * dim, dim, kernel),
                       model_.ids[i]);
          }
          top.write(req.ids + q * req.k, req.dists + q * req.k);
        }
      });
    }
  }

  int64_t ntotal() const override { return model_.ntotal(); }
  bool is_trained() const override { return model_.trained; }

  BackendInfo info() const override {
    BackendInfo info;
    info.kind = BackendKind::Cpu;
    info.device = -1;
    info.host_memory_bytes = model_.bytes();
    return info;
  }

  HostModel snapshot() const override { return model_; }

  void restore(HostModel model) override { model_ = std::move(model); }

 private:
  BuildParams params_;
  HostModel model_;
  int threads_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int64_t dim, const BuildParams& params) {
  return std::make_unique<CpuBackend>(dim, params);
}

}  // namespace ivfgpu::cpu
