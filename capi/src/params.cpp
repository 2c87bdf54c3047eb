// ivf_params: keyed setters with bounds, so options grow without new symbols. Each key is
// described once in kKeys: its name (for messages), its bounds and where its value lives.
#include <cstdint>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "../../core/limits.hpp"
#include "guard.hpp"
#include "handles.hpp"

using namespace ivfgpu;
using namespace ivfgpu::capi;

namespace {

struct KeySpec {
  ivf_param_key key;
  const char* name;
  int64_t lo, hi;
};

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

constexpr KeySpec kKeys[] = {
    {IVF_PARAM_NLIST, "IVF_PARAM_NLIST", 1, limits::kMaxNlist},
    {IVF_PARAM_METRIC, "IVF_PARAM_METRIC", IVF_METRIC_L2, IVF_METRIC_COSINE},
    {IVF_PARAM_BACKEND, "IVF_PARAM_BACKEND", IVF_BACKEND_AUTO, IVF_BACKEND_CUDA},
    {IVF_PARAM_DEVICE, "IVF_PARAM_DEVICE", 0, limits::kMaxDevice},
    {IVF_PARAM_KMEANS_ITERS, "IVF_PARAM_KMEANS_ITERS", 0, limits::kMaxKmeansIters},
    {IVF_PARAM_MAX_POINTS_PER_CENTROID, "IVF_PARAM_MAX_POINTS_PER_CENTROID", 1, limits::kMaxPointsPerCentroid},
    {IVF_PARAM_SEED, "IVF_PARAM_SEED", 0, kMax},
    {IVF_PARAM_NUM_THREADS, "IVF_PARAM_NUM_THREADS", 0, limits::kMaxThreads},
    {IVF_PARAM_UNIQUE_IDS, "IVF_PARAM_UNIQUE_IDS", 0, 1},
    {IVF_PARAM_DEVICE_BUDGET, "IVF_PARAM_DEVICE_BUDGET", 0, kMax},
    {IVF_PARAM_DYNAMIC_BATCHING, "IVF_PARAM_DYNAMIC_BATCHING", 0, 1},
    {IVF_PARAM_BATCH_WINDOW_US, "IVF_PARAM_BATCH_WINDOW_US", 0, 10000000},
    {IVF_PARAM_SHARDS, "IVF_PARAM_SHARDS", 1, limits::kMaxShards},
    {IVF_PARAM_SHARD_MODE, "IVF_PARAM_SHARD_MODE", IVF_SHARD_SPLIT, IVF_SHARD_REPLICATE},
    {IVF_PARAM_STORAGE_TYPE, "IVF_PARAM_STORAGE_TYPE", IVF_DTYPE_F32, IVF_DTYPE_BF16},
    {IVF_PARAM_NPROBE, "IVF_PARAM_NPROBE", 1, limits::kMaxNprobe},
    {IVF_PARAM_MEMORY_KIND, "IVF_PARAM_MEMORY_KIND", IVF_MEMORY_HOST, IVF_MEMORY_DEVICE},
};

// IVF_PARAM_SHARD_DEVICE(part): one key per part, -1 = the default placement.
constexpr KeySpec kShardDevice = {IVF_PARAM_SHARD_DEVICE(0), "IVF_PARAM_SHARD_DEVICE(part)", -1, limits::kMaxDevice};

// The part a shard-device key names, or -1 for any other key.
int64_t shard_device_part(ivf_param_key key) {
  return key >= IVF_PARAM_SHARD_DEVICE(0) && key < IVF_PARAM_SHARD_DEVICE(limits::kMaxShards)
             ? key - IVF_PARAM_SHARD_DEVICE(0)
             : -1;
}

const KeySpec* spec_of(ivf_param_key key) {
  if (shard_device_part(key) >= 0) return &kShardDevice;
  for (const KeySpec& s : kKeys)
    if (s.key == key) return &s;
  return nullptr;
}

const KeySpec& int_key(ivf_param_key key, const char* what) {
  const KeySpec* s = spec_of(key);
  if (s == nullptr) {
    if (key == IVF_PARAM_CUDA_STREAM || key == IVF_PARAM_FILTER)
      fail(Errc::Unsupported, std::string(what) + ": " +
                                  (key == IVF_PARAM_FILTER ? "IVF_PARAM_FILTER" : "IVF_PARAM_CUDA_STREAM") +
                                  " is a pointer key (use ivf_params_set_ptr)");
    fail(Errc::Unsupported, std::string(what) + ": unknown parameter key " + std::to_string(key));
  }
  return *s;
}

// The field behind an integer key that is stored as int64_t.
int64_t* int_field(ivf_params& p, ivf_param_key key) {
  switch (key) {
    case IVF_PARAM_NLIST: return &p.build.nlist;
    case IVF_PARAM_DEVICE: return &p.build.device;
    case IVF_PARAM_KMEANS_ITERS: return &p.build.kmeans_iters;
    case IVF_PARAM_MAX_POINTS_PER_CENTROID: return &p.build.max_points_per_centroid;
    case IVF_PARAM_SEED: return &p.build.seed;
    case IVF_PARAM_NUM_THREADS: return &p.build.num_threads;
    case IVF_PARAM_DEVICE_BUDGET: return &p.build.device_budget;
    case IVF_PARAM_SHARDS: return &p.build.shards;
    case IVF_PARAM_SHARD_MODE: return &p.build.shard_mode;
    default: return nullptr;
  }
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
    const KeySpec& s = int_key(key, "ivf_param_bounds");
    *min_value = s.lo;
    *max_value = s.hi;
  });
}

IVF_API ivf_status ivf_params_set_int(ivf_params* params, ivf_param_key key, int64_t value) {
  return guarded([&] {
    if (params == nullptr) invalid("ivf_params_set_int: params is NULL");
    const KeySpec& s = int_key(key, "ivf_params_set_int");
    if (value < s.lo || value > s.hi)
      invalid(std::string("ivf_params_set_int: ") + s.name + " = " + std::to_string(value) + " is outside [" +
              std::to_string(s.lo) + ", " + std::to_string(s.hi) + "]");
    if (const int64_t part = shard_device_part(key); part >= 0) {
      std::vector<int64_t>& devices = params->build.shard_devices;
      if (static_cast<int64_t>(devices.size()) <= part) devices.resize(static_cast<std::size_t>(part) + 1, -1);
      devices[static_cast<std::size_t>(part)] = value;
      return;
    }
    switch (key) {
      case IVF_PARAM_METRIC: params->build.metric = static_cast<Metric>(value); break;
      case IVF_PARAM_BACKEND: params->build.backend = static_cast<BackendKind>(value); break;
      case IVF_PARAM_MEMORY_KIND: params->search.memory = static_cast<MemoryKind>(value); break;
      case IVF_PARAM_UNIQUE_IDS: params->build.unique_ids = value != 0; break;
      case IVF_PARAM_DYNAMIC_BATCHING: params->build.dynamic_batching = value != 0; break;
      case IVF_PARAM_STORAGE_TYPE: params->build.storage = static_cast<int32_t>(value); break;
      case IVF_PARAM_BATCH_WINDOW_US: params->search.batch_window_us = value; break;
      case IVF_PARAM_NPROBE:
        // One key, two readers: ivf_create takes it as the index's default, ivf_search as this
        // call's value (unset: the index's default).
        params->build.nprobe = value;
        params->search.nprobe = value;
        break;
      default: *int_field(*params, key) = value;
    }
  });
}

IVF_API ivf_status ivf_params_get_int(const ivf_params* params, ivf_param_key key, int64_t* value) {
  return guarded([&] {
    if (params == nullptr || value == nullptr) invalid("ivf_params_get_int: NULL argument");
    int_key(key, "ivf_params_get_int");
    if (const int64_t part = shard_device_part(key); part >= 0) {
      const std::vector<int64_t>& devices = params->build.shard_devices;
      *value = part < static_cast<int64_t>(devices.size()) ? devices[static_cast<std::size_t>(part)] : -1;
      return;
    }
    switch (key) {
      case IVF_PARAM_METRIC: *value = static_cast<int64_t>(params->build.metric); break;
      case IVF_PARAM_BACKEND: *value = static_cast<int64_t>(params->build.backend); break;
      case IVF_PARAM_MEMORY_KIND: *value = static_cast<int64_t>(params->search.memory); break;
      case IVF_PARAM_NPROBE: *value = params->build.nprobe; break;
      case IVF_PARAM_UNIQUE_IDS: *value = params->build.unique_ids ? 1 : 0; break;
      case IVF_PARAM_DYNAMIC_BATCHING: *value = params->build.dynamic_batching ? 1 : 0; break;
      case IVF_PARAM_STORAGE_TYPE: *value = params->build.storage; break;
      case IVF_PARAM_BATCH_WINDOW_US: *value = params->search.batch_window_us; break;
      default: *value = *int_field(const_cast<ivf_params&>(*params), key);
    }
  });
}

IVF_API ivf_status ivf_params_set_progress(ivf_params* params, ivf_progress_fn fn, void* user) {
  return guarded([&] {
    if (params == nullptr) invalid("ivf_params_set_progress: params is NULL");
    params->progress = fn;
    params->progress_user = fn != nullptr ? user : nullptr;
  });
}

IVF_API ivf_status ivf_params_set_ptr(ivf_params* params, ivf_param_key key, void* value) {
  return guarded([&] {
    if (params == nullptr) invalid("ivf_params_set_ptr: params is NULL");
    switch (key) {
      case IVF_PARAM_CUDA_STREAM: params->search.stream = value; return;
      case IVF_PARAM_FILTER: {
        const auto* f = static_cast<const ivf_filter*>(value);
        params->search.filter = f != nullptr ? f->impl.get() : nullptr;
        return;
      }
      default: {
        const KeySpec* s = spec_of(key);
        fail(Errc::Unsupported, std::string("ivf_params_set_ptr: ") +
                                    (s ? std::string(s->name) + " is an integer key (use ivf_params_set_int)"
                                       : "unknown parameter key " + std::to_string(key)));
      }
    }
  });
}

}  // extern "C"

namespace ivfgpu::capi {
BuildParams build_params_of(const ivf_params* params) { return params == nullptr ? BuildParams{} : params->build; }
SearchParams search_params_of(const ivf_params* params) { return params == nullptr ? SearchParams{} : params->search; }
}  // namespace ivfgpu::capi
