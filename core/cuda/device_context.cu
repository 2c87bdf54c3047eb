#include "device_context.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "check.hpp"
#include "cublas_loader.hpp"
#include "cuda_backend.hpp"
#include "scratch_arena.hpp"
#include "small_batch.hpp"

namespace ivfgpu::cuda {

DeviceGuard::DeviceGuard(int device) {
  IVF_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) IVF_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::DeviceGuard(int device, Quiet) noexcept {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device) (void)cudaSetDevice(device);
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_ && previous_ >= 0) (void)cudaSetDevice(previous_);
}

DeviceContext::DeviceContext(int device, std::size_t pool_limit) : pool_limit_(pool_limit) {
  DeviceGuard guard(device);
  cudaDeviceProp prop{};
  IVF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  limits_.device = device;
  limits_.sm_count = prop.multiProcessorCount;
  limits_.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  limits_.major = prop.major;
  limits_.minor = prop.minor;
  limits_.total_memory = prop.totalGlobalMem;
  const char* env = std::getenv("IVFGPU_DISABLE_MEMPOOL");
  use_pool_ = !(env != nullptr && std::strcmp(env, "0") != 0 && env[0] != '\0');
  if (use_pool_) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    // 0: the driver's default (no cap); a limit past the device's memory caps nothing either
    // (and a pool larger than the device is refused by some drivers).
    props.maxSize = pool_limit < limits_.total_memory ? pool_limit : 0;
    IVF_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    // Scratch: keep freed blocks for the next search instead of returning them at every sync.
    // State: return them (threshold 0). Under a cap, one pool holds both: the cap covers all.
    uint64_t threshold = UINT64_MAX, none = 0;
    IVF_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
    if (pool_limit == 0) {
      IVF_CUDA_CHECK(cudaMemPoolCreate(&state_pool_, &props));
      IVF_CUDA_CHECK(cudaMemPoolSetAttribute(state_pool_, cudaMemPoolAttrReleaseThreshold, &none));
    } else {
      state_pool_ = pool_;
    }
    // Never let an allocation on one stream reuse a block whose free is still pending on another
    // by making the first stream wait for the second: that wait would chain a mutation (or one
    // search) behind unrelated searches still in flight, which the concurrency contract forbids.
    // Blocks are reused once their free has completed (opportunistic reuse) or along existing
    // event dependencies; otherwise the pool grows.
    int no = 0;
    IVF_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolReuseAllowInternalDependencies, &no));
    if (state_pool_ != pool_)
      IVF_CUDA_CHECK(cudaMemPoolSetAttribute(state_pool_, cudaMemPoolReuseAllowInternalDependencies, &no));
  }
}

DeviceContext::~DeviceContext() {
  // Tolerates a CUDA runtime that is shutting down: errors are ignored.
  int previous = -1;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(limits_.device);
  // Each worker's work is done before its stream goes. No device-wide synchronisation: another
  // thread may be capturing a search graph, and cudaDeviceSynchronize during a capture was
  // seen to crash inside the driver (CUDA 13.0, H100). A pool destroyed with frees still
  // pending releases its memory once they complete.
  for (auto& w : workers_) {
    (void)cudaStreamSynchronize(w->stream.get());
    if (w->workspace) {
      deallocate(w->workspace, w->stream.get());
      (void)cudaStreamSynchronize(w->stream.get());
    }
  }
  workers_.clear();  // RAII: handles and streams
  if (pool_) {
    if (state_pool_ != pool_) (void)cudaMemPoolDestroy(state_pool_);
    (void)cudaMemPoolDestroy(pool_);
  }
  (void)cudaGetLastError();  // what failed here must not be reported by this thread's next call
  if (previous >= 0) (void)cudaSetDevice(previous);
}

void DeviceContext::share_scratch_with(int peer) const {
  if (!use_pool_ || peer == limits_.device) return;  // cudaMalloc memory follows peer access
  cudaMemAccessDesc access{};
  access.location.type = cudaMemLocationTypeDevice;
  access.location.id = peer;
  access.flags = cudaMemAccessFlagsProtReadWrite;
  IVF_CUDA_CHECK(cudaMemPoolSetAccess(pool_, &access, 1));
}

void* DeviceContext::allocate(std::size_t bytes, cudaStream_t stream, MemoryUse use) const {
  if (bytes == 0) bytes = 1;
  if (ScratchArena* arena = active_arena(*this)) return arena->take(bytes);  // a graph capture
  void* p = nullptr;
  cudaMemPool_t pool = use == MemoryUse::State ? state_pool_ : pool_;
  cudaError_t e = use_pool_ ? cudaMallocFromPoolAsync(&p, bytes, pool, stream) : cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation && use_pool_) {
    (void)cudaGetLastError();
    // Blocks freed on other streams may still be held by the pools: give them back and retry.
    (void)cudaStreamSynchronize(stream);
    (void)cudaMemPoolTrimTo(pool_, 0);
    if (state_pool_ != pool_) (void)cudaMemPoolTrimTo(state_pool_, 0);
    e = cudaMallocFromPoolAsync(&p, bytes, pool, stream);
  }
  IVF_CUDA_CHECK(e);
  return p;
}

void DeviceContext::deallocate(void* p, cudaStream_t stream) const noexcept {
  if (p == nullptr) return;
  if (const ScratchArena* arena = active_arena(*this); arena != nullptr && arena->owns(p)) return;
  if (use_pool_)
    (void)cudaFreeAsync(p, stream);
  else
    (void)cudaFree(p);
}

Worker* DeviceContext::acquire() const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      Worker* w = free_.back();
      free_.pop_back();
      return w;
    }
  }
  auto w = std::make_unique<Worker>();
  w->stream = make_stream();
  w->blas = make_blas();  // a failure here releases the stream (RAII)
  // Exact fp32 GEMMs: no TF32 (coarse ranking must agree with the CPU reference).
  IVF_CUBLAS_CHECK(blas::set_math_mode(w->blas.get(), CUBLAS_PEDANTIC_MATH));
  IVF_CUBLAS_CHECK(blas::set_stream(w->blas.get(), w->stream.get()));
  if (pool_limit_ > 0 && use_pool_) {
    // Under a device budget cuBLAS must not allocate its own workspace (32 MiB per handle on
    // Hopper, outside the pool): a small one from the capped pool instead. Our GEMMs are plain
    // SGEMMs, which need little.
    void* ws = allocate(kBudgetedBlasWorkspace, w->stream.get(), MemoryUse::State);
    IVF_CUDA_CHECK(cudaStreamSynchronize(w->stream.get()));
    w->workspace = ws;
    IVF_CUBLAS_CHECK(blas::set_workspace(w->blas.get(), ws, kBudgetedBlasWorkspace));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  workers_.push_back(std::move(w));
  return workers_.back().get();
}

void DeviceContext::release(Worker* w) const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(w);
}

DeviceContext::Lease::Lease(const DeviceContext& ctx, cudaStream_t caller)
    : ctx_(ctx), worker_(ctx.acquire()), stream_(caller ? caller : worker_->stream.get()) {
  if (caller) {
    (void)blas::set_stream(worker_->blas.get(), caller);
    // cublasSetStream resets the workspace to cuBLAS's own: give ours back.
    if (worker_->workspace) (void)blas::set_workspace(worker_->blas.get(), worker_->workspace, kBudgetedBlasWorkspace);
  }
}

DeviceContext::Lease::~Lease() {
  if (stream_ != worker_->stream.get()) {
    (void)blas::set_stream(worker_->blas.get(), worker_->stream.get());
    if (worker_->workspace) (void)blas::set_workspace(worker_->blas.get(), worker_->workspace, kBudgetedBlasWorkspace);
  }
  ctx_.release(worker_);
}

std::size_t DeviceContext::pool_cached_bytes() const noexcept {
  if (!use_pool_) return 0;
  uint64_t reserved = 0, used = 0;
  if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved) != cudaSuccess ||
      cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &used) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return reserved > used ? static_cast<std::size_t>(reserved - used) : 0;
}

void DeviceContext::release_search_caches() const noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Worker* w : free_) {
    if (!w->graphs) continue;
    w->graphs->release_device_memory();  // frees on the worker's stream: wait, so the trim sees it
    (void)cudaStreamSynchronize(w->stream.get());
  }
}

void DeviceContext::trim_pool() const noexcept {
  if (use_pool_) {
    // A pool releases a block only once it has seen its free complete: frees queued on a
    // worker's stream after that stream's last synchronisation (a search's scratch) are
    // observed here first.
    std::vector<cudaStream_t> streams;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& w : workers_) streams.push_back(w->stream.get());
    }
    for (cudaStream_t s : streams) (void)cudaStreamSynchronize(s);
    (void)cudaMemPoolTrimTo(pool_, 0);
    if (state_pool_ != pool_) (void)cudaMemPoolTrimTo(state_pool_, 0);
  }
}

std::size_t DeviceContext::pool_reserved_bytes() const noexcept {
  if (!use_pool_) return 0;
  uint64_t total = 0;
  for (cudaMemPool_t p : {pool_, state_pool_}) {
    uint64_t reserved = 0;
    if (cudaMemPoolGetAttribute(p, cudaMemPoolAttrReservedMemCurrent, &reserved) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    total += reserved;
    if (state_pool_ == pool_) break;
  }
  return static_cast<std::size_t>(total);
}

int DeviceContext::blocks_per_sm(const void* kernel, int threads, std::size_t smem) const {
  const auto key = std::make_pair(kernel, std::make_pair(threads, smem));
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto it = occupancy_.find(key);
  if (it != occupancy_.end()) return it->second;
  int per_sm = 0;
  IVF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  occupancy_[key] = per_sm;
  return per_sm;
}

void DeviceContext::opt_in_shared_memory(const void* kernel, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  std::size_t& done = smem_opt_in_[kernel];
  if (done >= bytes) return;
  IVF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done = bytes;
}

void wait_for_stream(void* stream) { IVF_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream))); }

}  // namespace ivfgpu::cuda
