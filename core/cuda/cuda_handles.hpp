// RAII owners of CUDA streams, events, graphs and cuBLAS handles. Destructors never throw and tolerate
// a CUDA runtime that is shutting down (errors are ignored).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <utility>

#include "check.hpp"
#include "cublas_loader.hpp"

namespace ivfgpu::cuda {

template <class Handle, class Traits>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  explicit UniqueHandle(Handle h) : h_(h) {}
  ~UniqueHandle() { reset(); }
  UniqueHandle(UniqueHandle&& o) noexcept : h_(std::exchange(o.h_, Handle{})) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, Handle{});
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;

  Handle get() const { return h_; }
  explicit operator bool() const { return h_ != Handle{}; }
  void reset() noexcept {
    if (h_ != Handle{}) Traits::destroy(h_);
    h_ = Handle{};
  }

 private:
  Handle h_{};
};

struct StreamTraits {
  static void destroy(cudaStream_t s) noexcept { (void)cudaStreamDestroy(s); }
};
struct EventTraits {
  static void destroy(cudaEvent_t e) noexcept { (void)cudaEventDestroy(e); }
};
struct GraphTraits {
  static void destroy(cudaGraph_t g) noexcept { (void)cudaGraphDestroy(g); }
};
struct GraphExecTraits {
  static void destroy(cudaGraphExec_t g) noexcept { (void)cudaGraphExecDestroy(g); }
};
struct BlasTraits {
  static void destroy(cublasHandle_t h) noexcept { (void)blas::destroy(h); }
};

using UniqueStream = UniqueHandle<cudaStream_t, StreamTraits>;
using UniqueEvent = UniqueHandle<cudaEvent_t, EventTraits>;
using UniqueBlas = UniqueHandle<cublasHandle_t, BlasTraits>;
using UniqueGraph = UniqueHandle<cudaGraph_t, GraphTraits>;
using UniqueGraphExec = UniqueHandle<cudaGraphExec_t, GraphExecTraits>;

inline UniqueStream make_stream() {
  cudaStream_t s = nullptr;
  IVF_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return UniqueStream(s);
}

// A stream whose blocks the scheduler prefers to those of default-priority streams: mutations
// run on one, so their short kernels are not queued behind a load of searches.
inline UniqueStream make_priority_stream() {
  int least = 0, greatest = 0;
  IVF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s = nullptr;
  IVF_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  return UniqueStream(s);
}

// Timing off: the event only orders work and tells when it is done.
inline UniqueEvent make_event() {
  cudaEvent_t e = nullptr;
  IVF_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return UniqueEvent(e);
}

inline UniqueBlas make_blas() {
  cublasHandle_t h = nullptr;
  IVF_CUBLAS_CHECK(blas::create(&h));
  return UniqueBlas(h);
}

}  // namespace ivfgpu::cuda
