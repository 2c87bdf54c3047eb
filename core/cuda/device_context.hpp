// Per-backend device resources: the device's real limits, a stream-ordered memory pool, and a
// pool of (stream, cuBLAS handle) pairs so that many host threads can search at once.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace ivfgpu::cuda {

// What dispatch reads: one copy per backend, filled once from cudaGetDeviceProperties.
struct DeviceLimits {
  int device = 0;
  int sm_count = 1;
  std::size_t smem_per_block_optin = 48 * 1024;  // bytes a block may use after opting in
  std::size_t total_memory = 0;
};

// Makes `device` current for the calling thread and restores the previous one on exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// A stream and its cuBLAS handle, checked out of the pool for one call.
struct Worker {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
};

class DeviceContext {
 public:
  explicit DeviceContext(int device);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceLimits& limits() const { return limits_; }
  int device() const { return limits_.device; }

  // Stream-ordered allocation from this backend's pool (or plain cudaMalloc when the pool is
  // disabled with IVFGPU_DISABLE_MEMPOOL=1, e.g. under compute-sanitizer). On failure the pool
  // is trimmed and the allocation retried once; then Errc::OutOfDeviceMemory.
  void* allocate(std::size_t bytes, cudaStream_t stream) const;
  void deallocate(void* p, cudaStream_t stream) const noexcept;

  // A worker for one call; `caller` (may be null) replaces the worker's own stream.
  class Lease {
   public:
    Lease(const DeviceContext& ctx, cudaStream_t caller);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    cudaStream_t stream() const { return stream_; }
    cublasHandle_t blas() const { return worker_->blas; }
    bool own_stream() const { return stream_ == worker_->stream; }

   private:
    const DeviceContext& ctx_;
    Worker* worker_;
    cudaStream_t stream_;
  };

 private:
  Worker* acquire() const;
  void release(Worker* w) const noexcept;

  DeviceLimits limits_;
  cudaMemPool_t pool_ = nullptr;
  bool use_pool_ = true;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Worker>> workers_;
  mutable std::vector<Worker*> free_;
};

}  // namespace ivfgpu::cuda
