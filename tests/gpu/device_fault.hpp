// A sticky fault on the current CUDA device, caused by the test itself: a kernel that writes
// to an address no allocation holds. Every later CUDA call in the process then fails.
#pragma once

#include <cuda_runtime.h>

namespace ivftest {

// Launches the faulting kernel and waits for it; returns what the wait reported (an illegal
// address error where the fault took).
cudaError_t fault_the_device();

}  // namespace ivftest
