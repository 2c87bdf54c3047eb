#include "index.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "vector_ops.hpp"

namespace ivfgpu {

namespace {

void reject_non_finite(const MatrixView& x, const char* what) {
  if (!x.on_host() || x.type != ElementType::F32) return;  // device data: checked by the backend
  const int64_t row = first_non_finite_row(x.as<float>(), x.rows, x.dim);
  if (row >= 0)
    fail(Errc::InvalidArgument, std::string(what) + " row " + std::to_string(row) +
                                    " holds NaN or Inf (rejected: no distance is defined for it)");
}

void reject_padding_ids(const MatrixView& x, const int64_t* ids) {
  if (ids == nullptr || !x.on_host()) return;  // device ids: checked by the backend
  for (int64_t i = 0; i < x.rows; ++i)
    if (ids[i] == -1) fail(Errc::InvalidArgument, "add: id -1 is reserved for padding (row " + std::to_string(i) + ")");
}

}  // namespace

Index::Index(int64_t dim, const BuildParams& params)
    : dim_(dim), params_(params), backend_(make_backend(dim, params)), state_(backend_->initial_state()) {}

Index::Index(HostModel model, const BuildParams& params)
    : dim_(model.dim), params_([&] {
        model.validate();
        BuildParams p = params;
        p.nlist = model.nlist;
        p.metric = model.metric;
        return p;
      }()),
      backend_(make_backend(dim_, params_)), state_(backend_->restore(std::move(model))) {}

Index::~Index() {
  // The last published state goes first (its device buffers belong to the backend's pool).
  state_.publish(nullptr);
}

template <class Build>
void Index::mutate(Build&& build) {
  std::lock_guard<std::mutex> lock(mutation_mutex_);
  const StatePtr current = state_.load();
  NewState next = build(*current);
  next->version = current->version + 1;
  // The replaced state is dropped here, outside the pointer lock; its memory is reclaimed when
  // the last search holding it lets go.
  state_.publish(std::move(next));
}

void Index::train(const MatrixView& x) {
  if (x.rows < params_.nlist)
    fail(Errc::InvalidArgument, "train: need at least nlist (" + std::to_string(params_.nlist) +
                                    ") training vectors, got " + std::to_string(x.rows));
  if (!x.on_host() && backend_->kind() != BackendKind::Cuda)
    fail(Errc::InvalidArgument, "train: device memory needs an index on a CUDA backend");
  mutate([&](const IndexState& current) {
    if (current.ntotal() > 0)
      fail(Errc::InvalidState, "train: the index already holds vectors; call ivf_reset first");
    // The sample is drawn on the host: training data in device memory is copied over first.
    std::vector<float> host;
    const float* rows = x.as<float>();
    if (!x.on_host()) {
      host = backend_->host_copy(x);
      rows = host.data();
    }
    reject_non_finite(MatrixView::host_f32(rows, x.rows, dim_), "train: data");
    const int64_t cap = params_.max_points_per_centroid * params_.nlist;
    std::vector<float> sample = sample_rows(rows, x.rows, dim_, std::max(cap, params_.nlist),
                                            static_cast<uint64_t>(params_.seed));
    const int64_t m = static_cast<int64_t>(sample.size()) / dim_;
    return backend_->train(current, MatrixView::host_f32(sample.data(), m, dim_));
  });
}

void Index::add(const MatrixView& x, const int64_t* ids) {
  if (!x.on_host() && backend_->kind() != BackendKind::Cuda)
    fail(Errc::InvalidArgument, "add: device memory needs an index on a CUDA backend");
  reject_non_finite(x, "add: data");
  reject_padding_ids(x, ids);
  mutate([&](const IndexState& current) {
    if (!current.trained()) fail(Errc::InvalidState, "add: the index is not trained; call ivf_train first");
    return backend_->add(current, x, ids);
  });
}

void Index::reset() {
  mutate([&](const IndexState& current) { return backend_->reset(current); });
  backend_->trim();
}

void Index::search(SearchRequest req) const {
  const StatePtr s = state();
  if (!s->trained()) fail(Errc::InvalidState, "search: the index is not trained");
  req.nprobe = std::clamp<int64_t>(req.nprobe > 0 ? req.nprobe : params_.nprobe, 1, params_.nlist);
  const int64_t max_k = backend_->max_k();
  if (max_k > 0 && req.k > max_k)
    fail(Errc::Unsupported, "search: k = " + std::to_string(req.k) + " exceeds this device's maximum (" +
                                std::to_string(max_k) + ")");
  if (req.memory == MemoryKind::Device && backend_->kind() != BackendKind::Cuda)
    fail(Errc::InvalidArgument, "search: device memory needs an index on a CUDA backend");
  reject_non_finite(req.queries, "search: query");
  backend_->search(s, req);
}

}  // namespace ivfgpu
