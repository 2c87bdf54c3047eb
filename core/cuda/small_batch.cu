#include "small_batch.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "check.hpp"
#include "cublas_loader.hpp"
#include "search_stages.hpp"

namespace ivfgpu::cuda {

namespace {

// Opt-in (IVFGPU_SEARCH_GRAPH=1), read at every call.
bool graphs_enabled() {
  const char* e = std::getenv("IVFGPU_SEARCH_GRAPH");
  return e != nullptr && std::strcmp(e, "1") == 0;
}

// Whether n queries at nprobe go to the fused kernels. They scan query by query, so each probed
// list is read once per query; the list-major scan reads it once per group of queries, which
// wins once the (query, list) pairs pass about 512 (H100, 1M x 128, batches of 1 to 64 at
// nprobe 1, 16 and 64 on both paths: bench/RESULTS.md "Serving, continued").
// IVFGPU_FUSED_MAX_ROWS=N (read at every call, so tests and the benchmark compare paths in one
// process) sends every call of at most N queries there instead; 0 turns them off.
bool fused_takes(int64_t n, int64_t nprobe) {
  const char* e = std::getenv("IVFGPU_FUSED_MAX_ROWS");
  if (e != nullptr && *e != '\0') {
    char* end = nullptr;
    const long long v = std::strtoll(e, &end, 10);
    if (end != nullptr && *end == '\0' && v >= 0) return n <= std::min<int64_t>(v, kSmallBatchMax);
  }
  return n <= kFusedMaxRows && n * nprobe <= kFusedMaxPairs;
}

int64_t round_up_pow2(int64_t n) {
  int64_t r = 1;
  while (r < n) r <<= 1;
  return r;
}

// The worker's cuBLAS handle uses `ws` while a graph is captured (cuBLAS would otherwise take
// a workspace of its own inside the capture), then goes back to what it used before.
class BlasWorkspaceScope {
 public:
  BlasWorkspaceScope(const DeviceContext::Lease& lease, void* ws, std::size_t bytes) : lease_(lease) {
    IVF_CUBLAS_CHECK(blas::set_workspace(lease.blas(), ws, bytes));
  }
  ~BlasWorkspaceScope() {
    Worker& w = lease_.worker();
    if (w.workspace != nullptr)
      (void)blas::set_workspace(lease_.blas(), w.workspace, kBudgetedBlasWorkspace);
    else
      (void)blas::set_stream(lease_.blas(), lease_.stream());  // back to cuBLAS's own workspace
  }
  BlasWorkspaceScope(const BlasWorkspaceScope&) = delete;
  BlasWorkspaceScope& operator=(const BlasWorkspaceScope&) = delete;

 private:
  const DeviceContext::Lease& lease_;
};

}  // namespace

SmallBatchGraphs::Graph& SmallBatchGraphs::find(const SmallGraphKey& key) {
  ++clock_;
  for (Graph& g : graphs_)
    if (g.key == key) {
      g.last_use = clock_;
      return g;
    }
  if (graphs_.size() < kMaxGraphs) {
    graphs_.emplace_back();
  } else {
    // Evict the least recently used shape (most often one of a state no longer published).
    Graph* oldest = &graphs_.front();
    for (Graph& g : graphs_)
      if (g.last_use < oldest->last_use) oldest = &g;
    *oldest = Graph{};
    oldest->key = key;
    oldest->last_use = clock_;
    return *oldest;
  }
  Graph& g = graphs_.back();
  g.key = key;
  g.last_use = clock_;
  return g;
}

void SmallBatchGraphs::release_device_memory() noexcept {
  fused_.release_device_memory();
  graphs_.clear();
  arena_.release();
}

void SmallBatchGraphs::forget_captures() {
  for (Graph& g : graphs_) {
    g.exec.reset();
    g.queries = nullptr;
    g.ids = nullptr;
    g.dists = nullptr;
  }
}

bool SmallBatchGraphs::capture(const DeviceContext& ctx, const DeviceContext::Lease& lease,
                               const SearchIndexView& index, const SearchRequest& req, const SearchPlan& plan,
                               Graph& g) {
  cudaStream_t stream = lease.stream();
  const int64_t rows = g.key.rows, k = plan.k;
  const bool host = g.key.memory == MemoryKind::Host;
  const std::size_t row_in = static_cast<std::size_t>(plan.dim) * element_size(plan.qtype);
  // Staging for the largest shape of this k, so that other sizes do not move it again.
  bool moved = false;
  if (host) {
    moved |= in_.reserve(static_cast<std::size_t>(kSmallBatchMax * plan.dim) * sizeof(float));
    moved |= out_.reserve(static_cast<std::size_t>(kSmallBatchMax * k) * (sizeof(int64_t) + sizeof(float)));
  }
  moved |= arena_.reserve(ctx, std::size_t{1} << 20, stream);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (moved) forget_captures();
    moved = false;
    UniqueGraph graph;
    try {
      IVF_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      try {
        ArenaScope scope(ctx, arena_);
        DeviceBuffer<unsigned char> ws(ctx, kBudgetedBlasWorkspace, stream);
        BlasWorkspaceScope blas_ws(lease, ws.data(), ws.bytes());
        DeviceBuffer<unsigned char> queries(ctx, row_in * static_cast<std::size_t>(rows), stream);
        DeviceBuffer<int64_t> ids(ctx, static_cast<std::size_t>(rows * k), stream);
        DeviceBuffer<float> dists(ctx, static_cast<std::size_t>(rows * k), stream);
        if (host)
          IVF_CUDA_CHECK(cudaMemcpyAsync(queries.data(), in_.data(), queries.bytes(), cudaMemcpyHostToDevice, stream));
        ChunkScratch scratch(ctx, plan, rows, stream);
        enqueue_chunk(ctx, lease, index, req, plan, scratch, queries.data(), rows, ids.data(), dists.data());
        if (host) {
          IVF_CUDA_CHECK(cudaMemcpyAsync(out_.data(), ids.data(), ids.bytes(), cudaMemcpyDeviceToHost, stream));
          IVF_CUDA_CHECK(cudaMemcpyAsync(out_.data() + ids.bytes(), dists.data(), dists.bytes(),
                                         cudaMemcpyDeviceToHost, stream));
        }
        g.queries = queries.data();
        g.ids = ids.data();
        g.dists = dists.data();
      } catch (...) {
        cudaGraph_t junk = nullptr;
        (void)cudaStreamEndCapture(stream, &junk);
        if (junk != nullptr) (void)cudaGraphDestroy(junk);
        throw;
      }
      cudaGraph_t captured = nullptr;
      IVF_CUDA_CHECK(cudaStreamEndCapture(stream, &captured));
      graph = UniqueGraph(captured);
      if (arena_.overflowed()) {
        // Captured with aliased scratch: grow to what it asked and capture again.
        if (arena_.needed() > kMaxArena) return false;
        moved = arena_.reserve(ctx, arena_.needed(), stream);
        continue;
      }
      cudaGraphExec_t exec = nullptr;
      IVF_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.get(), 0));
      g.exec = UniqueGraphExec(exec);
      return true;
    } catch (const Error& e) {
      // Not capturable here (or out of memory for the arena): the direct path serves the
      // shape, and reports any error that is really the request's.
      (void)cudaGetLastError();
      if (e.code() == Errc::DeviceLost) throw;
      return false;
    }
  }
  return false;
}

bool SmallBatchGraphs::run(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                           const SearchRequest& req, const SearchPlan& plan) {
  const int64_t n = req.n(), k = plan.k;
  const SmallGraphKey key{index.state_id, round_up_pow2(n), plan.nprobe, k, plan.qtype, req.memory};
  Graph& g = find(key);
  if (g.refused) return false;
  if (!g.exec) {
    if (++g.uses < 2) return false;  // the first use of a shape runs directly
    if (!capture(ctx, lease, index, req, plan, g)) {
      g.refused = true;
      return false;
    }
  }
  cudaStream_t stream = lease.stream();
  const std::size_t in_bytes = static_cast<std::size_t>(plan.dim) * element_size(plan.qtype) * n;
  const std::size_t result_count = static_cast<std::size_t>(n * k);
  if (req.memory == MemoryKind::Host) {
    std::memcpy(in_.data(), req.queries.data, in_bytes);
    IVF_CUDA_CHECK(cudaGraphLaunch(g.exec.get(), stream));
    IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::size_t ids_bytes = sizeof(int64_t) * static_cast<std::size_t>(key.rows * k);
    std::memcpy(req.ids, out_.data(), sizeof(int64_t) * result_count);
    std::memcpy(req.dists, out_.data() + ids_bytes, sizeof(float) * result_count);
  } else {
    IVF_CUDA_CHECK(cudaMemcpyAsync(g.queries, req.queries.data, in_bytes, cudaMemcpyDeviceToDevice, stream));
    IVF_CUDA_CHECK(cudaGraphLaunch(g.exec.get(), stream));
    IVF_CUDA_CHECK(
        cudaMemcpyAsync(req.ids, g.ids, sizeof(int64_t) * result_count, cudaMemcpyDeviceToDevice, stream));
    IVF_CUDA_CHECK(
        cudaMemcpyAsync(req.dists, g.dists, sizeof(float) * result_count, cudaMemcpyDeviceToDevice, stream));
    IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  ctx.count_graph_search();
  return true;
}

bool run_small_batch(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                     const SearchRequest& req, const SearchPlan& plan, bool& device_check) {
  const int64_t n = req.n();
  if (n < 1 || n > kSmallBatchMax || plan.k > kSmallBatchMaxK || plan.empty) return false;
  if (index.scanner != nullptr || req.filter != nullptr || !lease.own_stream()) return false;
  Worker& w = lease.worker();
  if (!w.graphs) w.graphs = std::make_shared<SmallBatchGraphs>();
  if (fused_takes(n, plan.nprobe) && w.graphs->fused().run(ctx, lease, index, req, plan, device_check)) return true;
  if (index.state_id == 0 || !graphs_enabled() || !ctx.pool_enabled()) return false;
  if (device_check) {  // the graph's kernels do not check: the separate check first
    reject_unusable_device_queries(ctx, lease.stream(), plan.metric, req.queries);
    device_check = false;
  }
  return w.graphs->run(ctx, lease, index, req, plan);
}

}  // namespace ivfgpu::cuda
