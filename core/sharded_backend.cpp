#include "sharded_backend.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "host_id_reads.hpp"
#include "list_layout.hpp"
#include "part_exchange.hpp"

namespace ivfgpu {

namespace {

// The parts' states, and a list store that reports their union (sizes, live rows).
class UnionStore final : public ListStore {
 public:
  // replica >= 0: the parts are replicas and part `replica` (a live one) speaks for them all.
  UnionStore(std::vector<StatePtr> parts, int64_t nlist, int64_t dim, int64_t replica) : parts_(std::move(parts)) {
    const std::size_t first = replica >= 0 ? static_cast<std::size_t>(replica) : 0;
    const std::size_t last = replica >= 0 ? first + 1 : parts_.size();
    sizes_.assign(static_cast<std::size_t>(nlist), 0);
    for (std::size_t p = first; p < last; ++p) {
      const ListView v = parts_[p]->lists().view();
      ntotal_ += v.ntotal;
      removed_ += v.removed_count;
      for (int64_t l = 0; l < nlist; ++l) sizes_[l] += v.host_size[l];
    }
    prefix_ = largest_lists_prefix(sizes_);
    nlist_ = nlist;
    dim_ = dim;
  }
  ListView view() const override {
    ListView v;
    v.nlist = nlist_;
    v.dim = dim_;
    v.ntotal = ntotal_;
    v.removed_count = removed_;
    v.size = v.host_size = sizes_.data();
    v.largest_prefix = prefix_.data();
    return v;
  }
  std::size_t bytes() const override {
    std::size_t b = 0;
    for (const StatePtr& s : parts_) b += s->lists().bytes();
    return b;
  }
  void export_lists(HostModel&) const override { fail(Errc::Internal, "a sharded store exports through its backend"); }

 private:
  std::vector<StatePtr> parts_;
  std::vector<int64_t> sizes_, prefix_;
  int64_t nlist_ = 0, dim_ = 0, ntotal_ = 0, removed_ = 0;
};

struct ShardedState final : IndexState {
  std::vector<StatePtr> parts;
  std::unique_ptr<UnionStore> store;
  int64_t next_part = 0;  // sharded: the part the next added row goes to

  bool trained() const override { return parts.front()->trained(); }
  const ListStore& lists() const override { return *store; }
};

const ShardedState& sharded(const IndexState& s) { return static_cast<const ShardedState&>(s); }

// Runs fn(p) for every part p, parts at once (parts on different devices work in parallel) on
// at most as many threads as the machine has cores (an index of 1024 CPU parts must not start
// 1024 threads per call); part 0 first on the calling thread. The first exception is rethrown
// after every part has finished.
template <class Fn>
void each_part(std::size_t parts, Fn&& fn) {
  std::vector<std::exception_ptr> errors(parts);
  std::atomic<std::size_t> next{1};
  auto run = [&](std::size_t p) {
    try {
      fn(p);
    } catch (...) {
      errors[p] = std::current_exception();
    }
  };
  auto worker = [&] {
    for (std::size_t p; (p = next.fetch_add(1)) < parts;) run(p);
  };
  const std::size_t cores = std::max<std::size_t>(2, std::thread::hardware_concurrency());
  const std::size_t helpers = std::min(parts > 0 ? parts - 1 : 0, cores - 1);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < helpers; ++i) threads.emplace_back(worker);
  if (parts > 0) run(0);
  worker();
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Rows [b, e) of `from` appended to `to`'s rows (both of one element type).
void append_rows(HostModel& to, const HostModel& from, int64_t b, int64_t e) {
  if (from.type == ElementType::F32) {
    to.vectors.insert(to.vectors.end(), from.vectors.begin() + b * from.dim, from.vectors.begin() + e * from.dim);
  } else {
    const auto rb = static_cast<int64_t>(from.row_bytes());
    to.packed.insert(to.packed.end(), from.packed.begin() + b * rb, from.packed.begin() + e * rb);
  }
}

// Host queries per search at most which split CUDA parts merge on the host (the small-batch
// path's limit, cuda/small_batch.hpp).
constexpr int64_t kHostMergeRows = 64;

class ShardedBackend final : public Backend {
 public:
  ShardedBackend(int64_t dim, const BuildParams& params, std::vector<std::unique_ptr<Backend>> parts,
                 std::unique_ptr<PartExchange> exchange)
      : dim_(dim), params_(params), mode_(static_cast<ShardMode>(params.shard_mode)), parts_(std::move(parts)),
        exchange_(std::move(exchange)), alive_(parts_.size()) {
    for (auto& a : alive_) a.store(true);
  }

  NewState initial_state() override {
    std::vector<StatePtr> s(parts_.size());
    each_part(parts_.size(), [&](std::size_t p) { s[p] = parts_[p]->initial_state(); });
    return make(std::move(s), 0);
  }

  NewState train(const IndexState&, const MatrixView& sample) override {
    // Once, on part 0; the others get its centroids (exactly the same floats).
    std::vector<StatePtr> s(parts_.size());
    s[0] = parts_[0]->train(*parts_[0]->initial_state(), sample);
    const HostModel centroids = parts_[0]->export_model(*s[0]);
    each_part(parts_.size(), [&](std::size_t p) {
      if (p > 0) s[p] = parts_[p]->restore(centroids);
    });
    return make(std::move(s), 0);
  }

  NewState add(const IndexState& current, const MatrixView& x, const int64_t* ids, MemoryKind ids_memory) override {
    const ShardedState& cur = sharded(current);
    host_only(x.memory, "add");
    host_only(ids_memory, "add");
    const int64_t n = x.rows;
    std::vector<int64_t> generated;
    ids = ids_or_sequential(ids, cur.ntotal(), n, generated);
    std::vector<StatePtr> next(cur.parts);
    if (mode_ == ShardMode::Replicate) {
      on_replicas([&](std::size_t p) { next[p] = parts_[p]->add(*cur.parts[p], x, ids, MemoryKind::Host); });
      return make(std::move(next), 0);
    }
    // Rows dealt to the parts in turn, continuing where the last add stopped. Each part gathers
    // its own rows (as bytes: the parts take them in the caller's element type) on its thread.
    const std::size_t g = parts_.size();
    const auto* src = static_cast<const unsigned char*>(x.data);
    const std::size_t row_bytes = static_cast<std::size_t>(dim_) * element_size(x.type);
    each_part(g, [&](std::size_t p) {
      const auto gi = static_cast<int64_t>(g);
      const int64_t first = ((static_cast<int64_t>(p) - cur.next_part) % gi + gi) % gi;  // its first row
      if (first >= n) return;
      const int64_t m = (n - first + gi - 1) / gi;
      std::vector<unsigned char> rows(static_cast<std::size_t>(m) * row_bytes);
      std::vector<int64_t> part_ids(static_cast<std::size_t>(m));
      for (int64_t j = 0; j < m; ++j) {
        const int64_t i = first + j * gi;
        std::memcpy(rows.data() + j * row_bytes, src + i * row_bytes, row_bytes);
        part_ids[j] = ids[i];
      }
      next[p] = parts_[p]->add(*cur.parts[p], MatrixView{rows.data(), x.type, m, dim_, MemoryKind::Host},
                               part_ids.data(), MemoryKind::Host);
    });
    return make(std::move(next), (cur.next_part + n) % static_cast<int64_t>(g));
  }

  NewState reset(const IndexState& current) override {
    const ShardedState& cur = sharded(current);
    std::vector<StatePtr> next(cur.parts);
    if (mode_ == ShardMode::Replicate)
      on_replicas([&](std::size_t p) { next[p] = parts_[p]->reset(*cur.parts[p]); });
    else
      each_part(parts_.size(), [&](std::size_t p) { next[p] = parts_[p]->reset(*cur.parts[p]); });
    return make(std::move(next), 0);
  }

  std::pair<NewState, int64_t> remove(const IndexState& current, const int64_t* ids, int64_t n) override {
    const ShardedState& cur = sharded(current);
    std::vector<StatePtr> next(cur.parts);
    std::vector<int64_t> counts(cur.parts.size(), -1);
    auto one = [&](std::size_t p) {
      auto [s, c] = parts_[p]->remove(*cur.parts[p], ids, n);
      next[p] = std::move(s);
      counts[p] = c;
    };
    int64_t removed = 0;
    if (mode_ == ShardMode::Replicate) {
      on_replicas(one);
      // Replicas hold the same rows: any live one's count is the index's.
      for (int64_t c : counts)
        if (c >= 0) removed = c;
    } else {
      each_part(parts_.size(), one);
      removed = std::accumulate(counts.begin(), counts.end(), int64_t{0});
    }
    return {make(std::move(next), cur.next_part), removed};
  }

  // Sharded: the row of the lowest-numbered part holding the id (within a part, its first in
  // list order). Replicated: any live part (they agree).
  void get(const IndexState& state, const int64_t* ids, int64_t n, float* out, uint8_t* found) const override {
    const ShardedState& st = sharded(state);
    std::vector<uint8_t> have(static_cast<std::size_t>(n), 0), part_found(static_cast<std::size_t>(n));
    std::vector<float> part_out(static_cast<std::size_t>(n * dim_));
    std::fill(out, out + n * dim_, 0.0f);
    const std::size_t parts = mode_ == ShardMode::Replicate ? 1 : parts_.size();
    for (std::size_t q = 0; q < parts; ++q) {
      const std::size_t p = mode_ == ShardMode::Replicate ? live_part() : q;
      parts_[p]->get(*st.parts[p], ids, n, part_out.data(), part_found.data());
      for (int64_t i = 0; i < n; ++i)
        if (!have[i] && part_found[i]) {
          have[i] = 1;
          std::memcpy(out + i * dim_, part_out.data() + i * dim_, sizeof(float) * dim_);
        }
    }
    if (found) std::copy(have.begin(), have.end(), found);
  }

  void count_ids(const IndexState& state, const int64_t* ids, int64_t n, int64_t* counts) const override {
    const ShardedState& st = sharded(state);
    if (mode_ == ShardMode::Replicate) {
      const std::size_t p = live_part();
      parts_[p]->count_ids(*st.parts[p], ids, n, counts);
      return;
    }
    std::fill(counts, counts + n, 0);
    std::vector<int64_t> c(static_cast<std::size_t>(n));
    for (std::size_t p = 0; p < parts_.size(); ++p) {
      parts_[p]->count_ids(*st.parts[p], ids, n, c.data());
      for (int64_t i = 0; i < n; ++i) counts[i] += c[i];
    }
  }

  NewState restore(HostModel model) override {
    const std::size_t g = parts_.size();
    std::vector<StatePtr> s(g);
    if (mode_ == ShardMode::Replicate) {
      each_part(g, [&](std::size_t p) { s[p] = parts_[p]->restore(model); });
      return make(std::move(s), 0);
    }
    // Each list dealt row by row to the parts, in turn, as an add would have.
    std::vector<HostModel> split(g, HostModel::empty(model.dim, model.metric, model.nlist));
    for (HostModel& m : split) {
      m.type = model.type;
      m.trained = model.trained;
      m.centroids = model.centroids;
      m.centroid_norms = model.centroid_norms;
      m.list_offsets.assign(static_cast<std::size_t>(model.nlist) + 1, 0);
    }
    int64_t turn = 0;
    for (int64_t l = 0; l < model.nlist; ++l) {
      for (int64_t r = model.list_offsets[l]; r < model.list_offsets[l + 1]; ++r, ++turn) {
        HostModel& m = split[static_cast<std::size_t>(turn % static_cast<int64_t>(g))];
        append_rows(m, model, r, r + 1);
        m.ids.push_back(model.ids[r]);
      }
      for (HostModel& m : split) m.list_offsets[l + 1] = static_cast<int64_t>(m.ids.size());
    }
    each_part(g, [&](std::size_t p) { s[p] = parts_[p]->restore(std::move(split[p])); });
    return make(std::move(s), turn % static_cast<int64_t>(g));
  }

  void search(const StatePtr& state, const SearchRequest& caller) const override {
    const ShardedState& st = sharded(*state);
    if (caller.memory == MemoryKind::Device) {
      if (!exchange_) fail(Errc::Unsupported, "search: device memory needs an index of CUDA parts");
      // Runs synchronously: the caller's stream first finishes what it queued (the queries).
      if (caller.stream != nullptr) wait_for_stream(caller.stream);
    }
    if (caller.n() == 0) return;
    // A device-memory search cut into blocks has its queries checked whole first: a block's own
    // check would name a row of its block, and the blocks before it would already have written
    // the caller's results. (Host queries were checked by Index::search.)
    SearchRequest req = caller;
    if (req.memory == MemoryKind::Device && cut_into_blocks(req)) {
      exchange_->reject_unusable_queries(req, params_.metric);
      req.device_queries_checked = true;  // the parts need not check their blocks again
    }
    if (mode_ == ShardMode::Replicate) return search_replicas(st, req);
    // A few host queries: each part answers on its own (its small-batch path) and the host
    // merges a few rows, which costs less than the exchange's device round trips.
    if (!exchange_ || (req.memory == MemoryKind::Host && req.n() <= kHostMergeRows))
      return search_split_on_host(st, req);
    // CUDA parts: results gathered and merged on the first part's device, in blocks of queries
    // whose gathered results stay bounded.
    const int64_t n = req.n(), block = exchange_->block_rows(req.k);
    for (int64_t q0 = 0; q0 < n; q0 += block) {
      const SearchRequest b = rows_of(req, q0, std::min(n, q0 + block));
      const std::unique_ptr<ExchangeCall> call = exchange_->split(b, larger_is_better(params_.metric));
      std::vector<Clock::time_point> searched(parts_.size());
      each_part(parts_.size(), [&](std::size_t p) {
        parts_[p]->search(st.parts[p], call->request(p));
        searched[p] = Clock::now();
        call->collect(p);
      });
      call->finish();
      count_merge(searched);
    }
  }

  // CPU parts, and small host batches: each part's top-k into host buffers, merged here.
  void search_split_on_host(const ShardedState& st, const SearchRequest& req) const {
    const std::size_t g = parts_.size();
    const int64_t n = req.n(), k = req.k;
    std::vector<std::vector<int64_t>> ids(g, std::vector<int64_t>(static_cast<std::size_t>(n * k)));
    std::vector<std::vector<float>> dists(g, std::vector<float>(static_cast<std::size_t>(n * k)));
    std::vector<Clock::time_point> searched(g);
    each_part(g, [&](std::size_t p) {
      SearchRequest r = req;
      r.ids = ids[p].data();
      r.dists = dists[p].data();
      parts_[p]->search(st.parts[p], r);
      searched[p] = Clock::now();
    });
    // Merge: the k best of the parts' G x k, in order of distance; equal distances keep part
    // order, then rank (deterministic). Padding (-1) sorts last. The CUDA merge
    // (cuda/part_exchange.cu) keeps exactly this order.
    const bool larger = larger_is_better(params_.metric);
    for (int64_t q = 0; q < n; ++q) {
      std::vector<int64_t> at(g, 0);
      for (int64_t j = 0; j < k; ++j) {
        std::size_t best = g;
        for (std::size_t p = 0; p < g; ++p) {
          if (at[p] >= k) continue;
          const int64_t e = q * k + at[p];
          if (ids[p][e] == -1) continue;
          if (best == g) {
            best = p;
            continue;
          }
          const float a = dists[p][e], b = dists[best][q * k + at[best]];
          if (larger ? a > b : a < b) best = p;
        }
        const int64_t out = q * k + j;
        if (best == g) {
          req.ids[out] = -1;
          req.dists[out] = larger ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
        } else {
          const int64_t e = q * k + at[best]++;
          req.ids[out] = ids[best][e];
          req.dists[out] = dists[best][e];
        }
      }
    }
    count_merge(searched);
  }

  HostModel export_model(const IndexState& state) const override {
    const ShardedState& st = sharded(state);
    if (mode_ == ShardMode::Replicate) {
      const std::size_t p = live_part();
      return parts_[p]->export_model(*st.parts[p]);
    }
    std::vector<HostModel> models(parts_.size());
    for (std::size_t p = 0; p < parts_.size(); ++p) models[p] = parts_[p]->export_model(*st.parts[p]);
    HostModel m = std::move(models[0]);
    if (parts_.size() == 1) return m;
    // List by list: part 0's rows, then part 1's, ...
    HostModel out = HostModel::empty(m.dim, m.metric, m.nlist);
    out.type = m.type;
    out.trained = m.trained;
    out.centroids = std::move(m.centroids);
    out.centroid_norms = std::move(m.centroid_norms);
    models[0] = std::move(m);
    out.list_offsets.assign(static_cast<std::size_t>(out.nlist) + 1, 0);
    for (int64_t l = 0; l < out.nlist; ++l) {
      for (const HostModel& pm : models) {
        const int64_t b = pm.list_offsets[l], e = pm.list_offsets[l + 1];
        append_rows(out, pm, b, e);
        out.ids.insert(out.ids.end(), pm.ids.begin() + b, pm.ids.begin() + e);
      }
      out.list_offsets[l + 1] = static_cast<int64_t>(out.ids.size());
    }
    return out;
  }

  // Device memory lives on the first part's device (IVF_INFO_PART_DEVICE(0)).
  std::vector<float> host_copy(const MatrixView& x) const override {
    if (!exchange_) fail(Errc::Unsupported, "device memory needs an index of CUDA parts");
    return parts_[0]->host_copy(x);
  }
  std::vector<int64_t> host_copy_ids(const int64_t* ids, int64_t n) const override {
    if (!exchange_) fail(Errc::Unsupported, "device memory needs an index of CUDA parts");
    return parts_[0]->host_copy_ids(ids, n);
  }
  // Rows in device memory reach the parts through the host (Index::add stages them).
  bool takes_device_rows() const override { return false; }

  BackendKind kind() const override { return parts_[0]->kind(); }

  BackendInfo info(const IndexState& state) const override {
    const ShardedState& st = sharded(state);
    BackendInfo sum;
    for (std::size_t p = 0; p < parts_.size(); ++p) {
      const BackendInfo i = parts_[p]->info(*st.parts[p]);
      if (p == 0) {
        sum.kind = i.kind;
        sum.device = i.device;
      }
      sum.device_memory_bytes += i.device_memory_bytes;
      sum.host_memory_bytes += i.host_memory_bytes;
      sum.pool_cached_bytes += i.pool_cached_bytes;
      sum.id_map_bytes += i.id_map_bytes;
      sum.resident_lists += i.resident_lists;
      sum.resident_bytes += i.resident_bytes;
      sum.host_tier_bytes += i.host_tier_bytes;
      sum.device_budget += i.device_budget;
      sum.cache_hits += i.cache_hits;
      sum.cache_misses += i.cache_misses;
      sum.streamed_bytes += i.streamed_bytes;
      sum.graph_searches += i.graph_searches;
      sum.fused_searches += i.fused_searches;
      sum.part_devices.push_back(i.device);
      sum.part_device_memory.push_back(i.device_memory_bytes);
    }
    if (exchange_) sum.pool_cached_bytes += exchange_->cached_bytes();  // merge buffers kept for reuse
    sum.merge_ns = merge_ns_.load(std::memory_order_relaxed);
    sum.peer_merge = exchange_ && exchange_->peer_copies();
    sum.parts = static_cast<int64_t>(parts_.size());
    sum.live_parts = static_cast<int64_t>(live_parts().size());
    return sum;
  }

  void trim() noexcept override {
    for (auto& p : parts_) p->trim();
    if (exchange_) exchange_->trim();
  }

  int64_t max_k() const override {
    int64_t m = 0;
    for (auto& p : parts_) {
      const int64_t k = p->max_k();
      if (k > 0) m = m == 0 ? k : std::min(m, k);
    }
    return m;
  }

  // Device memory is the merging part's (part 0's device); every part's device waits.
  void accept_device_memory(std::initializer_list<DeviceRange> ranges, bool synchronous) const override {
    parts_[0]->accept_device_memory(ranges, synchronous);
    for (std::size_t p = 1; p < parts_.size() && synchronous; ++p) parts_[p]->accept_device_memory({}, true);
  }

 private:
  static void host_only(MemoryKind m, const char* what) {
    if (m != MemoryKind::Host)
      fail(Errc::Unsupported, std::string(what) + ": an index over several shards takes host memory only");
  }

  NewState make(std::vector<StatePtr> parts, int64_t next_part) const {
    auto s = std::make_shared<ShardedState>();
    s->store = std::make_unique<UnionStore>(
        parts, params_.nlist, dim_, mode_ == ShardMode::Replicate ? static_cast<int64_t>(live_part()) : -1);
    s->parts = std::move(parts);
    s->next_part = next_part;
    return s;
  }

  // A replicated mutation on every live replica. A replica whose device is lost meanwhile is
  // dropped (it keeps its old state and serves nothing more); the mutation fails only when no
  // replica is left.
  template <class Fn>
  void on_replicas(Fn&& fn) const {
    const std::vector<std::size_t> live = live_parts();
    std::atomic<int> done{0};
    each_part(live.size(), [&](std::size_t i) {
      try {
        fn(live[i]);
        ++done;
      } catch (const Error& e) {
        if (e.code() != Errc::DeviceLost) throw;
        alive_[live[i]].store(false);
      }
    });
    if (done.load() == 0) fail(Errc::DeviceLost, "every replica of this index has lost its device");
  }

  // The parts whose device is not lost, in part order.
  std::vector<std::size_t> live_parts() const {
    std::vector<std::size_t> live;
    for (std::size_t p = 0; p < parts_.size(); ++p)
      if (alive_[p].load()) live.push_back(p);
    return live;
  }

  std::size_t live_part() const {
    for (std::size_t p = 0; p < parts_.size(); ++p)
      if (alive_[p].load()) return p;
    fail(Errc::DeviceLost, "every replica of this index has lost its device");
  }

  // Queries split into contiguous blocks, one per live replica; a replica whose device is lost
  // is dropped and its block searched again on the others.
  void search_replicas(const ShardedState& st, const SearchRequest& req) const {
    for (;;) {
      const std::vector<std::size_t> live = live_parts();
      if (live.empty()) fail(Errc::DeviceLost, "every replica of this index has lost its device");
      const int64_t n = req.n();
      const int64_t per = (n + static_cast<int64_t>(live.size()) - 1) / static_cast<int64_t>(live.size());
      std::atomic<bool> lost{false};
      each_part(live.size(), [&](std::size_t i) {
        const int64_t q0 = static_cast<int64_t>(i) * per, q1 = std::min(n, q0 + per);
        if (q0 >= q1) return;
        const SearchRequest r = rows_of(req, q0, q1);
        try {
          if (r.memory == MemoryKind::Device) {  // through the exchange: the replica's device may differ
            const std::unique_ptr<ExchangeCall> call = exchange_->replica(r, live[i]);
            parts_[live[i]]->search(st.parts[live[i]], call->request(live[i]));
            call->collect(live[i]);
          } else {
            parts_[live[i]]->search(st.parts[live[i]], r);
          }
        } catch (const Error& e) {
          if (e.code() != Errc::DeviceLost) throw;
          alive_[live[i]].store(false);  // served by the others from now on
          lost.store(true);
        }
      });
      if (!lost.load()) return;
      // Some block went unanswered: search the whole request again on the replicas left
      // (simple, and a lost device is rare).
    }
  }

  // Whether a device-memory search runs as several blocks of its queries: one a live replica,
  // or split calls whose gathered results stay bounded.
  bool cut_into_blocks(const SearchRequest& req) const {
    if (mode_ == ShardMode::Split) return req.n() > exchange_->block_rows(req.k);
    return live_parts().size() > 1;
  }

  using Clock = std::chrono::steady_clock;

  // Queries [q0, q1) of req, with their results.
  static SearchRequest rows_of(const SearchRequest& req, int64_t q0, int64_t q1) {
    SearchRequest r = req;
    r.queries = req.queries.rows_slice(q0, q1 - q0);
    r.ids = req.ids + q0 * req.k;
    r.dists = req.dists + q0 * req.k;
    return r;
  }

  // The merge's cost, as the caller sees it: from the last part's search returning to the
  // merged results (IVF_INFO_MERGE_NANOSECONDS).
  void count_merge(const std::vector<Clock::time_point>& searched) const {
    const Clock::time_point last = *std::max_element(searched.begin(), searched.end());
    merge_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - last).count(),
                        std::memory_order_relaxed);
  }

  int64_t dim_;
  BuildParams params_;
  ShardMode mode_;
  std::vector<std::unique_ptr<Backend>> parts_;
  std::unique_ptr<PartExchange> exchange_;  // CUDA parts: moves queries and results, merges
  mutable std::vector<std::atomic<bool>> alive_;
  mutable std::atomic<int64_t> merge_ns_{0};
};

}  // namespace

std::unique_ptr<Backend> make_sharded_backend(int64_t dim, const BuildParams& params,
                                              std::vector<std::unique_ptr<Backend>> parts,
                                              std::unique_ptr<PartExchange> exchange) {
  if (parts.empty()) fail(Errc::InvalidArgument, "an index needs at least one shard");
  return std::make_unique<ShardedBackend>(dim, params, std::move(parts), std::move(exchange));
}

}  // namespace ivfgpu
