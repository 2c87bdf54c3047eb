#include "search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "../errors.hpp"
#include "../progress.hpp"
#include "assign.hpp"
#include "candidates.cuh"
#include "check.hpp"
#include "device_buffer.hpp"
#include "element_rows.hpp"
#include "launch.cuh"
#include "rows.hpp"
#include "scan.hpp"
#include "select.hpp"

namespace ivfgpu::cuda {

namespace {

// Coarse score rows of one chunk: at most this many floats (256 MiB).
constexpr int64_t kCoarseBudget = int64_t{1} << 26;
// Final top-k scratch (positions + keys) of one chunk: at most this many entries.
constexpr int64_t kResultBudget = int64_t{1} << 26;

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

void run_search(const DeviceContext& ctx, const SearchIndexView& index, const SearchRequest& req) {
  const DeviceLimits& limits = ctx.limits();
  const int64_t dim = index.dim, nlist = index.nlist, k = req.k, nprobe = req.nprobe, n = req.n();
  const bool larger = larger_is_better(index.metric);
  const float pad = larger ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const ListView& lists = index.lists;
  const bool host = req.memory == MemoryKind::Host;
  const bool normalize = index.metric == Metric::Cosine;
  // Queries of a compact type are decoded to f32 on the device (element_rows.hpp); integer
  // queries against integer rows keep integer arithmetic in the scan.
  const ElementType qtype = req.queries.type;
  const bool decode = qtype != ElementType::F32;
  const std::size_t q_elem = element_size(qtype);

  // The caller's worker when it holds one (a budgeted search: one cuBLAS handle per search).
  std::optional<DeviceContext::Lease> own;
  if (index.lease == nullptr) own.emplace(ctx, static_cast<cudaStream_t>(req.stream));
  const DeviceContext::Lease& lease = index.lease != nullptr ? *index.lease : *own;
  cudaStream_t stream = lease.stream();

  // The longest candidate row any query can have: the nprobe largest lists together.
  const int64_t bound = lists.largest_prefix[nprobe];
  if (bound >= (int64_t{1} << 31))
    fail(Errc::Unsupported, "search: a query's probed lists hold 2^31 or more vectors; lower nprobe");
  // Candidate rows of a chunk: up to 1/16 of the device's memory, at most 4 GiB (1G floats),
  // so that big batches keep many queries per list tile.
  const int64_t cand_budget = std::max<int64_t>(
      int64_t{1} << 24, std::min<int64_t>(int64_t{1} << 30, static_cast<int64_t>(limits.total_memory / 64)));
  int64_t chunk = n;
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

  // Scratch for one chunk, reused by every chunk. Out of memory (e.g. many large searches at
  // once) halves the chunk and tries again; only a single query that cannot fit fails.
  const bool stage_queries = host || normalize || decode;
  DeviceBuffer<unsigned char> q_raw;  // host queries of a compact type, before decoding
  DeviceBuffer<float> q_buf, coarse, cand, sel_key;
  DeviceBuffer<int64_t> out_ids_buf, cand_off, cand_len;
  DeviceBuffer<float> out_dists_buf;
  DeviceBuffer<int32_t> probes, probe_count, sel_pos, sel_count;
  for (;;) {
    try {
      if (stage_queries) q_buf = DeviceBuffer<float>(ctx, static_cast<std::size_t>(chunk * dim), stream);
      if (decode && host) q_raw = DeviceBuffer<unsigned char>(ctx, static_cast<std::size_t>(chunk * dim) * q_elem, stream);
      if (host) {
        out_ids_buf = DeviceBuffer<int64_t>(ctx, static_cast<std::size_t>(chunk * k), stream);
        out_dists_buf = DeviceBuffer<float>(ctx, static_cast<std::size_t>(chunk * k), stream);
      }
      if (lists.ntotal > 0) {
        coarse = DeviceBuffer<float>(ctx, static_cast<std::size_t>(chunk * nlist), stream);
        probes = DeviceBuffer<int32_t>(ctx, static_cast<std::size_t>(chunk * nprobe), stream);
        probe_count = DeviceBuffer<int32_t>(ctx, static_cast<std::size_t>(chunk), stream);
        cand_off = DeviceBuffer<int64_t>(ctx, static_cast<std::size_t>(chunk * (nprobe + 1)), stream);
        cand_len = DeviceBuffer<int64_t>(ctx, static_cast<std::size_t>(chunk), stream);
        cand = DeviceBuffer<float>(ctx, static_cast<std::size_t>(std::max<int64_t>(1, chunk * bound)), stream);
        sel_pos = DeviceBuffer<int32_t>(ctx, static_cast<std::size_t>(chunk * k), stream);
        sel_key = DeviceBuffer<float>(ctx, static_cast<std::size_t>(chunk * k), stream);
        sel_count = DeviceBuffer<int32_t>(ctx, static_cast<std::size_t>(chunk), stream);
      }
      break;
    } catch (const Error& e) {
      if (e.code() != Errc::OutOfDeviceMemory || chunk == 1) throw;
      chunk = (chunk + 1) / 2;
    }
  }
  if (lists.ntotal == 0) {
    for (int64_t q0 = 0; q0 < n; q0 += chunk) {
      const int64_t rows = std::min(chunk, n - q0);
      int64_t* oi = host ? out_ids_buf.data() : req.ids + q0 * k;
      float* od = host ? out_dists_buf.data() : req.dists + q0 * k;
      pad_kernel<<<grid_for(rows * k), kDefaultThreads, 0, stream>>>(rows * k, pad, oi, od);
      IVF_CUDA_CHECK_LAUNCH();
      if (host) {
        IVF_CUDA_CHECK(cudaMemcpyAsync(req.ids + q0 * k, oi, sizeof(int64_t) * rows * k, cudaMemcpyDeviceToHost, stream));
        IVF_CUDA_CHECK(cudaMemcpyAsync(req.dists + q0 * k, od, sizeof(float) * rows * k, cudaMemcpyDeviceToHost, stream));
      }
    }
    if (host || lease.own_stream()) IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }

  for (int64_t q0 = 0; q0 < n; q0 += chunk) {
    progress::set(static_cast<double>(q0) / static_cast<double>(n));
    const int64_t rows = std::min(chunk, n - q0);
    const float* queries = nullptr;
    const auto* raw = static_cast<const unsigned char*>(req.queries.data) + static_cast<std::size_t>(q0 * dim) * q_elem;
    if (decode) {
      if (host) {
        IVF_CUDA_CHECK(cudaMemcpyAsync(q_raw.data(), raw, q_elem * rows * dim, cudaMemcpyHostToDevice, stream));
        raw = q_raw.data();
      }
      decode_rows_on_device(stream, qtype, raw, rows, dim, q_buf.data());
      queries = q_buf.data();
    } else if (host) {
      IVF_CUDA_CHECK(cudaMemcpyAsync(q_buf.data(), raw, sizeof(float) * rows * dim, cudaMemcpyHostToDevice, stream));
      queries = q_buf.data();
    } else {
      queries = reinterpret_cast<const float*>(raw);
    }
    if (normalize) {
      normalize_rows(stream, queries, rows, dim, q_buf.data());
      queries = q_buf.data();
    }
    // A: coarse scores (smaller is better), B: the nprobe best lists, best first.
    coarse_gemm(lease.blas(), queries, rows, index.centroids, nlist, dim, index.metric, coarse.data());
    SelectInput cin;
    cin.keys = coarse.data();
    cin.stride = nlist;
    cin.fixed_len = nlist;
    cin.max_len = nlist;
    cin.addend = index.metric == Metric::L2 ? index.centroid_norms : nullptr;
    select_topk(ctx, stream, cin, rows, nprobe, false, SelectOutput{probes.data(), nullptr, probe_count.data()});
    // C: exact distances to every vector of the probed lists.
    ScanProblem sp;
    sp.queries = queries;
    sp.nq = rows;
    sp.nprobe = nprobe;
    sp.probes = probes.data();
    sp.lists = lists;
    sp.metric = index.metric;
    sp.cand = CandidateRows{cand.data(), bound, cand_off.data(), cand_len.data(), nprobe};
    sp.excluded = pad;
    sp.integer_queries = is_integer(qtype) && qtype == lists.type;
    sp.k = k;
    if (req.filter != nullptr && index.filter_set != nullptr) {
      sp.filter = req.filter->allow() ? ScanProblem::Filter::Allow : ScanProblem::Filter::Deny;
      sp.filter_set = *index.filter_set;
    }
    ScanOutcome scanned;
    if (index.scanner != nullptr)
      index.scanner->scan(ctx, stream, sp);
    else
      scanned = scan_lists(ctx, stream, sp);
    // D: the k best candidates of each query, then their ids. A tensor-core scan's keys are
    // bounds: the first top-k tells which rows to re-score exactly, the second is the answer.
    SelectInput din;
    din.keys = cand.data();
    din.stride = bound;
    din.lens = cand_len.data();
    din.max_len = bound;
    const SelectOutput dout{sel_pos.data(), sel_key.data(), sel_count.data()};
    select_topk(ctx, stream, din, rows, k, larger, dout);
    if (scanned.needs_refine) {
      refine_candidates(ctx, stream, sp, scanned, sel_key.data(), sel_count.data(), k);
      select_topk(ctx, stream, din, rows, k, larger, dout);
    }
    int64_t* oi = host ? out_ids_buf.data() : req.ids + q0 * k;
    float* od = host ? out_dists_buf.data() : req.dists + q0 * k;
    finalize_kernel<<<grid_for(rows * k), kDefaultThreads, 0, stream>>>(
        sel_pos.data(), sel_key.data(), sel_count.data(), rows, k, sp.cand, probes.data(), lists.start, lists.ids,
        index.list_ids, pad, oi, od);
    IVF_CUDA_CHECK_LAUNCH();
    if (host) {
      IVF_CUDA_CHECK(cudaMemcpyAsync(req.ids + q0 * k, oi, sizeof(int64_t) * rows * k, cudaMemcpyDeviceToHost, stream));
      IVF_CUDA_CHECK(cudaMemcpyAsync(req.dists + q0 * k, od, sizeof(float) * rows * k, cudaMemcpyDeviceToHost, stream));
    }
  }
  if (host || lease.own_stream()) IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ivfgpu::cuda
