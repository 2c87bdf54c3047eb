// ivf_params: keyed setters with bounds, so options grow without new symbols.
#include <cstdint>
#include <limits>
#include <new>
#include <string>

#include "guard.hpp"
#include "handles.hpp"

using namespace ivfgpu;
using namespace ivfgpu::capi;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool bounds_of(ivf_param_key key, int64_t& lo, int64_t& hi) {
  switch (key) {
    case IVF_PARAM_NLIST: lo = 1; hi = int64_t{1} << 30; return true;
    case IVF_PARAM_METRIC: lo = IVF_METRIC_L2; hi = IVF_METRIC_COSINE; return true;
    case IVF_PARAM_BACKEND: lo = IVF_BACKEND_AUTO; hi = IVF_BACKEND_CUDA; return true;
    case IVF_PARAM_DEVICE: lo = 0; hi = 1023; return true;
    case IVF_PARAM_KMEANS_ITERS: lo = 0; hi = 1000000; return true;
    case IVF_PARAM_MAX_POINTS_PER_CENTROID: lo = 1; hi = int64_t{1} << 40; return true;
    case IVF_PARAM_SEED: lo = 0; hi = kMax; return true;
    case IVF_PARAM_NUM_THREADS: lo = 0; hi = 4096; return true;
    case IVF_PARAM_NPROBE: lo = 1; hi = kMax; return true;
    case IVF_PARAM_MEMORY_KIND: lo = IVF_MEMORY_HOST; hi = IVF_MEMORY_DEVICE; return true;
    default: return false;
  }
}

int64_t* int_field(ivf_params& p, ivf_param_key key) {
  switch (key) {
    case IVF_PARAM_NLIST: return &p.build.nlist;
    case IVF_PARAM_DEVICE: return &p.build.device;
    case IVF_PARAM_KMEANS_ITERS: return &p.build.kmeans_iters;
    case IVF_PARAM_MAX_POINTS_PER_CENTROID: return &p.build.max_points_per_centroid;
    case IVF_PARAM_SEED: return &p.build.seed;
    case IVF_PARAM_NUM_THREADS: return &p.build.num_threads;
    case IVF_PARAM_NPROBE: return &p.build.nprobe;
    default: return nullptr;
  }
}

void unknown_key(ivf_param_key key) {
  fail(Errc::Unsupported, "unknown or non-integer parameter key " + std::to_string(key));
}

}  // namespace

extern "C" {

IVF_API ivf_status ivf_params_create(ivf_params** out) {
  return guarded([&] {
    if (out == nullptr) invalid("ivf_params_create: out is NULL");
    *out = new ivf_params();
  });
}

IVF_API void ivf_params_free(ivf_params* params) { delete params; }

IVF_API ivf_status ivf_param_bounds(ivf_param_key key, int64_t* min_value, int64_t* max_value) {
  return guarded([&] {
    if (min_value == nullptr || max_value == nullptr) invalid("ivf_param_bounds: NULL output");
    int64_t lo, hi;
    if (!bounds_of(key, lo, hi)) unknown_key(key);
    *min_value = lo;
    *max_value = hi;
  });
}

IVF_API ivf_status ivf_params_set_int(ivf_params* params, ivf_param_key key, int64_t value) {
  return guarded([&] {
    if (params == nullptr) invalid("ivf_params_set_int: params is NULL");
    int64_t lo, hi;
    if (!bounds_of(key, lo, hi)) unknown_key(key);
    if (value < lo || value > hi)
      invalid("parameter " + std::to_string(key) + ": value " + std::to_string(value) +
              " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    switch (key) {
      case IVF_PARAM_METRIC: params->build.metric = static_cast<Metric>(value); break;
      case IVF_PARAM_BACKEND: params->build.backend = static_cast<BackendKind>(value); break;
      case IVF_PARAM_MEMORY_KIND: params->memory = static_cast<MemoryKind>(value); break;
      default: *int_field(*params, key) = value;
    }
    if (key == IVF_PARAM_NPROBE) params->nprobe_set = true;
  });
}

IVF_API ivf_status ivf_params_get_int(const ivf_params* params, ivf_param_key key, int64_t* value) {
  return guarded([&] {
    if (params == nullptr || value == nullptr) invalid("ivf_params_get_int: NULL argument");
    int64_t lo, hi;
    if (!bounds_of(key, lo, hi)) unknown_key(key);
    switch (key) {
      case IVF_PARAM_METRIC: *value = static_cast<int64_t>(params->build.metric); break;
      case IVF_PARAM_BACKEND: *value = static_cast<int64_t>(params->build.backend); break;
      case IVF_PARAM_MEMORY_KIND: *value = static_cast<int64_t>(params->memory); break;
      default: *value = *int_field(const_cast<ivf_params&>(*params), key);
    }
  });
}

IVF_API ivf_status ivf_params_set_ptr(ivf_params* params, ivf_param_key key, void* value) {
  return guarded([&] {
    if (params == nullptr) invalid("ivf_params_set_ptr: params is NULL");
    if (key != IVF_PARAM_CUDA_STREAM)
      fail(Errc::Unsupported, "parameter " + std::to_string(key) + " is not a pointer key");
    params->stream = value;
  });
}

}  // extern "C"

namespace ivfgpu::capi {
BuildParams build_params_of(const ivf_params* params) {
  return params == nullptr ? BuildParams{} : params->build;
}
}  // namespace ivfgpu::capi
