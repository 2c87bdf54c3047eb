// The one place that decides which backend an index runs on.
#include <string>

#include "backend.hpp"
#include "cpu/cpu_backend.hpp"
#include "errors.hpp"

#ifdef IVFGPU_HAVE_CUDA
#include "cuda/cuda_backend.hpp"
#endif

namespace ivfgpu {

int cuda_device_count() {
#ifdef IVFGPU_HAVE_CUDA
  return cuda::usable_device_count();
#else
  return 0;
#endif
}

void wait_for_stream(void* stream) {
#ifdef IVFGPU_HAVE_CUDA
  cuda::wait_for_stream(stream);
#else
  (void)stream;
  fail(Errc::InvalidArgument, "a CUDA stream was given but the library was built without CUDA");
#endif
}

std::unique_ptr<Backend> make_backend(int64_t dim, const BuildParams& params) {
  const bool want_cuda = params.backend == BackendKind::Cuda;
  if (params.backend == BackendKind::Cpu) return cpu::make_cpu_backend(dim, params);
  std::string why = "the library was built without CUDA";
#ifdef IVFGPU_HAVE_CUDA
  const int devices = cuda::usable_device_count(&why);
#else
  const int devices = 0;
#endif
  if (params.device >= devices) {
    if (want_cuda)
      fail(Errc::Unsupported, devices == 0 ? "CUDA backend requested but unusable: " + why
                                           : "CUDA device " + std::to_string(params.device) +
                                                 " does not exist (" + std::to_string(devices) + " usable)");
    return cpu::make_cpu_backend(dim, params);
  }
#ifdef IVFGPU_HAVE_CUDA
  return cuda::make_cuda_backend(dim, params);
#else
  return cpu::make_cpu_backend(dim, params);
#endif
}

}  // namespace ivfgpu
