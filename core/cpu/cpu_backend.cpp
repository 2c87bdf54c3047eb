#include "cpu_backend.hpp"

#include <algorithm>
#include <numeric>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../centroids.hpp"
#include "../element_convert.hpp"
#include "../errors.hpp"
#include "../host_id_reads.hpp"
#include "../kmeans_steps.hpp"
#include "../progress.hpp"
#include "../vector_ops.hpp"
#include "block_scan.hpp"
#include "distances.hpp"
#include "host_list_store.hpp"
#include "kmeans.hpp"
#include "parallel.hpp"

namespace ivfgpu::cpu {

namespace {

struct CpuState final : IndexState {
  CentroidsPtr centroids;  // null until trained
  std::shared_ptr<const HostListStore> store;

  bool trained() const override { return centroids != nullptr; }
  const ListStore& lists() const override { return *store; }
};

const CpuState& cpu_state(const IndexState& s) { return static_cast<const CpuState&>(s); }

// The live rows of a store in list order, decoded to f32 on demand (host_id_reads.hpp).
auto live_rows(const HostListStore& store) {
  return [&store](auto&& fn) {
    const ListView v = store.view();
    const std::size_t row_bytes = store.row_bytes();
    store.for_each_live([&](int64_t slot, int64_t) {
      fn(v.ids[slot], [&](float* out) {
        const std::vector<float> f =
            decode_rows(static_cast<const unsigned char*>(v.vectors) + slot * row_bytes, v.type, 1, v.dim);
        std::copy(f.begin(), f.end(), out);
      });
    });
  };
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(int64_t dim, const BuildParams& params)
      : params_(params), dim_(dim), threads_(resolve_threads(params.num_threads)),
        storage_(static_cast<ElementType>(params.storage)) {}

  NewState initial_state() override {
    auto s = std::make_shared<CpuState>();
    s->store = HostListStore::empty(dim_, params_.nlist, storage_);
    return s;
  }

  NewState train(const IndexState&, const MatrixView& sample) override {
    auto s = std::make_shared<CpuState>();
    s->centroids = train_on_sample(params_, dim_, sample, [&](const float* x, int64_t rows, float* centroids) {
      kmeans(x, rows, dim_, params_.nlist, params_.metric, params_.kmeans_iters, static_cast<uint64_t>(params_.seed),
             centroids);
    });
    s->store = HostListStore::empty(dim_, params_.nlist, storage_);
    return s;
  }

  NewState add(const IndexState& current, const MatrixView& rows, const int64_t* ids, MemoryKind) override {
    const CpuState& cur = cpu_state(current);
    const int64_t n = rows.rows;
    std::vector<int64_t> sequential;
    ids = ids_or_sequential(ids, cur.ntotal(), n, sequential);
    // The rows as the index stores them, and the f32 values they hold (assignment works on
    // what is stored, so a row's list never depends on the input's type).
    std::vector<unsigned char> stored;
    std::vector<float> values, unit;
    const void* bytes = nullptr;
    const float* x = nullptr;
    if (storage_ == ElementType::F32) {
      x = prepared(rows, unit);
      bytes = x;
    } else {
      MatrixView in = rows;
      if (params_.metric == Metric::Cosine) {  // float types only (checked at creation)
        unit = rows.type == ElementType::F32 ? normalized_copy(rows.as<float>(), n, dim_)
                                             : normalized_copy(decode_rows(rows.data, rows.type, n, dim_).data(), n, dim_);
        in = MatrixView::host_f32(unit.data(), n, dim_);
      }
      stored = encode_rows(in, storage_, "add: data");
      values = decode_rows(stored.data(), storage_, n, dim_);
      bytes = stored.data();
      x = values.data();
    }
    std::vector<int64_t> assign(static_cast<std::size_t>(n));
    nearest_centroids(x, n, cur.centroids->centroids.data(), cur.centroids->norms.data(), params_.nlist, dim_,
                      params_.metric, assign.data());
    progress::set(0.8);
    auto s = std::make_shared<CpuState>();
    s->centroids = cur.centroids;
    s->store = cur.store->append(bytes, ids, assign.data(), n);
    return s;
  }

  NewState reset(const IndexState& current) override {
    auto s = std::make_shared<CpuState>();
    s->centroids = cpu_state(current).centroids;
    s->store = HostListStore::empty(dim_, params_.nlist, storage_);
    return s;
  }

  std::pair<NewState, int64_t> remove(const IndexState& current, const int64_t* ids, int64_t n) override {
    const CpuState& cur = cpu_state(current);
    const std::unordered_set<int64_t> gone(ids, ids + n);
    auto [store, count] = cur.store->remove_if([&](int64_t id) { return gone.count(id) != 0; });
    const ListView v = store->view();
    // Reclaim removed rows once they are a quarter of the used rows.
    if (v.removed_count * 4 > v.ntotal + v.removed_count) store = store->compacted();
    auto s = std::make_shared<CpuState>();
    s->centroids = cur.centroids;
    s->store = std::move(store);
    return {std::move(s), count};
  }

  void get(const IndexState& state, const int64_t* ids, int64_t n, float* out, uint8_t* found) const override {
    get_first_rows(live_rows(*cpu_state(state).store), ids, n, dim_, out, found);
  }

  void count_ids(const IndexState& state, const int64_t* ids, int64_t n, int64_t* counts) const override {
    count_rows(live_rows(*cpu_state(state).store), ids, n, counts);
  }

  NewState restore(HostModel model) override {
    auto s = std::make_shared<CpuState>();
    s->centroids = centroids_from(model);
    s->store = HostListStore::from_model(model);
    return s;
  }

  void search(const StatePtr& state, const SearchRequest& req) const override {
    const CpuState& st = cpu_state(*state);
    const ListView lists = st.store->view();
    dispatch_element_type(lists.type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      scan<T>(st, lists, req);
    });
  }

  HostModel export_model(const IndexState& state) const override {
    const CpuState& st = cpu_state(state);
    HostModel m = model_with_centroids(dim_, params_.metric, params_.nlist, st.centroids);
    st.store->export_lists(m);
    return m;
  }

  std::vector<float> host_copy(const MatrixView&) const override {
    fail(Errc::InvalidArgument, "device memory needs an index on a CUDA backend");
  }
  std::vector<int64_t> host_copy_ids(const int64_t*, int64_t) const override {
    fail(Errc::InvalidArgument, "device memory needs an index on a CUDA backend");
  }

  BackendKind kind() const override { return BackendKind::Cpu; }

  BackendInfo info(const IndexState& state) const override {
    const CpuState& st = cpu_state(state);
    BackendInfo info;
    info.kind = BackendKind::Cpu;
    info.device = -1;
    info.host_memory_bytes = st.store->bytes();
    if (st.centroids)
      info.host_memory_bytes += (st.centroids->centroids.size() + st.centroids->norms.size()) * sizeof(float);
    return info;
  }

 private:
  // The metric's view of host f32 rows: cosine works on unit vectors (the one place the CPU
  // backend normalises).
  const float* prepared(const MatrixView& x, std::vector<float>& unit) const {
    if (params_.metric != Metric::Cosine) return x.as<float>();
    unit = normalized_copy(x.as<float>(), x.rows, dim_);
    return unit.data();
  }

  // Queries against the stored rows: f32 queries stay f32 (the distance is exact in fp32
  // between the query and the stored, decoded vector); queries of the storage type are
  // decoded, except integer queries against integer rows, whose distances are exact integers
  // (int64 sums) rounded once to float.
  template <class T>
  void scan(const CpuState& st, const ListView& lists, const SearchRequest& req) const {
    const int64_t dim = dim_, nlist = params_.nlist, n = req.n();
    const bool larger = larger_is_better(params_.metric);
    const Metric kernel = larger ? Metric::InnerProduct : Metric::L2;
    std::vector<float> unit, decoded;
    const bool integer_queries = is_integer(req.queries.type) && req.queries.type == lists.type;
    MatrixView qv = req.queries;
    if (qv.type != ElementType::F32) {
      decoded = decode_rows(qv.data, qv.type, n, dim);
      qv = MatrixView::host_f32(decoded.data(), n, dim);
    }
    const float* queries = prepared(qv, unit);
    const T* int_queries = integer_queries ? req.queries.as<T>() : nullptr;
    // Coarse scores and probes for a block of queries at once (one GEMM), then the block's
    // scan (block_scan.hpp). The block is cut so that its scores, its probes (kMaxBlockPairs)
    // and a list-major scan's heaps stay bounded, but not below 256 queries for the heaps: a k
    // so large that a list-major scan would need smaller blocks is scanned query-major, which
    // wants many queries per block to spread over the cores.
    const int64_t largest = lists.largest_prefix[1];  // the store keeps it (list_layout.hpp)
    int64_t block = std::min({int64_t{4096}, std::max<int64_t>(1, (int64_t{1} << 24) / nlist),
                              std::max<int64_t>(1, kMaxBlockPairs / req.nprobe)});
    const int64_t list_major = list_major_block(req.nprobe, req.k, largest);
    if (list_major >= 256) block = std::min(block, list_major);
    std::vector<float> scores;
    std::vector<int64_t> probes;
    for (int64_t q0 = 0; q0 < n; q0 += block) {
      progress::set(static_cast<double>(q0) / static_cast<double>(n));
      const int64_t count = std::min(block, n - q0);
      scores.resize(static_cast<std::size_t>(count * nlist));
      probes.resize(static_cast<std::size_t>(count * req.nprobe));
      coarse_scores(queries + q0 * dim, count, st.centroids->centroids.data(), st.centroids->norms.data(), nlist,
                    dim, params_.metric, scores.data());
      parallel_for(count, threads_, 4, [&](int64_t r0, int64_t r1) {
        std::vector<int64_t> order(static_cast<std::size_t>(nlist));
        for (int64_t r = r0; r < r1; ++r) {
          const float* s = scores.data() + r * nlist;
          std::iota(order.begin(), order.end(), int64_t{0});
          std::partial_sort(order.begin(), order.begin() + req.nprobe, order.end(),
                            [s](int64_t a, int64_t b) { return s[a] != s[b] ? s[a] < s[b] : a < b; });
          std::copy(order.begin(), order.begin() + req.nprobe, probes.begin() + r * req.nprobe);
        }
      });
      const ScanBlock b{queries + q0 * dim,
                        int_queries != nullptr ? static_cast<const void*>(int_queries + q0 * dim) : nullptr,
                        count, dim, req.nprobe, req.k, probes.data(), larger, kernel, req.filter, threads_,
                        req.ids + q0 * req.k, req.dists + q0 * req.k};
      scan_block<T>(lists, b);
    }
  }

  BuildParams params_;
  int64_t dim_;
  int threads_;
  ElementType storage_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int64_t dim, const BuildParams& params) {
  return std::make_unique<CpuBackend>(dim, params);
}

}  // namespace ivfgpu::cpu
