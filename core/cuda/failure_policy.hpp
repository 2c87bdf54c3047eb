// The CUDA backends' failure policy, in one place: a call runs with the index's device
// current; the first sticky error (Errc::DeviceLost) marks the backend lost, and every later
// call fails at once with DeviceLost. Other errors (out of memory, a non-sticky CUDA error)
// leave the index usable and, since nothing was published, unchanged.
#pragma once

#include <atomic>

#include "../errors.hpp"
#include "device_context.hpp"

namespace ivfgpu::cuda {

class FailurePolicy {
 public:
  template <typename F>
  auto run(int device, F&& f) const -> decltype(f()) {
    if (lost_.load()) fail(Errc::DeviceLost, "the CUDA device of this index was lost after an earlier error");
    try {
      DeviceGuard guard(device);
      return f();
    } catch (const Error& e) {
      if (e.code() == Errc::DeviceLost) lost_.store(true);
      throw;
    }
  }

 private:
  mutable std::atomic<bool> lost_{false};
};

}  // namespace ivfgpu::cuda
