// Per-backend device resources: the device's real limits, a stream-ordered memory pool, a pool
// of (stream, cuBLAS handle) pairs so that many host threads can search at once, and the
// per-device answers dispatch asks once (occupancy, opted-in shared memory).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "admission_gate.hpp"
#include "cuda_handles.hpp"
#include "pinned_buffer.hpp"

namespace ivfgpu::cuda {

// What dispatch reads: one copy per backend, filled once from cudaGetDeviceProperties.
struct DeviceLimits {
  int device = 0;
  int sm_count = 1;
  std::size_t smem_per_block_optin = 48 * 1024;  // bytes a block may use after opting in
  std::size_t total_memory = 0;
  int major = 0;  // compute capability (9: Hopper, whose kernels may launch before their predecessor ends)
  int minor = 0;
};

// Makes `device` current for the calling thread and restores the previous one on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  // Never throws (for destructors): a device that cannot be made current is left as it was.
  struct Quiet {};
  DeviceGuard(int device, Quiet) noexcept;
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// What an allocation is for. Scratch (a call's temporaries) comes from a pool that keeps freed
// blocks for the next call; State (what a published state holds: lists, centroids, id map)
// from a pool that returns freed memory to the driver, so a smaller index or a reset really
// gives memory back and the scratch pool's chunks are never pinned by long-lived arrays.
enum class MemoryUse { Scratch, State };

class SmallBatchGraphs;  // small_batch.hpp

// A stream and its cuBLAS handle, checked out of the pool for one call.
struct Worker {
  UniqueStream stream;
  UniqueBlas blas;
  void* workspace = nullptr;  // capped contexts: cuBLAS's workspace, from the pool
  // Large host batches' queries cross on this stream, beside the search (query_upload.hpp);
  // made by the first search that needs them.
  UniqueStream upload_stream;
  UniqueEvent upload_event;
  // What small-batch searches keep on this worker between calls: the fused kernels' arena and
  // staging, and the captured graphs with theirs (small_batch.hpp); made by the first search
  // that needs them. A worker serves one call at a
  // time, so they need no lock. Destroyed first, while the stream and pool still live.
  std::shared_ptr<SmallBatchGraphs> graphs;
  // A batch's deferred query check (search.cu) leaves its verdict here: page-locked, so the copy
  // that brings it back is queued without waiting; read after the call's synchronisation.
  PinnedBuffer verdict;
};

// cuBLAS workspace per worker of a context with a pool limit (a device budget).
constexpr std::size_t kBudgetedBlasWorkspace = std::size_t{4} << 20;

class DeviceContext {
 public:
  // pool_limit > 0 (an index with a device budget): one pool for scratch and state whose size
  // the driver caps at pool_limit bytes, so nothing the index allocates through this context
  // can pass it (an allocation beyond it fails as out of memory).
  explicit DeviceContext(int device, std::size_t pool_limit = 0);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceLimits& limits() const { return limits_; }
  int device() const { return limits_.device; }

  // Stream-ordered allocation from this backend's pool (or plain cudaMalloc when the pool is
  // disabled with IVFGPU_DISABLE_MEMPOOL=1, e.g. under compute-sanitizer). On failure the pool
  // is trimmed and the allocation retried once; then Errc::OutOfDeviceMemory.
  void* allocate(std::size_t bytes, cudaStream_t stream, MemoryUse use = MemoryUse::Scratch) const;
  void deallocate(void* p, cudaStream_t stream) const noexcept;
  // Pool blocks kept for reuse (reserved but not in use), and giving them back to the driver.
  std::size_t pool_cached_bytes() const noexcept;
  // Pool bytes held from the driver (in use or cached); 0 without a pool.
  std::size_t pool_reserved_bytes() const noexcept;
  // Waits for the workers' streams (their queued frees), then gives cached blocks back.
  void trim_pool() const noexcept;
  bool pool_enabled() const noexcept { return use_pool_; }
  // Lets `peer` (a device with peer access to this one enabled) read and write this context's
  // scratch pool, so copies between them go device to device (a sharded index's merge).
  void share_scratch_with(int peer) const;
  // Drops the graphs and scratch arenas idle workers keep for searches (not their pinned
  // staging: see SmallBatchGraphs::release_device_memory); a worker serving a call keeps its own.
  void release_search_caches() const noexcept;

  // Resident blocks per SM of `kernel` at `threads` per block and `smem` dynamic bytes, asked
  // once per (kernel, threads, smem) for this device.
  int blocks_per_sm(const void* kernel, int threads, std::size_t smem) const;
  // Opts `kernel` in to `bytes` of dynamic shared memory once (cudaFuncSetAttribute is not
  // safe to race with launches of the same kernel from other threads).
  void opt_in_shared_memory(const void* kernel, std::size_t bytes) const;

  // Searches answered by one replay of a captured graph (small_batch.hpp), for IVF_INFO.
  void count_graph_search() const noexcept { graph_searches_.fetch_add(1, std::memory_order_relaxed); }
  int64_t graph_searches() const noexcept { return graph_searches_.load(std::memory_order_relaxed); }
  // Searches answered by the fused small-batch kernels (fused_search.hpp), for IVF_INFO.
  void count_fused_search() const noexcept { fused_searches_.fetch_add(1, std::memory_order_relaxed); }
  int64_t fused_searches() const noexcept { return fused_searches_.load(std::memory_order_relaxed); }
  // Entered by each fused small search for its launches and synchronisation (admission_gate.hpp).
  AdmissionGate& small_search_gate() const noexcept { return small_search_gate_; }

  // A worker for one call; `caller` (may be null) replaces the worker's own stream.
  class Lease {
   public:
    Lease(const DeviceContext& ctx, cudaStream_t caller);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    cudaStream_t stream() const { return stream_; }
    cublasHandle_t blas() const { return worker_->blas.get(); }
    bool own_stream() const { return stream_ == worker_->stream.get(); }
    Worker& worker() const { return *worker_; }

   private:
    const DeviceContext& ctx_;
    Worker* worker_;
    cudaStream_t stream_;
  };

 private:
  Worker* acquire() const;
  void release(Worker* w) const noexcept;

  DeviceLimits limits_;
  cudaMemPool_t pool_ = nullptr;        // scratch
  cudaMemPool_t state_pool_ = nullptr;  // state
  bool use_pool_ = true;
  std::size_t pool_limit_ = 0;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Worker>> workers_;
  mutable std::vector<Worker*> free_;
  mutable std::mutex cache_mutex_;
  mutable std::map<std::pair<const void*, std::pair<int, std::size_t>>, int> occupancy_;
  mutable std::map<const void*, std::size_t> smem_opt_in_;
  mutable std::atomic<int64_t> graph_searches_{0};
  mutable std::atomic<int64_t> fused_searches_{0};
  mutable AdmissionGate small_search_gate_;
};

}  // namespace ivfgpu::cuda
