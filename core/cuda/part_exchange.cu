// The CUDA side of an index of several parts (part_exchange.hpp): queries staged on each part's
// device, results gathered on the first part's device and merged there by two small kernels.
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "../element_type.hpp"
#include "../errors.hpp"
#include "../part_exchange.hpp"
#include "check.hpp"
#include "cuda_backend.hpp"
#include "device_buffer.hpp"
#include "device_context.hpp"
#include "launch.cuh"
#include "search_stages.hpp"

namespace ivfgpu::cuda {

namespace {

// The gathered results of one split call stay under this (the parts' buffers are as large
// again, spread over their devices); a larger search runs as several calls.
constexpr std::size_t kGatherBytes = std::size_t{512} << 20;

// Entries of a part's top-k (best first, padding last) that rank before `d`: strictly better
// (ties = false) or better or equal (ties = true), among the first len.
__device__ int32_t rank_before(const float* part, int32_t len, float d, bool larger, bool ties) {
  int32_t lo = 0, hi = len;
  while (lo < hi) {
    const int32_t mid = (lo + hi) / 2;
    const float v = part[mid];
    const bool before = larger ? (ties ? v >= d : v > d) : (ties ? v <= d : v < d);
    if (before)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// Per query: each part's real entries (before its first -1 id) and the merged count.
__global__ void merge_lengths_kernel(const int64_t* ids, int64_t n, int64_t k, int32_t parts, int32_t* lens,
                                     int32_t* totals) {
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < n; q += int64_t{gridDim.x} * blockDim.x) {
    int64_t total = 0;
    for (int32_t p = 0; p < parts; ++p) {
      const int64_t* row = ids + (p * n + q) * k;
      int32_t lo = 0, hi = static_cast<int32_t>(k);
      while (lo < hi) {
        const int32_t mid = (lo + hi) / 2;
        if (row[mid] != -1)
          lo = mid + 1;
        else
          hi = mid;
      }
      lens[q * parts + p] = lo;
      total += lo;
    }
    totals[q] = static_cast<int32_t>(total < k ? total : k);
  }
}

// Every entry (part p, query q, rank r) finds its merged position by counting the entries of
// the other parts that come before it: better distances, and equal ones of lower parts. The
// positions of all real entries are distinct, so each output slot below the merged count is
// written exactly once; part 0's threads pad the slots past it.
__global__ void merge_parts_kernel(const int64_t* ids, const float* dists, const int32_t* lens, const int32_t* totals,
                                   int64_t n, int64_t k, int32_t parts, bool larger, float pad, int64_t* out_ids,
                                   float* out_dists) {
  const int64_t work = static_cast<int64_t>(parts) * n * k;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < work; i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t p = static_cast<int32_t>(i / (n * k));
    const int64_t q = (i / k) % n, r = i % k;
    if (p == 0 && r >= totals[q]) {
      out_ids[q * k + r] = -1;
      out_dists[q * k + r] = pad;
    }
    if (r >= lens[q * parts + p]) continue;
    const float d = dists[i];
    int64_t pos = r;
    for (int32_t o = 0; o < parts && pos < k; ++o)
      if (o != p) pos += rank_before(dists + (o * n + q) * k, lens[q * parts + o], d, larger, o < p);
    if (pos < k) {
      out_ids[q * k + pos] = ids[i];
      out_dists[q * k + pos] = d;
    }
  }
}

bool peer_access_disabled() {
  const char* env = std::getenv("IVFGPU_DISABLE_PEER_ACCESS");
  return env != nullptr && env[0] != '\0' && std::strcmp(env, "0") != 0;
}

class CudaPartExchange;

// Part p's staged queries and result buffers, on its device, for one call.
struct PartSlot {
  std::optional<DeviceContext::Lease> lease;
  DeviceBuffer<unsigned char> queries;
  DeviceBuffer<int64_t> ids;
  DeviceBuffer<float> dists;
  int64_t* ids_at = nullptr;  // where the part writes (its buffers, or the gather)
  float* dists_at = nullptr;

  // Results into buffers of its own (nk entries), ready before the part's stream uses them.
  void own_results(const DeviceContext& ctx, std::size_t nk) {
    ids = DeviceBuffer<int64_t>(ctx, nk, lease->stream());
    dists = DeviceBuffer<float>(ctx, nk, lease->stream());
    IVF_CUDA_CHECK(cudaStreamSynchronize(lease->stream()));
    ids_at = ids.data();
    dists_at = dists.data();
  }

  // Buffers freed on the lease's stream, then the worker back to its pool.
  void release() noexcept {
    queries.reset();
    ids.reset();
    dists.reset();
    lease.reset();
    ids_at = nullptr;
    dists_at = nullptr;
  }
};

class CudaPartExchange final : public PartExchange {
 public:
  explicit CudaPartExchange(std::vector<int> devices) : devices_(std::move(devices)) {
    for (int d : devices_)
      if (!contexts_.count(d)) contexts_[d] = std::make_unique<DeviceContext>(d);
    const int m = merging_device();
    const bool allowed = !peer_access_disabled();
    for (const auto& [d, ctx] : contexts_) {
      if (d == m) continue;
      direct_[d] = allowed && enable_peer(m, d) && enable_peer(d, m);
      if (direct_[d]) {
        contexts_[m]->share_scratch_with(d);
        ctx->share_scratch_with(m);
      }
      crosses_ = true;
      all_direct_ = all_direct_ && direct_[d];
    }
  }

  std::unique_ptr<ExchangeCall> split(const SearchRequest& req, bool larger) const override;
  std::unique_ptr<ExchangeCall> replica(const SearchRequest& block, std::size_t p) const override;

  void reject_unusable_queries(const SearchRequest& req, Metric metric) const override {
    const int m = merging_device();
    DeviceGuard g(m);
    DeviceContext::Lease lease(context(m), nullptr);
    reject_unusable_device_queries(context(m), lease.stream(), metric, req.queries);
  }

  int64_t block_rows(int64_t k) const override {
    const std::size_t per_query = devices_.size() * static_cast<std::size_t>(k) * (sizeof(int64_t) + sizeof(float));
    return static_cast<int64_t>(std::max<std::size_t>(1, kGatherBytes / per_query));
  }
  bool peer_copies() const override { return crosses_ && all_direct_; }
  std::size_t cached_bytes() const noexcept override {
    std::size_t b = 0;
    for (const auto& [d, ctx] : contexts_) b += ctx->pool_cached_bytes();
    return b;
  }
  void trim() noexcept override {
    for (const auto& [d, ctx] : contexts_) ctx->trim_pool();
  }

  int merging_device() const { return devices_.front(); }
  int device_of(std::size_t p) const { return devices_[p]; }
  const DeviceContext& context(int device) const { return *contexts_.at(device); }

  // bytes from src (on device `from`) to dst (on device `to`), after `stream`'s work (a stream
  // of `from`), finished when this returns. Copies between devices run on a stream of the
  // merging device: it can reach the caller's memory there and the exchange's pools elsewhere
  // (shared with it), whatever pool the caller's memory came from.
  void copy(void* dst, int to, const void* src, int from, std::size_t bytes, cudaStream_t stream) const {
    if (bytes == 0) return;
    if (from == to) {
      IVF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
      IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
      return;
    }
    IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int m = merging_device();
    if (direct_.at(from == m ? to : from)) {
      DeviceGuard g(m);
      DeviceContext::Lease lease(context(m), nullptr);
      IVF_CUDA_CHECK(cudaMemcpyPeerAsync(dst, to, src, from, bytes, lease.stream()));
      IVF_CUDA_CHECK(cudaStreamSynchronize(lease.stream()));
      return;
    }
    // Through host memory, each half on a stream of its own device.
    std::vector<unsigned char> host(bytes);
    for (const bool out : {true, false}) {
      DeviceGuard g(out ? from : to);
      DeviceContext::Lease lease(context(out ? from : to), nullptr);
      if (out)
        IVF_CUDA_CHECK(cudaMemcpyAsync(host.data(), src, bytes, cudaMemcpyDeviceToHost, lease.stream()));
      else
        IVF_CUDA_CHECK(cudaMemcpyAsync(dst, host.data(), bytes, cudaMemcpyHostToDevice, lease.stream()));
      IVF_CUDA_CHECK(cudaStreamSynchronize(lease.stream()));
    }
  }

  // Part p's queries of req on its device (the caller's own pointer when they already are),
  // on the slot's stream, finished when this returns.
  const void* stage_queries(const SearchRequest& req, std::size_t p, PartSlot& slot) const {
    const int d = device_of(p);
    const cudaStream_t s = slot.lease->stream();
    const std::size_t bytes =
        static_cast<std::size_t>(req.n()) * static_cast<std::size_t>(req.queries.dim) * element_size(req.queries.type);
    if (req.memory == MemoryKind::Device && d == merging_device()) return req.queries.data;
    slot.queries = DeviceBuffer<unsigned char>(context(d), bytes, s);
    if (req.memory == MemoryKind::Host) {
      IVF_CUDA_CHECK(cudaMemcpyAsync(slot.queries.data(), req.queries.data, bytes, cudaMemcpyHostToDevice, s));
      IVF_CUDA_CHECK(cudaStreamSynchronize(s));
    } else {
      copy(slot.queries.data(), d, req.queries.data, merging_device(), bytes, s);
    }
    return slot.queries.data();
  }

  static SearchRequest part_request(const SearchRequest& req, const void* queries, const PartSlot& slot) {
    SearchRequest r = req;
    r.queries.data = queries;
    r.queries.memory = MemoryKind::Device;
    r.memory = MemoryKind::Device;
    r.stream = nullptr;
    r.batch_window_us = 0;
    r.ids = slot.ids_at;
    r.dists = slot.dists_at;
    return r;
  }

 private:
  // Peer access from `from` to `to`, enabled once per process and pair (a second
  // cudaDeviceEnablePeerAccess reports an error that tools such as compute-sanitizer count).
  static bool enable_peer(int from, int to) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || !can) {
      (void)cudaGetLastError();
      return false;
    }
    static std::mutex mutex;
    static std::set<std::pair<int, int>> enabled;
    std::lock_guard<std::mutex> lock(mutex);
    if (enabled.count({from, to})) return true;
    DeviceGuard g(from);
    const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();  // by the caller
    else IVF_CUDA_CHECK(e);
    enabled.insert({from, to});
    return true;
  }

  std::vector<int> devices_;
  std::map<int, std::unique_ptr<DeviceContext>> contexts_;
  std::map<int, bool> direct_;  // device -> peer copies to and from the merging device
  bool crosses_ = false, all_direct_ = true;
};

class SplitCall final : public ExchangeCall {
 public:
  SplitCall(const CudaPartExchange& x, const SearchRequest& req, bool larger, std::size_t parts)
      : x_(x), req_(req), larger_(larger), slots_(parts) {
    const int m = x_.merging_device();
    DeviceGuard g(m);
    lease_.emplace(x_.context(m), nullptr);
    const std::size_t entries = parts * static_cast<std::size_t>(req.n() * req.k);
    ids_ = DeviceBuffer<int64_t>(x_.context(m), entries, lease_->stream());
    dists_ = DeviceBuffer<float>(x_.context(m), entries, lease_->stream());
    IVF_CUDA_CHECK(cudaStreamSynchronize(lease_->stream()));  // the parts' streams write into them
  }
  // Each buffer freed with its device current (a part that failed left its slot filled).
  ~SplitCall() override {
    for (std::size_t p = 0; p < slots_.size(); ++p) {
      DeviceGuard g(x_.device_of(p), DeviceGuard::Quiet{});
      slots_[p].release();
    }
    DeviceGuard g(x_.merging_device(), DeviceGuard::Quiet{});
    ids_.reset();
    dists_.reset();
    lease_.reset();
  }

  SearchRequest request(std::size_t p) override {
    const int d = x_.device_of(p);
    DeviceGuard g(d);
    PartSlot& slot = slots_[p];
    slot.lease.emplace(x_.context(d), nullptr);
    const void* queries = x_.stage_queries(req_, p, slot);
    const std::size_t nk = static_cast<std::size_t>(req_.n() * req_.k);
    if (d == x_.merging_device()) {  // straight into the gather
      slot.ids_at = ids_.data() + p * nk;
      slot.dists_at = dists_.data() + p * nk;
    } else {
      slot.own_results(x_.context(d), nk);
    }
    return CudaPartExchange::part_request(req_, queries, slot);
  }

  void collect(std::size_t p) override {
    const int d = x_.device_of(p), m = x_.merging_device();
    PartSlot& slot = slots_[p];
    const std::size_t nk = static_cast<std::size_t>(req_.n() * req_.k);
    DeviceGuard g(d);
    if (d != m) {
      x_.copy(ids_.data() + p * nk, m, slot.ids_at, d, nk * sizeof(int64_t), slot.lease->stream());
      x_.copy(dists_.data() + p * nk, m, slot.dists_at, d, nk * sizeof(float), slot.lease->stream());
    }
    slot.release();
  }

  void finish() override {
    const int m = x_.merging_device();
    DeviceGuard g(m);
    const DeviceContext& ctx = x_.context(m);
    const cudaStream_t s = lease_->stream();
    const int64_t n = req_.n(), k = req_.k;
    const auto parts = static_cast<int32_t>(slots_.size());
    DeviceBuffer<int32_t> lens(ctx, static_cast<std::size_t>(n) * slots_.size(), s), totals(ctx, n, s);
    const bool host = req_.memory == MemoryKind::Host;
    DeviceBuffer<int64_t> out_ids;
    DeviceBuffer<float> out_dists;
    if (host) {
      out_ids = DeviceBuffer<int64_t>(ctx, static_cast<std::size_t>(n * k), s);
      out_dists = DeviceBuffer<float>(ctx, static_cast<std::size_t>(n * k), s);
    }
    int64_t* oi = host ? out_ids.data() : req_.ids;
    float* od = host ? out_dists.data() : req_.dists;
    merge_lengths_kernel<<<grid_for(n), kDefaultThreads, 0, s>>>(ids_.data(), n, k, parts, lens.data(), totals.data());
    IVF_CUDA_CHECK_LAUNCH();
    const float pad = larger_ ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    merge_parts_kernel<<<grid_for(int64_t{parts} * n * k), kDefaultThreads, 0, s>>>(
        ids_.data(), dists_.data(), lens.data(), totals.data(), n, k, parts, larger_, pad, oi, od);
    IVF_CUDA_CHECK_LAUNCH();
    if (host) {
      IVF_CUDA_CHECK(cudaMemcpyAsync(req_.ids, oi, sizeof(int64_t) * n * k, cudaMemcpyDeviceToHost, s));
      IVF_CUDA_CHECK(cudaMemcpyAsync(req_.dists, od, sizeof(float) * n * k, cudaMemcpyDeviceToHost, s));
    }
    IVF_CUDA_CHECK(cudaStreamSynchronize(s));
  }

 private:
  const CudaPartExchange& x_;
  SearchRequest req_;
  bool larger_;
  std::optional<DeviceContext::Lease> lease_;  // on the merging device
  DeviceBuffer<int64_t> ids_;                  // parts x n x k, part by part
  DeviceBuffer<float> dists_;
  std::vector<PartSlot> slots_;
};

// One replica's block of a device-memory search: results go straight to the caller's memory
// when the replica shares its device, else through the replica's buffers.
class ReplicaCall final : public ExchangeCall {
 public:
  ReplicaCall(const CudaPartExchange& x, const SearchRequest& block, std::size_t p) : x_(x), req_(block), p_(p) {}
  ~ReplicaCall() override {
    DeviceGuard g(x_.device_of(p_), DeviceGuard::Quiet{});
    slot_.release();
  }

  SearchRequest request(std::size_t) override {
    const int d = x_.device_of(p_);
    DeviceGuard g(d);
    slot_.lease.emplace(x_.context(d), nullptr);
    const void* queries = x_.stage_queries(req_, p_, slot_);
    if (d == x_.merging_device()) {
      slot_.ids_at = req_.ids;
      slot_.dists_at = req_.dists;
    } else {
      const std::size_t nk = static_cast<std::size_t>(req_.n() * req_.k);
      slot_.own_results(x_.context(d), nk);
    }
    return CudaPartExchange::part_request(req_, queries, slot_);
  }

  void collect(std::size_t) override {
    const int d = x_.device_of(p_), m = x_.merging_device();
    DeviceGuard g(d);
    if (d != m) {
      const std::size_t nk = static_cast<std::size_t>(req_.n() * req_.k);
      x_.copy(req_.ids, m, slot_.ids_at, d, nk * sizeof(int64_t), slot_.lease->stream());
      x_.copy(req_.dists, m, slot_.dists_at, d, nk * sizeof(float), slot_.lease->stream());
    }
    slot_.release();
  }

  void finish() override {}

 private:
  const CudaPartExchange& x_;
  SearchRequest req_;
  std::size_t p_;
  PartSlot slot_;
};

std::unique_ptr<ExchangeCall> CudaPartExchange::split(const SearchRequest& req, bool larger) const {
  return std::make_unique<SplitCall>(*this, req, larger, devices_.size());
}

std::unique_ptr<ExchangeCall> CudaPartExchange::replica(const SearchRequest& block, std::size_t p) const {
  return std::make_unique<ReplicaCall>(*this, block, p);
}

}  // namespace

std::unique_ptr<PartExchange> make_part_exchange(std::vector<int> devices) {
  if (devices.empty()) fail(Errc::Internal, "a part exchange needs at least one part");
  return std::make_unique<CudaPartExchange>(std::move(devices));
}

}  // namespace ivfgpu::cuda
