// The CUDA backend: runs every operation on a published state under one failure policy.
// Out-of-memory and ordinary CUDA errors leave the index as it was (nothing is published); the
// first sticky error marks the backend lost, and every later call fails with Errc::DeviceLost.
// Mutations run on the backend's own stream and synchronise only it: they never wait for
// searches, which run on worker streams or callers' streams.
#include "cuda_backend.hpp"

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "../centroids.hpp"
#include "../element_convert.hpp"
#include "../errors.hpp"
#include "../kmeans_steps.hpp"
#include "../progress.hpp"
#include "../vector_ops.hpp"
#include "assign.hpp"
#include "caller_memory.hpp"
#include "check.hpp"
#include "cublas_loader.hpp"
#include "cuda_handles.hpp"
#include "device_buffer.hpp"
#include "device_centroids.hpp"
#include "device_context.hpp"
#include "failure_policy.hpp"
#include "device_list_store.hpp"
#include "element_rows.hpp"
#include "id_ops.hpp"
#include "id_set.hpp"
#include "kmeans.hpp"
#include "progress_wait.hpp"
#include "rows.hpp"
#include "search.hpp"
#include "select.hpp"

namespace ivfgpu::cuda {

int usable_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
    return 0;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device";
    return 0;
  }
  std::string blas_why;
  if (!blas::available(&blas_why)) {
    if (why) *why = blas_why;
    return 0;
  }
  return n;
}

namespace {

// Numbers every state made in the process, so a cache keyed by it (captured search graphs)
// can never mistake a new state for an old one whose memory it happens to reuse.
uint64_t next_state_serial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

struct CudaState final : IndexState {
  const uint64_t serial = next_state_serial();
  CentroidsPtr host;                               // null until trained
  std::shared_ptr<const DeviceCentroids> device;   // null until trained
  std::shared_ptr<const DeviceListStore> store;
  IdMapPtr ids;                                    // id -> slot of its first row in list order

  bool trained() const override { return host != nullptr; }
  const ListStore& lists() const override { return *store; }
};

const CudaState& cuda_state(const IndexState& s) { return static_cast<const CudaState&>(s); }

// A filter's id set on one device, with the context and stream its memory belongs to.
class DeviceIdSet final : public IdFilter::DeviceCopy {
 public:
  DeviceIdSet(int device, const std::vector<int64_t>& ids) : ctx_(device), stream_(make_stream()), set_(build(ids)) {}
  ~DeviceIdSet() override { (void)cudaStreamSynchronize(stream_.get()); }
  std::size_t bytes() const override { return set_.bytes(); }
  IdSetView view() const { return set_.view(); }

 private:
  IdSet build(const std::vector<int64_t>& ids) {
    DeviceGuard guard(ctx_.device());
    DeviceBuffer<int64_t> d(ctx_, std::max<std::size_t>(ids.size(), 1), stream_.get());
    if (!ids.empty())
      IVF_CUDA_CHECK(cudaMemcpyAsync(d.data(), ids.data(), ids.size() * sizeof(int64_t), cudaMemcpyHostToDevice,
                                     stream_.get()));
    IdSet set = IdSet::build(ctx_, d.data(), static_cast<int64_t>(ids.size()), stream_.get());
    IVF_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    return set;
  }
  DeviceContext ctx_;
  UniqueStream stream_;
  IdSet set_;
};

// A search queued on a caller's stream keeps its state alive until that stream passes `done`.
struct PendingRelease {
  UniqueEvent done;
  StatePtr state;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int64_t dim, const BuildParams& params)
      : params_(params), dim_(dim), ctx_(static_cast<int>(params.device)), main_([&] {
          DeviceGuard guard(ctx_.device());
          return make_priority_stream();
        }()) {}

  ~CudaBackend() override {
    (void)cudaSetDevice(ctx_.device());
    // Asynchronous searches may still read their states: wait for each, then let go.
    std::vector<PendingRelease> pending;
    {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      pending.swap(pending_);
    }
    for (PendingRelease& p : pending) (void)cudaEventSynchronize(p.done.get());
    pending.clear();
    (void)cudaStreamSynchronize(main_.get());
  }

  NewState initial_state() override {
    return guarded([&] {
      auto s = std::make_shared<CudaState>();
      s->store = DeviceListStore::empty(ctx_, main(), dim_, storage(), params_.nlist);
      s->ids = empty_map();
      return s;
    });
  }

  NewState train(const IndexState&, const MatrixView& sample) override {
    return guarded([&] {
      auto s = std::make_shared<CudaState>();
      s->host = train_centroids(ctx_, main(), params_, dim_, sample);
      s->device = upload_centroids(ctx_, main(), *s->host);
      s->store = DeviceListStore::empty(ctx_, main(), dim_, storage(), params_.nlist);
      s->ids = empty_map();
      return s;
    });
  }

  NewState add(const IndexState& current, const MatrixView& rows, const int64_t* ids, MemoryKind ids_memory) override {
    return guarded([&] {
      retire_finished();
      const CudaState& cur = cuda_state(current);
      const int64_t n = rows.rows;
      const cudaStream_t stream = main();
      DeviceContext::Lease lease(ctx_, stream);
      DeviceBuffer<int64_t> d_ids;
      if (ids == nullptr || ids_memory == MemoryKind::Host) {
        // Device ids for the store and the id map (sequential ones: ntotal, ntotal + 1, ...).
        d_ids = DeviceBuffer<int64_t>(ctx_, static_cast<std::size_t>(n), stream);
        if (ids != nullptr)
          IVF_CUDA_CHECK(cudaMemcpyAsync(d_ids.data(), ids, d_ids.bytes(), cudaMemcpyHostToDevice, stream));
        else
          fill_sequential(stream, d_ids.data(), n, cur.store->ntotal());
      } else {
        // Device ids get the check the Index gives host ids.
        const int64_t reserved = first_equal(ctx_, stream, ids, n, -1);
        if (reserved >= 0)
          fail(Errc::InvalidArgument, "add: id -1 is reserved for padding (row " + std::to_string(reserved) + ")");
      }
      // Progress (a callback set on the call): the steps' shares are rough; with a callback the
      // GPU steps are waited for while it is told (wait_reporting), without one nothing waits
      // more than before.
      const AddRows in = add_rows(stream, rows);
      progress::set(0.2);
      const float* x = in.values;
      DeviceBuffer<int32_t> assign(ctx_, static_cast<std::size_t>(n), stream);
      assign_nearest(ctx_, stream, lease.blas(), x, n, dim_, cur.device->centroids.data(), cur.device->norms.data(),
                     params_.nlist, params_.metric, assign.data());
      wait_reporting(stream);
      progress::set(0.5);
      const int64_t* row_ids = d_ids.data() != nullptr ? d_ids.data() : ids;
      DeviceBuffer<int64_t> slots(ctx_, static_cast<std::size_t>(n), stream);
      auto s = std::make_shared<CudaState>();
      s->host = cur.host;
      s->device = cur.device;
      s->store = cur.store->append(ctx_, stream, in.stored, row_ids, assign.data(), n, slots.data());
      progress::set(0.8);
      // Same storage: the map gains the new rows; a grown storage moved every row: map it anew.
      s->ids = s->store->same_storage(*cur.store) ? map_with_rows(ctx_, stream, *cur.ids, row_ids, slots.data(), n)
                                                  : build_id_map(ctx_, stream, *s->store);
      wait_reporting(stream);
      return s;
    });
  }

  std::pair<NewState, int64_t> remove(const IndexState& current, const int64_t* ids, int64_t n) override {
    return guarded([&] {
      const CudaState& cur = cuda_state(current);
      const cudaStream_t stream = main();
      DeviceBuffer<int64_t> d_ids = upload_ids(stream, ids, n);
      const IdSet gone = IdSet::build(ctx_, d_ids.data(), n, stream);
      auto [store, count] = cur.store->remove_in(ctx_, stream, gone.view());
      auto s = std::make_shared<CudaState>();
      s->host = cur.host;
      s->device = cur.device;
      const ListView v = store->view();
      // Reclaim removed rows once they are a quarter of the used rows (a new storage: remap).
      if (v.removed_count * 4 > v.ntotal + v.removed_count) {
        s->store = store->compacted(ctx_, stream);
        s->ids = build_id_map(ctx_, stream, *s->store);
      } else {
        s->store = std::move(store);
        s->ids = map_without(ctx_, stream, *cur.ids, d_ids.data(), n);
      }
      IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
      return std::pair<NewState, int64_t>(std::move(s), count);
    });
  }

  void get(const IndexState& state, const int64_t* ids, int64_t n, float* out, uint8_t* found) const override {
    guarded([&] {
      const CudaState& st = cuda_state(state);
      DeviceContext::Lease lease(ctx_, nullptr);  // a reader: a worker stream of its own
      const cudaStream_t stream = lease.stream();
      DeviceBuffer<int64_t> d_ids = upload_ids(stream, ids, n);
      DeviceBuffer<float> d_out(ctx_, static_cast<std::size_t>(n * dim_), stream);
      DeviceBuffer<uint8_t> d_found(ctx_, static_cast<std::size_t>(n), stream);
      gather_by_id(ctx_, stream, *st.ids, st.store->view(), d_ids.data(), n, d_out.data(), d_found.data());
      IVF_CUDA_CHECK(cudaMemcpyAsync(out, d_out.data(), d_out.bytes(), cudaMemcpyDeviceToHost, stream));
      if (found != nullptr)
        IVF_CUDA_CHECK(cudaMemcpyAsync(found, d_found.data(), d_found.bytes(), cudaMemcpyDeviceToHost, stream));
      IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
  }

  void count_ids(const IndexState& state, const int64_t* ids, int64_t n, int64_t* counts) const override {
    guarded([&] {
      const CudaState& st = cuda_state(state);
      DeviceContext::Lease lease(ctx_, nullptr);
      const cudaStream_t stream = lease.stream();
      DeviceBuffer<int64_t> d_ids = upload_ids(stream, ids, n);
      DeviceBuffer<int64_t> d_counts(ctx_, static_cast<std::size_t>(n), stream);
      count_by_id(ctx_, stream, *st.ids, params_.unique_ids, st.store->view(), d_ids.data(), n, d_counts.data());
      IVF_CUDA_CHECK(cudaMemcpyAsync(counts, d_counts.data(), d_counts.bytes(), cudaMemcpyDeviceToHost, stream));
      IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    });
  }

  NewState reset(const IndexState& current) override {
    return guarded([&] {
      const CudaState& cur = cuda_state(current);
      auto s = std::make_shared<CudaState>();
      s->host = cur.host;
      s->device = cur.device;
      s->store = DeviceListStore::empty(ctx_, main(), dim_, storage(), params_.nlist);
      s->ids = empty_map();
      return s;
    });
  }

  NewState restore(HostModel model) override {
    return guarded([&] {
      auto s = std::make_shared<CudaState>();
      s->store = DeviceListStore::from_model(ctx_, main(), model);
      s->ids = build_id_map(ctx_, main(), *s->store);
      s->host = centroids_from(model);
      if (s->host) s->device = upload_centroids(ctx_, main(), *s->host);
      return s;
    });
  }

  void search(const StatePtr& state, const SearchRequest& req) const override {
    guarded([&] {
      retire_finished();
      const CudaState& st = cuda_state(*state);
      SearchIndexView view;
      view.dim = dim_;
      view.nlist = params_.nlist;
      view.metric = params_.metric;
      view.centroids = st.device->centroids.data();
      view.centroid_norms = st.device->norms.data();
      view.lists = st.store->view();
      view.state_id = st.serial;
      IdSetView filter_set;
      if (req.filter != nullptr) {
        const auto& copy = static_cast<const DeviceIdSet&>(req.filter->device_copy(
            ctx_.device(), [&] { return std::make_unique<DeviceIdSet>(ctx_.device(), req.filter->ids()); }));
        filter_set = copy.view();
        view.filter_set = &filter_set;
      }
      run_search(ctx_, view, req);
      if (req.asynchronous()) {
        PendingRelease p{make_event(), state};
        IVF_CUDA_CHECK(cudaEventRecord(p.done.get(), static_cast<cudaStream_t>(req.stream)));
        std::lock_guard<std::mutex> lock(pending_mutex_);
        pending_.push_back(std::move(p));
      }
    });
  }

  HostModel export_model(const IndexState& state) const override {
    const CudaState& st = cuda_state(state);
    HostModel m = model_with_centroids(dim_, params_.metric, params_.nlist, st.host);
    guarded([&] { st.store->export_lists(m); });
    return m;
  }

  std::vector<int64_t> host_copy_ids(const int64_t* ids, int64_t n) const override {
    return guarded([&] {
      std::vector<int64_t> host(static_cast<std::size_t>(n));
      DeviceContext::Lease lease(ctx_, nullptr);
      IVF_CUDA_CHECK(cudaMemcpyAsync(host.data(), ids, host.size() * sizeof(int64_t), cudaMemcpyDeviceToHost,
                                     lease.stream()));
      IVF_CUDA_CHECK(cudaStreamSynchronize(lease.stream()));
      return host;
    });
  }

  std::vector<float> host_copy(const MatrixView& x) const override {
    return guarded([&] {
      // Rows of a compact type are decoded on the device first (exact).
      DeviceContext::Lease lease(ctx_, nullptr);
      const cudaStream_t stream = lease.stream();
      std::vector<float> host(static_cast<std::size_t>(x.rows * x.dim));
      DeviceBuffer<float> decoded;
      const void* src = x.data;
      if (x.type != ElementType::F32) {
        decoded = DeviceBuffer<float>(ctx_, host.size(), stream);
        decode_rows_on_device(stream, x.type, x.data, x.rows, x.dim, decoded.data());
        src = decoded.data();
      }
      IVF_CUDA_CHECK(cudaMemcpyAsync(host.data(), src, host.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
      IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
      return host;
    });
  }

  BackendKind kind() const override { return BackendKind::Cuda; }

  BackendInfo info(const IndexState& state) const override {
    const CudaState& st = cuda_state(state);
    BackendInfo info;
    info.kind = BackendKind::Cuda;
    info.device = ctx_.device();
    info.device_memory_bytes = st.store->bytes();
    info.host_memory_bytes = st.store->view().nlist * 4 * sizeof(int64_t);
    if (st.host) {
      info.device_memory_bytes += st.device->centroids.bytes() + st.device->norms.bytes();
      info.host_memory_bytes += (st.host->centroids.size() + st.host->norms.size()) * sizeof(float);
    }
    info.pool_cached_bytes = ctx_.pool_cached_bytes();
    info.id_map_bytes = st.ids ? st.ids->bytes() : 0;
    info.device_memory_bytes += info.id_map_bytes;
    // Without a budget every list is on the device.
    const ListView v = st.store->view();
    for (int64_t l = 0; l < v.nlist; ++l) info.resident_lists += v.host_size[l] > 0 ? 1 : 0;
    info.resident_bytes = st.store->bytes();
    info.graph_searches = ctx_.graph_searches();
    info.fused_searches = ctx_.fused_searches();
    return info;
  }

  void trim() noexcept override {
    retire_finished_noexcept();
    // Frees of the replaced state were queued on the mutation stream: let them land first.
    (void)cudaStreamSynchronize(main());
    ctx_.release_search_caches();
    ctx_.trim_pool();
  }

  int64_t max_k() const override { return select_max_k(ctx_.limits()); }
  void accept_device_memory(std::initializer_list<DeviceRange> ranges, bool synchronous) const override {
    guarded([&] { cuda::accept_device_memory(ctx_.device(), ranges, synchronous); });
  }

  bool checks_queries_late(const SearchRequest& req) const override { return run_search_checks_queries_late(req); }

 private:
  template <typename F>
  auto guarded(F&& f) const -> decltype(f()) {
    return failures_.run(ctx_.device(), std::forward<F>(f));
  }

  cudaStream_t main() const { return main_.get(); }

  ElementType storage() const { return static_cast<ElementType>(params_.storage); }

  // An add's rows on the device: `values`, f32 prepared for the metric and equal to the stored
  // values decoded (what the assignment sees), and `stored`, the elements the list store
  // keeps. Input of the storage type is decoded exactly; f32 input to a compact index is
  // encoded here, on the GPU, with the documented rounding and checks (element_rows.hpp).
  struct AddRows {
    DeviceBuffer<float> f32;
    DeviceBuffer<unsigned char> bytes;
    const float* values = nullptr;
    const void* stored = nullptr;
  };
  AddRows add_rows(cudaStream_t stream, const MatrixView& rows) const {
    const int64_t n = rows.rows;
    const std::size_t count = static_cast<std::size_t>(n * dim_);
    AddRows r;
    auto f32_buffer = [&]() -> float* {
      if (r.f32.data() == nullptr) r.f32 = DeviceBuffer<float>(ctx_, count, stream);
      return r.f32.data();
    };
    if (rows.type == ElementType::F32) {
      if (rows.on_host()) {
        IVF_CUDA_CHECK(cudaMemcpyAsync(f32_buffer(), rows.data, sizeof(float) * count, cudaMemcpyHostToDevice, stream));
        r.values = r.f32.data();
      } else {
        r.values = rows.as<float>();
      }
    } else {
      // The storage type: its elements are what the store keeps, unless cosine rescales them.
      const void* raw = rows.data;
      if (rows.on_host()) {
        r.bytes = DeviceBuffer<unsigned char>(ctx_, count * element_size(rows.type), stream);
        IVF_CUDA_CHECK(cudaMemcpyAsync(r.bytes.data(), raw, r.bytes.bytes(), cudaMemcpyHostToDevice, stream));
        raw = r.bytes.data();
      }
      decode_rows_on_device(stream, rows.type, raw, n, dim_, f32_buffer());
      r.values = r.f32.data();
      if (params_.metric != Metric::Cosine) r.stored = raw;
    }
    if (!rows.on_host()) {
      // Device input gets the check the Index gives host input.
      bool non_finite = false;
      const int64_t bad =
          first_unusable_row(ctx_, stream, ElementType::F32, r.values, n, dim_, params_.metric != Metric::Cosine,
                             &non_finite);
      if (bad >= 0) fail_unusable_row("add: data", bad, non_finite);
    }
    if (params_.metric == Metric::Cosine) {
      // The one place this backend normalises rows.
      normalize_rows(stream, r.values, n, dim_, f32_buffer());
      r.values = r.f32.data();
    }
    if (storage() == ElementType::F32) {
      r.stored = r.values;
    } else if (r.stored == nullptr) {
      DeviceBuffer<unsigned char> encoded(ctx_, count * element_size(storage()), stream);
      encode_rows_on_device(ctx_, stream, r.values, n, dim_, storage(), encoded.data(), "add: data");
      decode_rows_on_device(stream, storage(), encoded.data(), n, dim_, f32_buffer());
      r.values = r.f32.data();
      r.bytes = std::move(encoded);
      r.stored = r.bytes.data();
    }
    return r;
  }

  IdMapPtr empty_map() { return std::make_shared<IdMap>(ctx_, 1024, 0.8, main()); }

  DeviceBuffer<int64_t> upload_ids(cudaStream_t stream, const int64_t* ids, int64_t n) const {
    DeviceBuffer<int64_t> d(ctx_, static_cast<std::size_t>(std::max<int64_t>(n, 1)), stream);
    if (n > 0) IVF_CUDA_CHECK(cudaMemcpyAsync(d.data(), ids, sizeof(int64_t) * n, cudaMemcpyHostToDevice, stream));
    return d;
  }

  // Lets go of the states of asynchronous searches whose streams have passed them. The states
  // are dropped outside the lock (dropping one may free device memory).
  void retire_finished() const {
    std::vector<PendingRelease> done;
    {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      for (std::size_t i = 0; i < pending_.size();) {
        const cudaError_t e = cudaEventQuery(pending_[i].done.get());
        if (e == cudaErrorNotReady) {
          ++i;
          continue;
        }
        if (e != cudaSuccess) IVF_CUDA_CHECK(e);
        done.push_back(std::move(pending_[i]));
        pending_[i] = std::move(pending_.back());
        pending_.pop_back();
      }
    }
  }
  void retire_finished_noexcept() const noexcept {
    try {
      retire_finished();
    } catch (...) {
    }
  }

  BuildParams params_;
  int64_t dim_;
  DeviceContext ctx_;
  UniqueStream main_;  // mutations (high priority); serialised by the Index
  mutable std::mutex pending_mutex_;
  mutable std::vector<PendingRelease> pending_;
  FailurePolicy failures_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int64_t dim, const BuildParams& params) {
  if (params.device_budget > 0) return make_tiered_backend(dim, params);
  return std::make_unique<CudaBackend>(dim, params);
}

}  // namespace ivfgpu::cuda
