// Waiting for a stream's queued work while a progress callback is set (progress.hpp): the
// calling thread polls an event and reports between polls instead of blocking in the driver,
// so a long GPU step still calls the callback about every 50 ms and a cancel is seen during it.
#pragma once

#include <cuda_runtime.h>

namespace ivfgpu::cuda {

// Returns once everything queued on `stream` so far has finished. With a callback active on
// this thread it polls (reporting the call's current fraction, which may throw Errc::Cancelled
// with the work still queued: the caller decides what must wait for it); without one it
// does nothing unless `always` is set, in which case it synchronises as cudaStreamSynchronize.
void wait_reporting(cudaStream_t stream, bool always = false);

// The same for one recorded event.
void wait_reporting(cudaEvent_t event);

}  // namespace ivfgpu::cuda
