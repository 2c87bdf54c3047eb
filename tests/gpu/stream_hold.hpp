// Holding a caller's stream back in tests, on the GPU: a one-thread kernel that spins until a
// flag in mapped host memory is set (or a time limit passes), as a stream waiting on device
// work would. (A blocking host function, cudaLaunchHostFunc, holds the driver's own host
// thread too: CUDA may serialise host functions with its other host-side work.)
#pragma once

#include <cuda_runtime.h>

namespace ivftest {

// Enqueues the hold on `stream`; it ends when *flag != 0 or after `seconds`. `flag` must be
// mapped pinned memory (cudaHostAlloc with cudaHostAllocMapped).
cudaError_t hold_stream_on_device(cudaStream_t stream, volatile int* flag, double seconds);

}  // namespace ivftest
