#include "progress_wait.hpp"

#include <chrono>
#include <thread>

#include "../progress.hpp"
#include "check.hpp"
#include "cuda_handles.hpp"

namespace ivfgpu::cuda {

namespace {
// Between two polls of an unfinished event. Only calls with a callback poll, so this is the
// most it adds to their latency; the callback itself is called no more often than its interval.
constexpr auto kPollSleep = std::chrono::microseconds(200);
}  // namespace

void wait_reporting(cudaEvent_t event) {
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) IVF_CUDA_CHECK(e);
    progress::poll();
    std::this_thread::sleep_for(kPollSleep);
  }
}

void wait_reporting(cudaStream_t stream, bool always) {
  if (!progress::active()) {
    if (always) IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  const UniqueEvent done = make_event();
  IVF_CUDA_CHECK(cudaEventRecord(done.get(), stream));
  wait_reporting(done.get());
}

}  // namespace ivfgpu::cuda
