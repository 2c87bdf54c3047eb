#include "index.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "vector_ops.hpp"

namespace ivfgpu {

namespace {

void reject_non_finite(const float* x, int64_t n, int64_t dim, const char* what) {
  int64_t row = first_non_finite_row(x, n, dim);
  if (row >= 0)
    fail(Errc::InvalidArgument, std::string(what) + " row " + std::to_string(row) +
                                    " holds NaN or Inf (rejected: no distance is defined for it)");
}

}  // namespace

Index::Index(int64_t dim, const BuildParams& params)
    : dim_(dim), params_(params), backend_(make_backend(dim, params)) {}

Index::Index(HostModel model, const BuildParams& params) : dim_(model.dim), params_(params) {
  model.validate();
  params_.nlist = model.nlist;
  params_.metric = model.metric;
  backend_ = make_backend(dim_, params_);
  backend_->restore(std::move(model));
}

void Index::train(const float* x, int64_t n) {
  if (backend_->ntotal() > 0)
    fail(Errc::InvalidState, "train: the index already holds vectors; call ivf_reset first");
  if (n < params_.nlist)
    fail(Errc::InvalidArgument, "train: need at least nlist (" + std::to_string(params_.nlist) +
                                    ") training vectors, got " + std::to_string(n));
  reject_non_finite(x, n, dim_, "train: data");
  const int64_t cap = params_.max_points_per_centroid * params_.nlist;
  std::vector<float> sample = sample_rows(x, n, dim_, std::max(cap, params_.nlist),
                                          static_cast<uint64_t>(params_.seed));
  const int64_t m = static_cast<int64_t>(sample.size()) / dim_;
  if (params_.metric == Metric::Cosine) sample = normalized_copy(sample.data(), m, dim_);
  backend_->train(sample.data(), m);
}

void Index::add(const float* x, int64_t n, const int64_t* ids) {
  if (!backend_->is_trained()) fail(Errc::InvalidState, "add: the index is not trained; call ivf_train first");
  reject_non_finite(x, n, dim_, "add: data");
  std::vector<int64_t> sequential;
  if (ids == nullptr) {
    sequential.resize(static_cast<std::size_t>(n));
    const int64_t base = backend_->ntotal();
    for (int64_t i = 0; i < n; ++i) sequential[i] = base + i;
    ids = sequential.data();
  } else {
    for (int64_t i = 0; i < n; ++i)
      if (ids[i] == -1) fail(Errc::InvalidArgument, "add: id -1 is reserved for padding (row " + std::to_string(i) + ")");
  }
  if (params_.metric == Metric::Cosine) {
    std::vector<float> unit = normalized_copy(x, n, dim_);
    backend_->add(unit.data(), ids, n);
  } else {
    backend_->add(x, ids, n);
  }
}

void Index::reset() { backend_->reset(); }

void Index::search(const SearchArgs& args) const {
  if (!backend_->is_trained()) fail(Errc::InvalidState, "search: the index is not trained");
  SearchRequest req;
  req.n = args.n;
  req.k = args.k;
  req.nprobe = std::clamp<int64_t>(args.nprobe > 0 ? args.nprobe : params_.nprobe, 1, params_.nlist);
  req.ids = args.ids;
  req.dists = args.dists;
  req.memory = args.memory;
  req.stream = args.stream;
  req.queries = args.queries;
  std::vector<float> unit;
  if (args.memory == MemoryKind::Host) {
    reject_non_finite(args.queries, args.n, dim_, "search: query");
    if (params_.metric == Metric::Cosine) {
      unit = normalized_copy(args.queries, args.n, dim_);
      req.queries = unit.data();
    }
  } else {
    if (backend_->info().kind != BackendKind::Cuda)
      fail(Errc::InvalidArgument, "search: device memory needs an index on a CUDA backend");
    req.normalize_queries = params_.metric == Metric::Cosine;
  }
  backend_->search(req);
}

}  // namespace ivfgpu
