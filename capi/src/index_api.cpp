// Entry points of the index: argument checks, the index lock, then the engine.
#include <cmath>
#include <limits>
#include <string>

#include "../../core/backend.hpp"
#include "../../core/limits.hpp"
#include "guard.hpp"
#include "handles.hpp"

using namespace ivfgpu;
using namespace ivfgpu::capi;

#define IVF_STR2(x) #x
#define IVF_STR(x) IVF_STR2(x)

namespace ivfgpu::capi {

MatrixView matrix_arg(const void* data, ivf_dtype dtype, int64_t n, int64_t dim, int64_t index_dim, MemoryKind memory,
                      const char* what) {
  const std::string w(what);
  if (data == nullptr) invalid(w + ": data is NULL");
  if (n <= 0) invalid(w + ": n must be >= 1, got " + std::to_string(n));
  if (dim != index_dim)
    invalid(w + ": dimension " + std::to_string(dim) + " does not match the index's " + std::to_string(index_dim));
  // Which types the index takes is the engine's rule (f32 or its storage type).
  if (dtype < IVF_DTYPE_F32 || dtype > IVF_DTYPE_BF16) invalid(w + ": unknown dtype " + std::to_string(dtype));
  // The byte count n * dim * 4 must fit: anything larger cannot be a real buffer.
  if (n > std::numeric_limits<int64_t>::max() / dim / int64_t(sizeof(float)))
    invalid(w + ": n * dim overflows the addressable size");
  return MatrixView{data, static_cast<ElementType>(dtype), n, dim, memory};
}

}  // namespace ivfgpu::capi

namespace {

Index& impl_of(const ivf_index* index, const char* what) {
  if (index == nullptr || !index->impl) invalid(std::string(what) + ": index is NULL");
  return *index->impl;
}

// A device-memory mutation names the stream its input was produced on: the library waits for
// that stream before reading (the call itself is synchronous).
void wait_for_producer(const SearchParams& call) {
  if (call.memory == MemoryKind::Device && call.stream != nullptr) wait_for_stream(call.stream);
}

// The per-part keys (IVF_INFO_PART_DEVICE(part), IVF_INFO_PART_DEVICE_MEMORY_BYTES(part)).
int64_t part_info(const BackendInfo& info, ivf_info_key key) {
  const bool device = key >= IVF_INFO_PART_DEVICE(0) && key < IVF_INFO_PART_DEVICE(4096);
  const bool memory = key >= IVF_INFO_PART_DEVICE_MEMORY_BYTES(0) && key < IVF_INFO_PART_DEVICE_MEMORY_BYTES(4096);
  if (!device && !memory) fail(Errc::Unsupported, "ivf_index_info: unknown key " + std::to_string(key));
  const int64_t part = key - (device ? IVF_INFO_PART_DEVICE(0) : IVF_INFO_PART_DEVICE_MEMORY_BYTES(0));
  if (part >= info.parts)
    invalid("ivf_index_info: part " + std::to_string(part) + " of an index of " + std::to_string(info.parts) +
            " part(s)");
  if (info.part_devices.empty())  // one part: the index itself
    return device ? info.device : static_cast<int64_t>(info.device_memory_bytes);
  return device ? info.part_devices[part] : static_cast<int64_t>(info.part_device_memory[part]);
}

}  // namespace

extern "C" {

IVF_API const char* ivf_version(void) {
  return IVF_STR(IVF_VERSION_MAJOR) "." IVF_STR(IVF_VERSION_MINOR) "." IVF_STR(IVF_VERSION_PATCH);
}

IVF_API uint32_t ivf_abi_version(void) { return IVF_ABI_VERSION; }

IVF_API const char* ivf_last_error_message(void) { return last_error_message(); }

IVF_API const char* ivf_status_string(ivf_status status) {
  switch (status) {
    case IVF_OK: return "ok";
    case IVF_ERR_INVALID_ARGUMENT: return "invalid argument";
    case IVF_ERR_OUT_OF_DEVICE_MEMORY: return "out of device memory";
    case IVF_ERR_OUT_OF_HOST_MEMORY: return "out of host memory";
    case IVF_ERR_CUDA: return "CUDA error";
    case IVF_ERR_UNSUPPORTED: return "unsupported";
    case IVF_ERR_INVALID_STATE: return "invalid state";
    case IVF_ERR_BUFFER_TOO_SMALL: return "buffer too small";
    case IVF_ERR_IO: return "I/O error";
    case IVF_ERR_CORRUPT_DATA: return "corrupt data";
    case IVF_ERR_VERSION_MISMATCH: return "version mismatch";
    case IVF_ERR_DEVICE_LOST: return "device lost";
    case IVF_ERR_INTERNAL: return "internal error";
    case IVF_ERR_CANCELLED: return "cancelled";
    default: return "unknown status";
  }
}

IVF_API ivf_status ivf_create(ivf_index** out, int64_t dim, const ivf_params* params) {
  return guarded([&] {
    if (out == nullptr) invalid("ivf_create: out is NULL");
    if (dim <= 0) invalid("ivf_create: dim must be >= 1, got " + std::to_string(dim));
    if (dim > limits::kMaxDim) invalid("ivf_create: dim " + std::to_string(dim) + " exceeds " + std::to_string(limits::kMaxDim));
    auto handle = std::make_unique<ivf_index>();
    handle->impl = std::make_unique<Index>(dim, build_params_of(params));
    *out = handle.release();
  });
}

IVF_API void ivf_free(ivf_index* index) { delete index; }

IVF_API ivf_status ivf_train_ex(ivf_index* index, const ivf_params* params, const void* data, ivf_dtype dtype,
                              int64_t n, int64_t dim) {
  return guarded([&] {
    Index& idx = impl_of(index, "ivf_train");
    const SearchParams call = search_params_of(params);
    const progress::Scope progress = progress_of(params, progress::Stage::Train);
    const MatrixView x = matrix_arg(data, dtype, n, dim, idx.dim(), call.memory, "ivf_train");
    wait_for_producer(call);
    idx.train(x);
  });
}

IVF_API ivf_status ivf_train(ivf_index* index, const void* data, ivf_dtype dtype, int64_t n, int64_t dim) {
  return ivf_train_ex(index, nullptr, data, dtype, n, dim);
}

IVF_API ivf_status ivf_add_ex(ivf_index* index, const ivf_params* params, const void* data, ivf_dtype dtype,
                            int64_t n, int64_t dim, const int64_t* ids) {
  return guarded([&] {
    Index& idx = impl_of(index, "ivf_add");
    const SearchParams call = search_params_of(params);
    const progress::Scope progress = progress_of(params, progress::Stage::Add);
    const MatrixView x = matrix_arg(data, dtype, n, dim, idx.dim(), call.memory, "ivf_add");
    wait_for_producer(call);
    idx.add(x, ids);
  });
}

IVF_API ivf_status ivf_add(ivf_index* index, const void* data, ivf_dtype dtype, int64_t n, int64_t dim,
                           const int64_t* ids) {
  return ivf_add_ex(index, nullptr, data, dtype, n, dim, ids);
}

IVF_API ivf_status ivf_reset(ivf_index* index) {
  return guarded([&] { impl_of(index, "ivf_reset").reset(); });
}

IVF_API ivf_status ivf_search(const ivf_index* index, const ivf_params* params, const void* queries,
                              ivf_dtype dtype, int64_t n, int64_t dim, int64_t k, int64_t* ids,
                              float* dists) {
  return guarded([&] {
    const Index& idx = impl_of(index, "ivf_search");
    const SearchParams call = search_params_of(params);
    SearchRequest req;
    req.queries = matrix_arg(queries, dtype, n, dim, idx.dim(), call.memory, "ivf_search");
    if (k <= 0) invalid("ivf_search: k must be >= 1, got " + std::to_string(k));
    if (ids == nullptr || dists == nullptr) invalid("ivf_search: ids or dists is NULL");
    if (n > std::numeric_limits<int64_t>::max() / k / int64_t(sizeof(int64_t)))
      invalid("ivf_search: n * k overflows the addressable size");
    req.k = k;
    req.nprobe = call.nprobe;
    req.ids = ids;
    req.dists = dists;
    req.memory = call.memory;
    req.stream = call.stream;
    req.filter = call.filter;
    req.batch_window_us = call.batch_window_us;
    const progress::Scope progress = progress_of(params, progress::Stage::Search);
    idx.search(req);
    progress::finish();
  });
}

IVF_API ivf_status ivf_ntotal(const ivf_index* index, int64_t* ntotal) {
  return guarded([&] {
    const Index& idx = impl_of(index, "ivf_ntotal");
    if (ntotal == nullptr) invalid("ivf_ntotal: ntotal is NULL");
    *ntotal = idx.ntotal();
  });
}

IVF_API ivf_status ivf_index_info(const ivf_index* index, ivf_info_key key, int64_t* value) {
  return guarded([&] {
    const Index& idx = impl_of(index, "ivf_index_info");
    if (value == nullptr) invalid("ivf_index_info: value is NULL");
    const BuildParams& p = idx.params();
    // Every key reads the one state published when the call started.
    const StatePtr state = idx.state();
    const auto info = [&] { return idx.backend_info(*state); };
    switch (key) {
      case IVF_INFO_DIM: *value = idx.dim(); break;
      case IVF_INFO_NLIST: *value = p.nlist; break;
      case IVF_INFO_METRIC: *value = static_cast<int64_t>(p.metric); break;
      case IVF_INFO_BACKEND: *value = static_cast<int64_t>(info().kind); break;
      case IVF_INFO_DEVICE: *value = info().device; break;
      case IVF_INFO_NTOTAL: *value = state->ntotal(); break;
      case IVF_INFO_IS_TRAINED: *value = state->trained() ? 1 : 0; break;
      case IVF_INFO_NPROBE: *value = p.nprobe; break;
      case IVF_INFO_DEVICE_MEMORY_BYTES: *value = static_cast<int64_t>(info().device_memory_bytes); break;
      case IVF_INFO_HOST_MEMORY_BYTES: *value = static_cast<int64_t>(info().host_memory_bytes); break;
      case IVF_INFO_STATE_VERSION: *value = static_cast<int64_t>(state->version); break;
      case IVF_INFO_POOL_BYTES: *value = static_cast<int64_t>(info().pool_cached_bytes); break;
      case IVF_INFO_UNIQUE_IDS: *value = p.unique_ids ? 1 : 0; break;
      case IVF_INFO_REMOVED_ROWS: *value = state->lists().view().removed_count; break;
      case IVF_INFO_ID_MAP_BYTES: *value = static_cast<int64_t>(info().id_map_bytes); break;
      case IVF_INFO_DEVICE_BUDGET: *value = static_cast<int64_t>(info().device_budget); break;
      case IVF_INFO_RESIDENT_LISTS: *value = info().resident_lists; break;
      case IVF_INFO_RESIDENT_BYTES: *value = static_cast<int64_t>(info().resident_bytes); break;
      case IVF_INFO_HOST_TIER_BYTES: *value = static_cast<int64_t>(info().host_tier_bytes); break;
      case IVF_INFO_CACHE_HITS: *value = info().cache_hits; break;
      case IVF_INFO_CACHE_MISSES: *value = info().cache_misses; break;
      case IVF_INFO_STREAMED_BYTES: *value = static_cast<int64_t>(info().streamed_bytes); break;
      case IVF_INFO_MERGED_SEARCHES: *value = idx.merged_searches(); break;
      case IVF_INFO_SHARDS: *value = info().parts; break;
      case IVF_INFO_LIVE_SHARDS: *value = info().live_parts; break;
      case IVF_INFO_STORAGE_TYPE: *value = static_cast<int64_t>(idx.storage()); break;
      case IVF_INFO_GRAPH_SEARCHES: *value = info().graph_searches; break;
      case IVF_INFO_MERGE_NANOSECONDS: *value = info().merge_ns; break;
      case IVF_INFO_PEER_MERGE: *value = info().peer_merge ? 1 : 0; break;
      case IVF_INFO_FUSED_SEARCHES: *value = info().fused_searches; break;
      default: *value = part_info(info(), key);
    }
  });
}

IVF_API ivf_status ivf_cuda_device_count(int32_t* count) {
  return guarded([&] {
    if (count == nullptr) invalid("ivf_cuda_device_count: count is NULL");
    *count = cuda_device_count();
  });
}

}  // extern "C"
