// ivf_host_alloc, ivf_host_free, ivf_host_register, ivf_host_unregister: callers' query and
// result buffers in page-locked memory (core/host_buffers.hpp).
#include "../../core/host_buffers.hpp"
#include "guard.hpp"

using ivfgpu::capi::guarded;
using ivfgpu::capi::invalid;

extern "C" {

IVF_API ivf_status ivf_host_alloc(size_t bytes, void** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    if (out == nullptr) invalid("ivf_host_alloc: out is NULL");
    *out = ivfgpu::host_alloc(bytes);
  });
}

IVF_API ivf_status ivf_host_free(void* p) {
  return guarded([&] { ivfgpu::host_free(p); });
}

IVF_API ivf_status ivf_host_register(void* p, size_t bytes) {
  return guarded([&] { ivfgpu::host_register(p, bytes); });
}

IVF_API ivf_status ivf_host_unregister(void* p) {
  return guarded([&] { ivfgpu::host_unregister(p); });
}

}  // extern "C"
