// The CUDA backend of an index with a device budget (IVF_PARAM_DEVICE_BUDGET, docs/host-tier.md):
// every list lives in the host tier (pinned host memory, tier/tier_store.hpp); the device holds
// the centroids, per-state list sizes and id addresses, and the TierCache (cached lists, the
// staging ring), all from one pool the driver caps at the budget. Mutations run on the host
// (the tier is host memory) with the nearest-centroid assignment on the device; searches run
// the usual pipeline with the TierCache as stage C.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../cpu/kmeans.hpp"
#include "../cpu/parallel.hpp"
#include "../kmeans_steps.hpp"
#include "../element_convert.hpp"
#include "../errors.hpp"
#include "../host_id_reads.hpp"
#include "../progress.hpp"
#include "../tier/tier_store.hpp"
#include "../vector_ops.hpp"
#include "assign.hpp"
#include "caller_memory.hpp"
#include "check.hpp"
#include "cuda_backend.hpp"
#include "cuda_handles.hpp"
#include "device_buffer.hpp"
#include "device_centroids.hpp"
#include "device_context.hpp"
#include "element_rows.hpp"
#include "failure_policy.hpp"
#include "id_set.hpp"
#include "kmeans.hpp"
#include "pinned_memory.hpp"
#include "search.hpp"
#include "select.hpp"
#include "tier_cache.hpp"

namespace ivfgpu::cuda {

namespace {

using tier::TierStore;

// Per state: what the device needs to address the host tier's lists.
struct TierAddressing {
  DeviceBuffer<int64_t> sizes;               // nlist
  DeviceBuffer<const int64_t*> list_ids;     // nlist: each list's ids, device-visible host memory
};

struct TierState final : IndexState {
  CentroidsPtr host;
  std::shared_ptr<const DeviceCentroids> device;
  TierStore::Ptr store;
  std::shared_ptr<const TierAddressing> addressing;

  bool trained() const override { return host != nullptr; }
  const ListStore& lists() const override { return *store; }
};

const TierState& tier_state(const IndexState& s) { return static_cast<const TierState&>(s); }

// The rows of a store in list order (host_id_reads.hpp), decoded to f32.
auto rows_of(const TierStore& store) {
  return [&store](auto&& fn) {
    const int64_t dim = store.dim();
    const std::size_t row_bytes = store.row_bytes();
    for (int64_t l = 0; l < store.nlist(); ++l) {
      const tier::TierList& t = store.list(l);
      for (int64_t r = 0; r < t.size; ++r)
        fn(t.ids[r], [&](float* out) { decode_into(t.rows + r * row_bytes, store.type(), dim, out); });
    }
  };
}

class TieredBackend final : public Backend {
 public:
  TieredBackend(int64_t dim, const BuildParams& params)
      : params_(params), dim_(dim),
        budget_(TierBudget::plan(static_cast<std::size_t>(params.device_budget), params.nlist, dim)),
        ctx_(static_cast<int>(params.device), budget_.pool), main_([&] {
          DeviceGuard guard(ctx_.device());
          return make_priority_stream();
        }()),
        arenas_(std::make_shared<tier::HostArenas>(pinned_host_memory())),
        cache_(ctx_, budget_, params.nlist), threads_(resolve_threads(params.num_threads)) {}

  ~TieredBackend() override {
    (void)cudaSetDevice(ctx_.device());
    (void)cudaStreamSynchronize(main_.get());
  }

  NewState initial_state() override {
    return guarded([&] { return make_state(nullptr, nullptr, TierStore::empty(arenas_, dim_, storage(), params_.nlist)); });
  }

  NewState train(const IndexState&, const MatrixView& sample) override {
    return guarded([&] {
      // k-means on the device holds the sample and a block of scores there. When that does not
      // fit the budget's scratch and add shares, the sample stays on the host and streams
      // through a device block each iteration (the assignment is the heavy step); only when not
      // even the centroids and one row fit does it run on the host (OpenBLAS), seeded alike.
      const auto m = static_cast<std::size_t>(sample.rows), d = static_cast<std::size_t>(dim_),
                 nc = static_cast<std::size_t>(params_.nlist);
      const std::size_t share = budget_.scratch + budget_.mutation;
      const std::size_t block = std::min<std::size_t>(m, (std::size_t{1} << 26) / nc);
      const std::size_t device_bytes = m * (d * 4 + 16) + block * nc * 4 + nc * (d + 4) * 8;
      const std::size_t centroid_bytes = nc * (d + 1) * 4 + (std::size_t{1} << 20);
      const std::size_t per_row = (d + nc + 2) * 4;
      CentroidsPtr host;
      if (device_bytes <= share)
        host = train_centroids(ctx_, main(), params_, dim_, sample);
      else if (share > centroid_bytes + per_row)
        host = train_streamed(sample, static_cast<int64_t>((share - centroid_bytes) / per_row));
      else
        host = train_on_host(sample);
      auto device = upload_centroids(ctx_, main(), *host);
      return make_state(std::move(host), std::move(device), TierStore::empty(arenas_, dim_, storage(), params_.nlist));
    });
  }

  NewState add(const IndexState& current, const MatrixView& rows, const int64_t* ids, MemoryKind ids_memory) override {
    return guarded([&] {
      const TierState& cur = tier_state(current);
      const int64_t n = rows.rows;
      // The tier is host memory: rows and ids come to the host first, and rows are encoded
      // there (encode_rows: the same rounding and checks as the GPU's encoder).
      const HostAddRows in = host_add_rows(rows);
      std::vector<int64_t> host_ids;
      if (ids != nullptr && ids_memory == MemoryKind::Device) {
        host_ids = copy_to_host(ids, n);
        for (int64_t i = 0; i < n; ++i)
          if (host_ids[i] == -1)
            fail(Errc::InvalidArgument, "add: id -1 is reserved for padding (row " + std::to_string(i) + ")");
        ids = host_ids.data();
      }
      ids = ids_or_sequential(ids, cur.store->ntotal(), n, host_ids);
      const std::vector<int64_t> lists = assign(cur, in.stored, storage(), n);
      return make_state(cur.host, cur.device, cur.store->append(in.stored, ids, lists.data(), n, threads_));
    });
  }

  NewState reset(const IndexState& current) override {
    return guarded([&] {
      const TierState& cur = tier_state(current);
      return make_state(cur.host, cur.device, TierStore::empty(arenas_, dim_, storage(), params_.nlist));
    });
  }

  std::pair<NewState, int64_t> remove(const IndexState& current, const int64_t* ids, int64_t n) override {
    return guarded([&] {
      const TierState& cur = tier_state(current);
      const std::unordered_set<int64_t> gone(ids, ids + n);
      auto [store, count] = cur.store->remove_if([&](int64_t id) { return gone.count(id) != 0; }, threads_);
      return std::pair<NewState, int64_t>(make_state(cur.host, cur.device, std::move(store)), count);
    });
  }

  void get(const IndexState& state, const int64_t* ids, int64_t n, float* out, uint8_t* found) const override {
    get_first_rows(rows_of(*tier_state(state).store), ids, n, dim_, out, found);
  }

  void count_ids(const IndexState& state, const int64_t* ids, int64_t n, int64_t* counts) const override {
    count_rows(rows_of(*tier_state(state).store), ids, n, counts);
  }

  NewState restore(HostModel model) override {
    return guarded([&] {
      CentroidsPtr host = centroids_from(model);
      std::shared_ptr<const DeviceCentroids> device = host ? upload_centroids(ctx_, main(), *host) : nullptr;
      // The file's lists become the tier in place (pinned where they lie: no second copy).
      return make_state(std::move(host), std::move(device), TierStore::from_model(arenas_, model));
    });
  }

  void search(const StatePtr& state, const SearchRequest& req) const override {
    guarded([&] {
      const TierState& st = tier_state(*state);
      std::lock_guard<std::mutex> one_at_a_time(cache_.search_mutex());
      struct Scanner final : ListScanner {
        TierCache* cache;
        const TierStore* store;
        void scan(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p) const override {
          cache->scan_chunk(ctx, stream, p, *store);
        }
      } scanner;
      scanner.cache = &cache_;
      scanner.store = st.store.get();
      SearchIndexView view;
      view.dim = dim_;
      view.nlist = params_.nlist;
      view.metric = params_.metric;
      view.centroids = st.device->centroids.data();
      view.centroid_norms = st.device->norms.data();
      view.lists = st.store->view();
      view.lists.size = st.addressing->sizes.data();  // device sizes; host mirrors stay
      view.scanner = &scanner;
      view.list_ids = st.addressing->list_ids.data();
      view.scratch_budget = budget_.scratch;
      // A filter's device set is built for this search, under the budget, on the stream the
      // search will run on (the caller's, or a worker's that run_search then reuses).
      DeviceContext::Lease lease(ctx_, static_cast<cudaStream_t>(req.stream));
      std::unique_ptr<IdSet> filter_set;
      IdSetView filter_view;
      if (req.filter != nullptr) {
        const std::vector<int64_t>& fids = req.filter->ids();
        DeviceBuffer<int64_t> d(ctx_, std::max<std::size_t>(fids.size(), 1), lease.stream());
        if (!fids.empty())
          IVF_CUDA_CHECK(cudaMemcpyAsync(d.data(), fids.data(), fids.size() * sizeof(int64_t), cudaMemcpyHostToDevice,
                                         lease.stream()));
        filter_set = std::make_unique<IdSet>(
            IdSet::build(ctx_, d.data(), static_cast<int64_t>(fids.size()), lease.stream()));
        filter_view = filter_set->view();
        view.filter_set = &filter_view;
      }
      view.lease = &lease;  // run_search uses this worker (one cuBLAS handle per search)
      try {
        // The caller's request as it came: with no stream of the caller's a device-memory search
        // is synchronous, so run_search checks its queries (the lease's own stream in the request
        // had made it look asynchronous, and such queries went unchecked).
        run_search(ctx_, view, req);
      } catch (...) {
        // Copies queued before the failure (a cancel, say) read this state's host memory: let
        // them finish before the state can go.
        (void)cudaStreamSynchronize(lease.stream());
        throw;
      }
      // The copies read this state's host memory: the call returns when they are done.
      IVF_CUDA_CHECK(cudaStreamSynchronize(lease.stream()));
    });
  }

  HostModel export_model(const IndexState& state) const override {
    const TierState& st = tier_state(state);
    HostModel m = model_with_centroids(dim_, params_.metric, params_.nlist, st.host);
    st.store->export_lists(m);
    return m;
  }

  std::vector<int64_t> host_copy_ids(const int64_t* ids, int64_t n) const override {
    return guarded([&] { return copy_to_host(ids, n); });
  }
  std::vector<float> host_copy(const MatrixView& x) const override {
    return guarded([&] {
      if (x.type == ElementType::F32) return copy_to_host(x.as<float>(), x.rows * x.dim);
      const std::vector<unsigned char> raw = copy_to_host(
          static_cast<const unsigned char*>(x.data), x.rows * x.dim * static_cast<int64_t>(element_size(x.type)));
      return decode_rows(raw.data(), x.type, x.rows, x.dim);
    });
  }

  BackendKind kind() const override { return BackendKind::Cuda; }

  BackendInfo info(const IndexState& state) const override {
    const TierState& st = tier_state(state);
    BackendInfo info;
    info.kind = BackendKind::Cuda;
    info.device = ctx_.device();
    // Everything the index holds on the device comes from the capped pool.
    info.device_memory_bytes = ctx_.pool_reserved_bytes();
    info.pool_cached_bytes = ctx_.pool_cached_bytes();
    info.host_memory_bytes = arenas_->reserved_bytes() + st.store->nlist() * 4 * sizeof(int64_t);
    if (st.host) info.host_memory_bytes += (st.host->centroids.size() + st.host->norms.size()) * sizeof(float);
    info.device_budget = budget_.budget;
    const TierStats s = cache_.stats();
    info.resident_lists = s.resident_lists;
    info.resident_bytes = s.resident_bytes;
    info.host_tier_bytes = arenas_->reserved_bytes();
    info.cache_hits = s.hits;
    info.cache_misses = s.misses;
    info.streamed_bytes = s.streamed_bytes;
    return info;
  }

  void trim() noexcept override {
    (void)cudaStreamSynchronize(main());
    try {
      arenas_->trim();
    } catch (...) {
    }
  }

  int64_t max_k() const override { return select_max_k(ctx_.limits()); }
  void accept_device_memory(std::initializer_list<DeviceRange> ranges, bool synchronous) const override {
    guarded([&] { cuda::accept_device_memory(ctx_.device(), ranges, synchronous); });
  }

 private:
  template <typename F>
  auto guarded(F&& f) const -> decltype(f()) {
    return failures_.run(ctx_.device(), std::forward<F>(f));
  }

  cudaStream_t main() const { return main_.get(); }

  ElementType storage() const { return static_cast<ElementType>(params_.storage); }

  // An add's rows on the host as the tier keeps them (`stored`, of the storage type): the
  // caller's rows where they already are that, else one encoded copy. The assignment decodes
  // them block by block (assign), so a large add of compact rows holds no f32 copy of itself.
  struct HostAddRows {
    std::vector<unsigned char> raw, encoded;
    std::vector<float> f32;
    const void* stored = nullptr;
  };
  HostAddRows host_add_rows(const MatrixView& rows) const {
    const int64_t n = rows.rows;
    HostAddRows r;
    const void* data = rows.data;
    if (!rows.on_host()) {
      r.raw = copy_to_host(static_cast<const unsigned char*>(rows.data),
                           n * dim_ * static_cast<int64_t>(element_size(rows.type)));
      data = r.raw.data();
      const int64_t bad = first_non_finite(MatrixView{data, rows.type, n, dim_, MemoryKind::Host});
      if (bad >= 0)
        fail(Errc::InvalidArgument, "add: data row " + std::to_string(bad) +
                                        " holds NaN or Inf (rejected: no distance is defined for it)");
    }
    // Rows of a compact type are already of the storage type (the Index allows no other).
    if (rows.type != ElementType::F32 && params_.metric != Metric::Cosine) {
      r.stored = data;
      return r;
    }
    const float* values = static_cast<const float*>(data);
    if (rows.type != ElementType::F32) {
      r.f32 = decode_rows(data, rows.type, n, dim_);
      values = r.f32.data();
    }
    if (params_.metric == Metric::Cosine) {
      r.f32 = normalized_copy(values, n, dim_);
      values = r.f32.data();
    }
    if (storage() == ElementType::F32) {
      r.stored = values;
    } else {
      r.encoded = encode_rows(MatrixView::host_f32(values, n, dim_), storage(), "add: data");
      r.f32 = {};
      r.stored = r.encoded.data();
    }
    return r;
  }

  template <class T>
  std::vector<T> copy_to_host(const T* device, int64_t n) const {
    std::vector<T> host(static_cast<std::size_t>(n));
    DeviceContext::Lease lease(ctx_, nullptr);
    if (n > 0)
      IVF_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, host.size() * sizeof(T), cudaMemcpyDeviceToHost, lease.stream()));
    IVF_CUDA_CHECK(cudaStreamSynchronize(lease.stream()));
    return host;
  }

  CentroidsPtr train_streamed(const MatrixView& sample, int64_t block_rows) const {
    return train_on_sample(params_, dim_, sample, [&](const float* x, int64_t rows, float* centroids) {
      DeviceContext::Lease lease(ctx_, main());
      kmeans_train_streamed(ctx_, main(), lease.blas(), x, rows, dim_, params_.nlist, params_.metric,
                            params_.kmeans_iters, static_cast<uint64_t>(params_.seed), block_rows, threads_,
                            centroids);
    });
  }

  CentroidsPtr train_on_host(const MatrixView& sample) const {
    return train_on_sample(params_, dim_, sample, [&](const float* x, int64_t rows, float* centroids) {
      cpu::kmeans(x, rows, dim_, params_.nlist, params_.metric, params_.kmeans_iters,
                  static_cast<uint64_t>(params_.seed), centroids);
    });
  }

  // Nearest list of each host row (`stored`: n rows of `type`), on the device in blocks that
  // fit the mutation budget; compact rows cross as they are and are decoded there (exactly).
  std::vector<int64_t> assign(const TierState& cur, const void* stored, ElementType type, int64_t n) const {
    std::vector<int64_t> lists(static_cast<std::size_t>(n));
    if (n == 0) return lists;
    const bool compact = type != ElementType::F32;
    const int64_t row_bytes = dim_ * static_cast<int64_t>(element_size(type));
    const int64_t per_row =
        static_cast<int64_t>(sizeof(float)) * (dim_ + params_.nlist + 2) + (compact ? row_bytes : 0);
    const int64_t block = std::max<int64_t>(1, std::min<int64_t>(n, static_cast<int64_t>(budget_.mutation) / per_row));
    DeviceContext::Lease lease(ctx_, main());
    const cudaStream_t stream = main();
    DeviceBuffer<float> d_x(ctx_, static_cast<std::size_t>(block * dim_), stream);
    DeviceBuffer<unsigned char> d_raw;
    if (compact) d_raw = DeviceBuffer<unsigned char>(ctx_, static_cast<std::size_t>(block * row_bytes), stream);
    DeviceBuffer<int32_t> d_assign(ctx_, static_cast<std::size_t>(block), stream);
    std::vector<int32_t> part(static_cast<std::size_t>(block));
    for (int64_t r0 = 0; r0 < n; r0 += block) {
      progress::set(0.8 * static_cast<double>(r0) / static_cast<double>(n));
      const int64_t rows = std::min(block, n - r0);
      const auto* src = static_cast<const unsigned char*>(stored) + r0 * row_bytes;
      if (compact) {
        IVF_CUDA_CHECK(cudaMemcpyAsync(d_raw.data(), src, static_cast<std::size_t>(rows * row_bytes),
                                       cudaMemcpyHostToDevice, stream));
        decode_rows_on_device(stream, type, d_raw.data(), rows, dim_, d_x.data());
      } else {
        IVF_CUDA_CHECK(cudaMemcpyAsync(d_x.data(), src, static_cast<std::size_t>(rows * row_bytes),
                                       cudaMemcpyHostToDevice, stream));
      }
      assign_nearest(ctx_, stream, lease.blas(), d_x.data(), rows, dim_, cur.device->centroids.data(),
                     cur.device->norms.data(), params_.nlist, params_.metric, d_assign.data());
      IVF_CUDA_CHECK(cudaMemcpyAsync(part.data(), d_assign.data(), sizeof(int32_t) * rows, cudaMemcpyDeviceToHost,
                                     stream));
      IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
      std::copy_n(part.data(), rows, lists.data() + r0);
    }
    return lists;
  }

  // A state of these parts, with the device arrays that address its lists.
  NewState make_state(CentroidsPtr host, std::shared_ptr<const DeviceCentroids> device, TierStore::Ptr store) const {
    const int64_t nlist = store->nlist();
    std::vector<const int64_t*> id_addr(static_cast<std::size_t>(nlist));
    for (int64_t l = 0; l < nlist; ++l) id_addr[l] = store->list(l).device_ids;
    auto a = std::make_shared<TierAddressing>();
    a->sizes = DeviceBuffer<int64_t>(ctx_, static_cast<std::size_t>(nlist), main(), MemoryUse::State);
    a->list_ids = DeviceBuffer<const int64_t*>(ctx_, static_cast<std::size_t>(nlist), main(), MemoryUse::State);
    IVF_CUDA_CHECK(cudaMemcpyAsync(a->sizes.data(), store->sizes().data(), a->sizes.bytes(), cudaMemcpyHostToDevice,
                                   main()));
    IVF_CUDA_CHECK(cudaMemcpyAsync(a->list_ids.data(), id_addr.data(), a->list_ids.bytes(), cudaMemcpyHostToDevice,
                                   main()));
    IVF_CUDA_CHECK(cudaStreamSynchronize(main()));
    auto s = std::make_shared<TierState>();
    s->host = std::move(host);
    s->device = std::move(device);
    s->store = std::move(store);
    s->addressing = std::move(a);
    return s;
  }

  BuildParams params_;
  int64_t dim_;
  TierBudget budget_;
  DeviceContext ctx_;
  UniqueStream main_;  // mutations; serialised by the Index
  std::shared_ptr<tier::HostArenas> arenas_;
  mutable TierCache cache_;
  int threads_;
  FailurePolicy failures_;
};

}  // namespace

std::unique_ptr<Backend> make_tiered_backend(int64_t dim, const BuildParams& params) {
  return std::make_unique<TieredBackend>(dim, params);
}

}  // namespace ivfgpu::cuda
