// The C boundary: the thread-local error message and the one guard every entry point runs
// its body in, so that no exception ever crosses into C, Rust, Go or a plugin host.
#pragma once

#include <new>
#include <string>

#include "../../core/errors.hpp"
#include "ivfgpu/ivfgpu.h"

namespace ivfgpu::capi {

// Record a failure for ivf_last_error_message and return its status.
ivf_status set_error(ivf_status status, const std::string& message) noexcept;
void clear_error() noexcept;
const char* last_error_message() noexcept;
ivf_status to_status(Errc code) noexcept;

// Thrown by argument checks inside a guarded body.
[[noreturn]] inline void invalid(const std::string& message) { fail(Errc::InvalidArgument, message); }

template <class Body>
ivf_status guarded(Body&& body) noexcept {
  try {
    body();
    clear_error();
    return IVF_OK;
  } catch (const Error& e) {
    return set_error(to_status(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return set_error(IVF_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return set_error(IVF_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return set_error(IVF_ERR_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace ivfgpu::capi
