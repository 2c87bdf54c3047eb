// The one place that decides which backend an index runs on.
#include <algorithm>
#include <string>
#include <vector>

#include "backend.hpp"
#include "cpu/cpu_backend.hpp"
#include "cpu/parallel.hpp"
#include "element_type.hpp"
#include "errors.hpp"
#include "sharded_backend.hpp"

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

namespace {
std::unique_ptr<Backend> make_one(int64_t dim, const BuildParams& params);
}  // namespace

// Several parts: one backend each, on the devices IVF_PARAM_SHARD_DEVICE(part) names, else on
// device, device + 1, ... (wrapping around the usable devices, so two parts may share one), or
// all on the CPU: with AUTO, a part whose device does not exist puts every part on the CPU
// (an index never mixes kinds); with CUDA it fails.
std::unique_ptr<Backend> make_backend(int64_t dim, const BuildParams& params) {
  const auto storage = static_cast<ElementType>(params.storage);
  if (is_integer(storage) && params.metric == Metric::Cosine)
    fail(Errc::Unsupported, std::string("cosine needs a floating storage type (f32, f16, bf16): ") + element_name(storage) +
                                " rows cannot be unit-normalised");
  if (params.shards <= 1) {
    BuildParams p = params;
    if (!p.shard_devices.empty() && p.shard_devices[0] >= 0) p.device = p.shard_devices[0];
    return make_one(dim, p);
  }
  const int devices = params.backend == BackendKind::Cpu ? 0 : cuda_device_count();
  std::vector<int> part_devices;
  bool all_exist = true;
  for (int64_t s = 0; s < params.shards; ++s) {
    const bool named = s < static_cast<int64_t>(params.shard_devices.size()) && params.shard_devices[s] >= 0;
    int64_t d = named ? params.shard_devices[s] : params.device;
    if (!named && devices > 0 && params.device < devices) d = (params.device + s) % devices;
    all_exist = all_exist && d < devices;
    part_devices.push_back(static_cast<int>(d));
  }
  std::vector<std::unique_ptr<Backend>> parts;
  for (int64_t s = 0; s < params.shards; ++s) {
    BuildParams p = params;
    p.shards = 1;
    p.shard_devices.clear();
    p.device = part_devices[s];
    if (!all_exist && params.backend == BackendKind::Auto) p.backend = BackendKind::Cpu;
    if (params.num_threads == 0) p.num_threads = std::max<int64_t>(1, resolve_threads(0) / params.shards);
    parts.push_back(make_one(dim, p));
  }
  std::unique_ptr<PartExchange> exchange;
#ifdef IVFGPU_HAVE_CUDA
  if (parts.front()->kind() == BackendKind::Cuda) exchange = cuda::make_part_exchange(std::move(part_devices));
#endif
  return make_sharded_backend(dim, params, std::move(parts), std::move(exchange));
}

namespace {

std::unique_ptr<Backend> make_one(int64_t dim, const BuildParams& params) {
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

}  // namespace

}  // namespace ivfgpu
