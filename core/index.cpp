#include "index.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "element_convert.hpp"
#include "errors.hpp"
#include "progress.hpp"
#include "vector_ops.hpp"

namespace ivfgpu {

namespace {

// Device-memory rows (and their ids) copied to the host for a backend that takes host rows only
// (an index of several parts: its parts may sit on other devices). The host checks then apply.
struct HostStaged {
  std::vector<float> rows;
  std::vector<int64_t> ids;
  MatrixView rows_of(const Backend& backend, const MatrixView& x, const int64_t*& row_ids) {
    if (x.on_host() || backend.takes_device_rows()) return x;
    rows = backend.host_copy(x);  // compact rows decoded: exact, and f32 is always accepted
    if (row_ids != nullptr) {
      ids = backend.host_copy_ids(row_ids, x.rows);
      row_ids = ids.data();
    }
    return MatrixView::host_f32(rows.data(), x.rows, x.dim);
  }
};

// Device-memory rows and ids of an add or update: addressable by the index's device, and the
// caller's default-stream work on them done (Backend::accept_device_memory).
void accept_device_rows(const Backend& backend, const MatrixView& x, const int64_t* ids, const char* what) {
  if (x.on_host()) return;
  const std::string rows = std::string(what) + ": data", row_ids = std::string(what) + ": ids";
  const std::size_t id_bytes = ids != nullptr ? static_cast<std::size_t>(x.rows) * sizeof(int64_t) : 0;
  backend.accept_device_memory({{x.data, x.bytes(), rows.c_str()}, {ids, id_bytes, row_ids.c_str()}}, true);
}

void reject_padding_ids(const MatrixView& x, const int64_t* ids) {
  if (ids == nullptr || !x.on_host()) return;  // device ids: checked by the backend
  for (int64_t i = 0; i < x.rows; ++i)
    if (ids[i] == -1) fail(Errc::InvalidArgument, "add: id -1 is reserved for padding (row " + std::to_string(i) + ")");
}

// Input rows are f32 or the index's storage type (issue 11); anything else is refused here,
// once, for every call.
void check_input_type(const MatrixView& x, ElementType storage, const char* what) {
  if (x.type == ElementType::F32 || x.type == storage) return;
  fail(Errc::InvalidArgument, std::string(what) + ": the data is " + element_name(x.type) +
                                  "; this index stores " + element_name(storage) + ": pass f32 or " +
                                  element_name(storage));
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
        p.storage = static_cast<int32_t>(model.type);
        return p;
      }()),
      backend_(make_backend(dim_, params_)), state_(nullptr) {
  if (params_.unique_ids) {
    std::unordered_set<int64_t> seen(model.ids.begin(), model.ids.end());
    if (seen.size() != model.ids.size())
      fail(Errc::CorruptData, "index model: the file declares unique ids but repeats one");
  }
  int64_t next = 0;
  for (int64_t id : model.ids) next = std::max(next, id == std::numeric_limits<int64_t>::max() ? id : id + 1);
  NewState s = backend_->restore(std::move(model));
  s->next_free_id = next;
  state_.publish(std::move(s));
}

Index::~Index() {
  // The last published state goes first (its device buffers belong to the backend's pool).
  state_.publish(nullptr);
}

template <class Build>
void Index::mutate(Build&& build) {
  std::lock_guard<std::mutex> lock(mutation_mutex_);
  const StatePtr current = state_.load();
  NewState next = build(*current);
  progress::finish();  // the caller's last chance to cancel: nothing is published yet
  next->version = current->version + 1;
  if (next->next_free_id < current->next_free_id) next->next_free_id = current->next_free_id;
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
  if (!x.on_host()) backend_->accept_device_memory({{x.data, x.bytes(), "train: data"}}, true);
  check_input_type(x, storage(), "train");
  mutate([&](const IndexState& current) {
    if (current.ntotal() > 0)
      fail(Errc::InvalidState, "train: the index already holds vectors; call ivf_reset first");
    // The sample is drawn on the host: training data in device memory is copied over first,
    // compact rows are decoded (k-means runs in f32 on the values the rows hold).
    std::vector<float> host;
    const float* rows = x.as<float>();
    if (!x.on_host()) {
      host = backend_->host_copy(x);
      rows = host.data();
    } else if (x.type != ElementType::F32) {
      host = decode_rows(x.data, x.type, x.rows, x.dim);  // exact: checked below as f32
      rows = host.data();
    }
    reject_unusable_rows(MatrixView::host_f32(rows, x.rows, dim_), params_.metric, "train: data");
    const int64_t cap = params_.max_points_per_centroid * params_.nlist;
    std::vector<float> sample = sample_rows(rows, x.rows, dim_, std::max(cap, params_.nlist),
                                            static_cast<uint64_t>(params_.seed));
    const int64_t m = static_cast<int64_t>(sample.size()) / dim_;
    return backend_->train(current, MatrixView::host_f32(sample.data(), m, dim_));
  });
}

std::vector<int64_t> Index::checked_ids(const IndexState& current, const MatrixView& x, const int64_t* ids,
                                        bool replacing) const {
  std::vector<int64_t> host;
  if (ids == nullptr) {
    // Checked before the ids are made: counting past INT64_MAX is undefined.
    if (current.next_free_id > std::numeric_limits<int64_t>::max() - x.rows)
      fail(Errc::InvalidArgument, "add: no sequential ids left after " + std::to_string(current.next_free_id));
    host.resize(static_cast<std::size_t>(x.rows));
    std::iota(host.begin(), host.end(), current.next_free_id);
  } else {
    host = x.on_host() ? std::vector<int64_t>(ids, ids + x.rows) : backend_->host_copy_ids(ids, x.rows);
  }
  if (!params_.unique_ids && !replacing) return host;
  const char* what = replacing ? "update" : "add";
  std::unordered_set<int64_t> batch;
  batch.reserve(host.size());
  for (int64_t i = 0; i < x.rows; ++i)
    if (!batch.insert(host[i]).second)
      fail(Errc::InvalidArgument, std::string(what) + ": id " + std::to_string(host[i]) + " (row " + std::to_string(i) +
                                      ") repeats an earlier row of the same call");
  if (params_.unique_ids && !replacing) {
    std::vector<int64_t> counts(host.size());
    backend_->count_ids(current, host.data(), x.rows, counts.data());
    for (int64_t i = 0; i < x.rows; ++i)
      if (counts[i] > 0)
        fail(Errc::InvalidArgument, "add: id " + std::to_string(host[i]) + " (row " + std::to_string(i) +
                                        ") is already in this unique-ids index (use ivf_update to replace it)");
  }
  return host;
}

namespace {
int64_t next_free_after(const std::vector<int64_t>& ids, int64_t current) {
  for (int64_t id : ids) current = std::max(current, id == std::numeric_limits<int64_t>::max() ? id : id + 1);
  return current;
}
}  // namespace

void Index::add(const MatrixView& input, const int64_t* ids) {
  if (!input.on_host() && backend_->kind() != BackendKind::Cuda)
    fail(Errc::InvalidArgument, "add: device memory needs an index on a CUDA backend");
  accept_device_rows(*backend_, input, ids, "add");
  check_input_type(input, storage(), "add");
  HostStaged staged;
  const MatrixView x = staged.rows_of(*backend_, input, ids);
  reject_unusable_rows(x, params_.metric, "add: data");
  reject_padding_ids(x, ids);
  mutate([&](const IndexState& current) {
    if (!current.trained()) fail(Errc::InvalidState, "add: the index is not trained; call ivf_train first");
    if (!params_.unique_ids) {
      NewState next = backend_->add(current, x, ids, x.memory);
      if (ids == nullptr) next->next_free_id = current.ntotal() + x.rows;
      return next;
    }
    const std::vector<int64_t> host = checked_ids(current, x, ids, false);
    // Generated ids are host values even for device rows.
    NewState next = ids == nullptr ? backend_->add(current, x, host.data(), MemoryKind::Host)
                                   : backend_->add(current, x, ids, x.memory);
    next->next_free_id = next_free_after(host, current.next_free_id);
    return next;
  });
}

int64_t Index::remove(const int64_t* ids, int64_t n) {
  if (n == 0) return 0;
  int64_t removed = 0;
  mutate([&](const IndexState& current) {
    if (!current.trained()) fail(Errc::InvalidState, "remove: the index is not trained");
    auto [next, count] = backend_->remove(current, ids, n);
    removed = count;
    return next;
  });
  return removed;
}

void Index::update(const MatrixView& input, const int64_t* ids) {
  if (ids == nullptr) fail(Errc::InvalidArgument, "update: ids is NULL (an update names the ids it replaces)");
  if (!input.on_host() && backend_->kind() != BackendKind::Cuda)
    fail(Errc::InvalidArgument, "update: device memory needs an index on a CUDA backend");
  accept_device_rows(*backend_, input, ids, "update");
  check_input_type(input, storage(), "update");
  HostStaged staged;
  const MatrixView x = staged.rows_of(*backend_, input, ids);
  reject_unusable_rows(x, params_.metric, "update: data");
  reject_padding_ids(x, ids);
  mutate([&](const IndexState& current) {
    if (!current.trained()) fail(Errc::InvalidState, "update: the index is not trained; call ivf_train first");
    const std::vector<int64_t> host = checked_ids(current, x, ids, true);
    // Both steps build private states: only the last one is published.
    const NewState without = backend_->remove(current, host.data(), x.rows).first;
    NewState next = backend_->add(*without, x, ids, x.memory);
    next->next_free_id = next_free_after(host, current.next_free_id);
    return next;
  });
}

void Index::get(const int64_t* ids, int64_t n, float* out, uint8_t* found) const {
  backend_->get(*state(), ids, n, out, found);
}

void Index::count_ids(const int64_t* ids, int64_t n, int64_t* counts) const {
  backend_->count_ids(*state(), ids, n, counts);
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
  if (req.memory == MemoryKind::Device) {
    // A caller's stream orders an asynchronous search itself; a synchronous one waits for the
    // default streams.
    const auto cells = static_cast<std::size_t>(req.n()) * static_cast<std::size_t>(req.k);
    backend_->accept_device_memory({{req.queries.data, req.queries.bytes(), "search: queries"},
                                    {req.ids, cells * sizeof(int64_t), "search: ids"},
                                    {req.dists, cells * sizeof(float), "search: dists"}},
                                   !req.asynchronous());
  }
  check_input_type(req.queries, storage(), "search");
  const bool batched = params_.dynamic_batching && req.batch_window_us > 0 && SearchBatcher::eligible(req);
  // A merged batch's members are checked one by one here: one bad caller fails alone.
  if (!batched && backend_->checks_queries_late(req))
    req.check_queries = true;
  else
    reject_unusable_rows(req.queries, params_.metric, "search: query");
  if (batched) {
    // The merged search reads the state published when it runs: every member's call started
    // before that, so each still sees every mutation that returned before it began.
    batcher_.search(req, req.batch_window_us, dim_, [&](const SearchRequest& merged) { backend_->search(state(), merged); });
    return;
  }
  backend_->search(s, req);
}

}  // namespace ivfgpu
