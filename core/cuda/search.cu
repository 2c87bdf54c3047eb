#include "search.hpp"

#include "search_stages.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "../element_convert.hpp"
#include "../errors.hpp"
#include "../progress.hpp"
#include "assign.hpp"
#include "candidates.cuh"
#include "check.hpp"
#include "cuda_handles.hpp"
#include "device_buffer.hpp"
#include "element_rows.hpp"
#include "launch.cuh"
#include "progress_wait.hpp"
#include "query_upload.hpp"
#include "rows.hpp"
#include "scan.hpp"
#include "select.hpp"
#include "small_batch.hpp"

namespace ivfgpu::cuda {

namespace {

// Coarse score rows of one chunk: at most this many floats (256 MiB).
constexpr int64_t kCoarseBudget = int64_t{1} << 26;
// Final top-k scratch (positions + keys) of one chunk: at most this many entries.
constexpr int64_t kResultBudget = int64_t{1} << 26;

// A synchronous device-memory batch of at most this many results (rows x k) a chunk checks its
// queries without a synchronisation (DeferredCheck); a larger one keeps the separate check, as its
// results would need as much scratch again.
constexpr int64_t kDeferredCheckResults = int64_t{1} << 22;

// A deferred check's results reach the caller's buffers only when no query failed it.
__global__ void publish_checked_kernel(const unsigned long long* verdict, const int64_t* ids, const float* dists,
                                       int64_t n, int64_t* out_ids, float* out_dists) {
  if (*verdict != ~0ull) return;
  for (int64_t e = global_thread(); e < n; e += thread_stride()) {
    out_ids[e] = ids[e];
    out_dists[e] = dists[e];
  }
}

// Stage D's last step: candidate positions -> ids, padding past the count.
__global__ void finalize_kernel(const int32_t* sel_pos, const float* sel_key, const int32_t* count, int64_t nq,
                                int64_t k, CandidateRows cand, const int32_t* probes, const int64_t* list_start,
                                const int64_t* ids, const int64_t* const* list_ids, float pad, int64_t* out_ids,
                                float* out_dists) {
  const int64_t total = nq * k;
  for (int64_t e = global_thread(); e < total; e += thread_stride()) {
    const int64_t q = e / k, j = e % k;
    // Past the candidates, or a row the scan excluded (its key is the padding value).
    if (j >= count[q] || sel_key[e] == pad) {
      out_ids[e] = -1;
      out_dists[e] = pad;
      continue;
    }
    int64_t probe, row;
    cand.locate(q, sel_pos[e], probe, row);
    const int64_t list = probes[q * cand.nprobe + probe];
    out_ids[e] = list_ids != nullptr ? list_ids[list][row] : ids[list_start[list] + row];
    out_dists[e] = sel_key[e];
  }
}

__global__ void pad_kernel(int64_t total, float pad, int64_t* out_ids, float* out_dists) {
  for (int64_t e = global_thread(); e < total; e += thread_stride()) {
    out_ids[e] = -1;
    out_dists[e] = pad;
  }
}

}  // namespace

SearchPlan plan_search(const SearchIndexView& index, const SearchRequest& req) {
  SearchPlan p;
  p.dim = index.dim;
  p.nlist = index.nlist;
  p.k = req.k;
  p.nprobe = req.nprobe;
  p.metric = index.metric;
  p.larger = larger_is_better(index.metric);
  p.pad = p.larger ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  // Queries of a compact type are decoded to f32 on the device (element_rows.hpp); integer
  // queries against integer rows keep integer arithmetic in the scan.
  p.qtype = req.queries.type;
  p.decode = p.qtype != ElementType::F32;
  p.normalize = index.metric == Metric::Cosine;
  p.empty = index.lists.ntotal == 0;
  // The longest candidate row any query can have: the nprobe largest lists together.
  p.bound = index.lists.largest_prefix[p.nprobe];
  if (p.bound >= (int64_t{1} << 31))
    fail(Errc::Unsupported, "search: a query's probed lists hold 2^31 or more vectors; lower nprobe");
  // The host tier's scanner streams segments into candidate rows: never pruned.
  p.pruned = !p.empty && index.scanner == nullptr && scan_is_pruned(req.n(), p.nprobe, p.nlist, p.dim, p.k);
  p.scan_words = p.pruned ? pruned_scan_words_per_query(index.lists.largest_prefix, p.nprobe, p.k, p.dim) : p.bound;
  return p;
}

int64_t initial_chunk(const DeviceContext& ctx, const SearchIndexView& index, const SearchPlan& p, int64_t n) {
  // bound: the scan's words per query (candidate rows, or the pruned pass's scratch).
  const int64_t bound = p.scan_words, nlist = p.nlist, k = p.k, nprobe = p.nprobe, dim = p.dim;
  // Candidate rows of a chunk: up to 1/16 of the device's memory, at most 4 GiB (1G floats),
  // so that big batches keep many queries per list tile.
  const int64_t cand_budget = std::max<int64_t>(
      int64_t{1} << 24, std::min<int64_t>(int64_t{1} << 30, static_cast<int64_t>(ctx.limits().total_memory / 64)));
  int64_t chunk = std::max<int64_t>(n, 1);
  // A budgeted index sizes its chunks from its scratch share below instead.
  if (bound > 0 && index.scratch_budget == 0) chunk = std::min(chunk, std::max<int64_t>(1, cand_budget / bound));
  chunk = std::min(chunk, std::max<int64_t>(1, kCoarseBudget / nlist));
  chunk = std::min(chunk, std::max<int64_t>(1, kResultBudget / k));
  chunk = std::min(chunk, std::max<int64_t>(1, (int64_t{1} << 30) / nprobe));
  if (index.scratch_budget > 0) {
    // A budgeted index: everything one query's chunk rows take, with room for the selection's
    // temporaries (the pool's cap catches an underestimate: the chunk halves and retries).
    const int64_t per_query = 4 * (2 * dim + nlist + bound + 3 * nprobe + 4 * k) + 8 * (nprobe + 2 + k) + 64;
    chunk = std::min(chunk, std::max<int64_t>(1, static_cast<int64_t>(index.scratch_budget) * 4 / (5 * per_query)));
  }
  return chunk;
}

ChunkScratch::ChunkScratch(const DeviceContext& ctx, const SearchPlan& p, int64_t rows, cudaStream_t stream) {
  const auto n = [](int64_t v) { return static_cast<std::size_t>(std::max<int64_t>(1, v)); };
  if (p.decode || p.normalize) q_buf = DeviceBuffer<float>(ctx, n(rows * p.dim), stream);
  if (p.empty) return;
  coarse = DeviceBuffer<float>(ctx, n(rows * p.nlist), stream);
  probes = DeviceBuffer<int32_t>(ctx, n(rows * p.nprobe), stream);
  probe_count = DeviceBuffer<int32_t>(ctx, n(rows), stream);
  cand_off = DeviceBuffer<int64_t>(ctx, n(rows * (p.nprobe + 1)), stream);
  cand_len = DeviceBuffer<int64_t>(ctx, n(rows), stream);
  if (!p.pruned) cand = DeviceBuffer<float>(ctx, n(rows * p.bound), stream);
  sel_pos = DeviceBuffer<int32_t>(ctx, n(rows * p.k), stream);
  sel_key = DeviceBuffer<float>(ctx, n(rows * p.k), stream);
  sel_count = DeviceBuffer<int32_t>(ctx, n(rows), stream);
}

void enqueue_coarse(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                    const SearchPlan& plan, ChunkScratch& s, const void* raw, int64_t first, int64_t rows) {
  if (plan.empty || rows == 0) return;
  cudaStream_t stream = lease.stream();
  const int64_t nlist = plan.nlist, nprobe = plan.nprobe, dim = plan.dim;
  const std::size_t row_in = static_cast<std::size_t>(dim) * element_size(plan.qtype);
  const void* in = static_cast<const unsigned char*>(raw) + row_in * static_cast<std::size_t>(first);
  const float* queries = static_cast<const float*>(in);
  float* converted = s.q_buf.data() + first * dim;
  if (plan.decode) {
    decode_rows_on_device(stream, plan.qtype, in, rows, dim, converted);
    queries = converted;
  }
  if (plan.normalize) {
    normalize_rows(stream, queries, rows, dim, converted);
    queries = converted;
  }
  // A: coarse scores (smaller is better), B: the nprobe best lists, best first.
  float* coarse = s.coarse.data() + first * nlist;
  coarse_gemm(lease.blas(), queries, rows, index.centroids, nlist, dim, plan.metric, coarse);
  SelectInput cin;
  cin.keys = coarse;
  cin.stride = nlist;
  cin.fixed_len = nlist;
  cin.max_len = nlist;
  cin.addend = plan.metric == Metric::L2 ? index.centroid_norms : nullptr;
  select_topk(ctx, stream, cin, rows, nprobe, false,
              SelectOutput{s.probes.data() + first * nprobe, nullptr, s.probe_count.data() + first});
}

void enqueue_scan(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                  const SearchRequest& req, const SearchPlan& plan, ChunkScratch& s, const void* raw, int64_t rows,
                  int64_t* out_ids, float* out_dists) {
  cudaStream_t stream = lease.stream();
  const int64_t k = plan.k, nprobe = plan.nprobe;
  if (plan.empty) {
    pad_kernel<<<grid_for(rows * k), kDefaultThreads, 0, stream>>>(rows * k, plan.pad, out_ids, out_dists);
    IVF_CUDA_CHECK_LAUNCH();
    return;
  }
  const ListView& lists = index.lists;
  // The coarse stage left decoded or normalised queries in q_buf.
  const float* queries = plan.decode || plan.normalize ? s.q_buf.data() : static_cast<const float*>(raw);
  // C: exact distances to every vector of the probed lists.
  ScanProblem sp;
  sp.queries = queries;
  sp.nq = rows;
  sp.nprobe = nprobe;
  sp.probes = s.probes.data();
  sp.lists = lists;
  sp.metric = plan.metric;
  sp.cand = CandidateRows{s.cand.data(), plan.bound, s.cand_off.data(), s.cand_len.data(), nprobe};
  sp.excluded = plan.pad;
  sp.integer_queries = is_integer(plan.qtype) && plan.qtype == lists.type;
  sp.storage_queries = plan.qtype == lists.type && !plan.normalize;
  sp.k = k;
  sp.centroids = index.centroids;
  if (req.filter != nullptr && index.filter_set != nullptr) {
    sp.filter = req.filter->allow() ? ScanProblem::Filter::Allow : ScanProblem::Filter::Deny;
    sp.filter_set = *index.filter_set;
  }
  ScanOutcome scanned;
  if (index.scanner != nullptr)
    index.scanner->scan(ctx, stream, sp);
  else
    scanned = scan_lists(ctx, stream, sp);
  // D: the k best candidates of each query, then their ids. A pruned tensor-core pass settles
  // its own short lists. A tensor-core scan's keys are bounds: the first top-k tells which
  // rows to re-score exactly, the second is the answer.
  if (scanned.pruned) {
    settle_pruned(ctx, stream, sp, scanned, index.list_ids, out_ids, out_dists);
    return;
  }
  SelectInput din;
  din.keys = s.cand.data();
  din.stride = plan.bound;
  din.lens = s.cand_len.data();
  din.max_len = plan.bound;
  const SelectOutput dout{s.sel_pos.data(), s.sel_key.data(), s.sel_count.data()};
  select_topk(ctx, stream, din, rows, k, plan.larger, dout);
  if (scanned.needs_refine) {
    refine_candidates(ctx, stream, sp, scanned, s.sel_key.data(), s.sel_count.data(), k);
    select_topk(ctx, stream, din, rows, k, plan.larger, dout);
  }
  finalize_kernel<<<grid_for(rows * k), kDefaultThreads, 0, stream>>>(
      s.sel_pos.data(), s.sel_key.data(), s.sel_count.data(), rows, k, sp.cand, s.probes.data(), lists.start,
      lists.ids, index.list_ids, plan.pad, out_ids, out_dists);
  IVF_CUDA_CHECK_LAUNCH();
}

void enqueue_chunk(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                   const SearchRequest& req, const SearchPlan& plan, ChunkScratch& s, const void* raw, int64_t rows,
                   int64_t* out_ids, float* out_dists) {
  enqueue_coarse(ctx, lease, index, plan, s, raw, 0, rows);
  enqueue_scan(ctx, lease, index, req, plan, s, raw, rows, out_ids, out_dists);
}

namespace {

// A batch's device-memory queries checked while it runs, instead of before with a
// synchronisation (the separate check cost each such call a round trip to the host with the
// GPU idle): the check is queued first, the chunks write their results to scratch, and
// publish_checked_kernel copies each chunk's to the caller's buffers only if no query failed;
// the verdict comes back with the call's one synchronisation (raise_if_refused). So a refused
// call still writes nothing.
class DeferredCheck {
 public:
  DeferredCheck(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchPlan& plan,
                const MatrixView& q)
      : first_(ctx, 1, lease.stream()), host_(&lease.worker().verdict) {
    const cudaStream_t stream = lease.stream();
    (void)host_->reserve(sizeof(unsigned long long));
    IVF_CUDA_CHECK(cudaMemsetAsync(first_.data(), 0xff, sizeof(unsigned long long), stream));
    enqueue_first_unusable_row(stream, q.type, q.data, q.rows, q.dim, plan.metric != Metric::Cosine, first_.data());
    IVF_CUDA_CHECK(cudaMemcpyAsync(host_->data(), first_.data(), sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                                   stream));
  }
  // n results of a chunk from scratch to the caller's device buffers, if the check passed.
  void publish(cudaStream_t stream, const int64_t* ids, const float* dists, int64_t n, int64_t* out_ids,
               float* out_dists) const {
    publish_checked_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(first_.data(), ids, dists, n, out_ids,
                                                                        out_dists);
    IVF_CUDA_CHECK_LAUNCH();
  }
  // After the call's stream has been waited for: the check's refusal, if any.
  void raise_if_refused() const {
    unsigned long long key = 0;
    std::memcpy(&key, host_->data(), sizeof key);
    bool non_finite = false;
    const int64_t row = unusable_row_of(key, &non_finite);
    if (row >= 0) fail_unusable_row("search: query", row, non_finite);
  }

 private:
  DeviceBuffer<unsigned long long> first_;
  PinnedBuffer* host_;
};

// One chunk of host queries at `host` (plan.qtype): they cross into `staged` (device) in the
// pieces upload_pieces picks, each piece's coarse stage enqueued behind its copy, then the scan
// of the whole chunk, whose results land in ids / dists (device).
void enqueue_host_chunk(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                        const SearchRequest& req, const SearchPlan& plan, ChunkScratch& s, const void* host,
                        void* staged, int64_t rows, int64_t* ids, float* dists) {
  const std::size_t row_in = static_cast<std::size_t>(plan.dim) * element_size(plan.qtype);
  const std::size_t bytes = row_in * static_cast<std::size_t>(rows);
  const int pieces =
      plan.empty ? 1
                 : upload_pieces({bytes, rows, plan.nlist, ctx.limits().sm_count, page_locked(host, bytes)});
  if (pieces == 1) {
    IVF_CUDA_CHECK(cudaMemcpyAsync(staged, host, bytes, cudaMemcpyHostToDevice, lease.stream()));
    enqueue_chunk(ctx, lease, index, req, plan, s, staged, rows, ids, dists);
    return;
  }
  QueryUpload upload(lease.worker(), lease.stream());
  for (int p = 0; p < pieces; ++p) {
    const int64_t first = rows * p / pieces, last = rows * (p + 1) / pieces;
    const std::size_t offset = row_in * static_cast<std::size_t>(first);
    upload.piece(static_cast<unsigned char*>(staged) + offset, static_cast<const unsigned char*>(host) + offset,
                 row_in * static_cast<std::size_t>(last - first));
    enqueue_coarse(ctx, lease, index, plan, s, staged, first, last - first);
  }
  enqueue_scan(ctx, lease, index, req, plan, s, staged, rows, ids, dists);
}

// Rows [q0, q0 + rows) of a call: device memory straight through; host memory through the
// staging buffers and back. A call whose host queries are still to be checked (check_pending)
// is checked while its first chunk runs, before any result is copied out, so that a refused
// call writes no output.
void enqueue_search_chunk(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                          const SearchRequest& req, const SearchPlan& plan, ChunkScratch& scratch,
                          DeviceBuffer<unsigned char>& q_in, DeviceBuffer<int64_t>& ids_out,
                          DeviceBuffer<float>& dists_out, bool& check_pending, const DeferredCheck* deferred,
                          int64_t q0, int64_t rows) {
  const int64_t k = plan.k;
  const std::size_t row_in = static_cast<std::size_t>(plan.dim) * element_size(plan.qtype);
  const auto* raw = static_cast<const unsigned char*>(req.queries.data) + row_in * static_cast<std::size_t>(q0);
  if (req.memory != MemoryKind::Host) {
    if (deferred == nullptr) {
      enqueue_chunk(ctx, lease, index, req, plan, scratch, raw, rows, req.ids + q0 * k, req.dists + q0 * k);
      return;
    }
    enqueue_chunk(ctx, lease, index, req, plan, scratch, raw, rows, ids_out.data(), dists_out.data());
    deferred->publish(lease.stream(), ids_out.data(), dists_out.data(), rows * k, req.ids + q0 * k, req.dists + q0 * k);
    return;
  }
  enqueue_host_chunk(ctx, lease, index, req, plan, scratch, raw, q_in.data(), rows, ids_out.data(), dists_out.data());
  if (check_pending) {
    check_pending = false;  // the caller waits for the queued chunk if this throws
    reject_unusable_rows(req.queries, plan.metric, "search: query");
  }
  const cudaStream_t stream = lease.stream();
  IVF_CUDA_CHECK(cudaMemcpyAsync(req.ids + q0 * k, ids_out.data(), sizeof(int64_t) * rows * k,
                                 cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaMemcpyAsync(req.dists + q0 * k, dists_out.data(), sizeof(float) * rows * k,
                                 cudaMemcpyDeviceToHost, stream));
}

}  // namespace

// Device-memory queries get the check Index::search gives host queries (NaN or Inf; under L2
// and inner product the norm bound), on the device and before any work, so a refused call
// writes nothing: one small kernel and a synchronisation (a large batch defers it instead:
// DeferredCheck). Integer queries need none.
void reject_unusable_device_queries(const DeviceContext& ctx, cudaStream_t stream, Metric metric,
                                    const MatrixView& q) {
  if (is_integer(q.type)) return;
  bool non_finite = false;
  const int64_t row = first_unusable_row(ctx, stream, q.type, q.data, q.rows, q.dim, metric != Metric::Cosine,
                                         &non_finite);
  if (row >= 0) fail_unusable_row("search: query", row, non_finite);
}

bool run_search_checks_queries_late(const SearchRequest& req) {
  return req.memory == MemoryKind::Host && req.n() > kSmallBatchMax;
}

void run_search(const DeviceContext& ctx, const SearchIndexView& index, const SearchRequest& req) {
  const SearchPlan plan = plan_search(index, req);
  const int64_t n = req.n(), k = plan.k;
  const bool host = req.memory == MemoryKind::Host;
  // The caller's request is one run_search_checks_queries_late accepts, or its check is done.
  bool check_pending = req.check_queries;
  if (check_pending && !run_search_checks_queries_late(req)) {
    reject_unusable_rows(req.queries, plan.metric, "search: query");
    check_pending = false;
  }

  // The caller's worker when it holds one (a budgeted search: one cuBLAS handle per search).
  std::optional<DeviceContext::Lease> own;
  if (index.lease == nullptr) own.emplace(ctx, static_cast<cudaStream_t>(req.stream));
  const DeviceContext::Lease& lease = index.lease != nullptr ? *index.lease : *own;
  cudaStream_t stream = lease.stream();

  // Device-memory queries are checked on the device (integer ones need no check). An
  // asynchronous call cannot wait for a check: its caller vouches for its queries (ivfgpu.h).
  // A sharded search that checked them whole first (device_queries_checked) is not checked again.
  bool device_check = req.memory == MemoryKind::Device && !req.asynchronous() && !is_integer(req.queries.type) &&
                      !req.device_queries_checked;

  // A handful of queries: the fused kernels or one graph launch (small_batch.hpp), when the
  // request is one for them; the fused kernels check device queries themselves.
  if (run_small_batch(ctx, lease, index, req, plan, device_check)) return;

  // Scratch for one chunk, reused by every chunk. Out of memory (e.g. many large searches at
  // once) halves the chunk and tries again; only a single query that cannot fit fails.
  //
  // Host memory: each chunk's queries and results are copied straight from and to the
  // caller's memory (pinned or pageable; the driver tells). A call is never cut into more
  // chunks than its scratch needs: each chunk reads every probed list again (at nprobe 1,
  // 10,000 host queries in 4 chunks took 3.07-3.40 ms on the H100 against 2.72 ms in one), and
  // pieces of the whole search on a second stream cost the GPU as much as the copy time they
  // hide (bench/RESULTS.md, "Large host batches cut into pieces"). Only the coarse stage
  // follows the queries in pieces (enqueue_host_chunk).
  int64_t chunk = initial_chunk(ctx, index, plan, n);
  // A synchronous call returns only after its queued work: an exception past this point (a
  // cancel from the progress callback, a failed check, a CUDA error) waits for what is queued
  // before it leaves, so nothing is written to the caller's buffers after the call returns.
  // An asynchronous call's work belongs to the caller's stream (ivfgpu.h).
  const bool synchronous = host || lease.own_stream();
  // Device-memory queries are checked while the batch runs where its results fit scratch
  // (DeferredCheck), else before it.
  std::optional<DeferredCheck> deferred;
  if (device_check && synchronous && chunk * k <= kDeferredCheckResults)
    deferred.emplace(ctx, lease, plan, req.queries);
  else if (device_check)
    reject_unusable_device_queries(ctx, stream, plan.metric, req.queries);
  const std::size_t row_in = static_cast<std::size_t>(plan.dim) * element_size(plan.qtype);
  ChunkScratch scratch;
  DeviceBuffer<unsigned char> q_in;
  DeviceBuffer<int64_t> ids_out;
  DeviceBuffer<float> dists_out;
  for (;;) {
    try {
      scratch = ChunkScratch(ctx, plan, chunk, stream);
      if (host) q_in = DeviceBuffer<unsigned char>(ctx, row_in * static_cast<std::size_t>(chunk), stream);
      if (host || deferred) {  // the results, before they are copied out (or published)
        ids_out = DeviceBuffer<int64_t>(ctx, static_cast<std::size_t>(chunk * k), stream);
        dists_out = DeviceBuffer<float>(ctx, static_cast<std::size_t>(chunk * k), stream);
      }
      break;
    } catch (const Error& e) {
      if (e.code() != Errc::OutOfDeviceMemory || chunk == 1) throw;
      chunk = (chunk + 1) / 2;
    }
  }
  // With a progress callback a synchronous call queues its chunks at most two ahead of the
  // GPU: the fraction then counts finished queries, and a cancel stops the queueing within a
  // chunk or two. An asynchronous call only queues: its fraction counts queued queries.
  const bool reporting = synchronous && progress::active();
  UniqueEvent chunk_done[2];
  if (reporting)
    for (UniqueEvent& e : chunk_done) e = make_event();
  try {
    for (int64_t q0 = 0, c = 0; q0 < n; q0 += chunk, ++c) {
      if (reporting && c >= 2) wait_reporting(chunk_done[c % 2].get());  // chunk c - 2 is done
      const int64_t done = reporting ? std::max<int64_t>(0, q0 - chunk) : q0;
      progress::set(static_cast<double>(done) / static_cast<double>(n));
      enqueue_search_chunk(ctx, lease, index, req, plan, scratch, q_in, ids_out, dists_out, check_pending,
                           deferred ? &*deferred : nullptr, q0, std::min(chunk, n - q0));
      if (reporting) IVF_CUDA_CHECK(cudaEventRecord(chunk_done[c % 2].get(), stream));
    }
    if (synchronous) wait_reporting(stream, /*always=*/true);
    if (deferred) deferred->raise_if_refused();
  } catch (...) {
    if (synchronous) (void)cudaStreamSynchronize(stream);
    throw;
  }
}

}  // namespace ivfgpu::cuda
