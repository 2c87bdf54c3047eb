// Entry points of ids (remove, update, get, count) and of filters: argument checks, then the
// engine. Mutations publish one new state each (core/index.hpp).
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "../../core/element_convert.hpp"
#include "../../core/id_filter.hpp"
#include "guard.hpp"
#include "handles.hpp"

using namespace ivfgpu;
using namespace ivfgpu::capi;

namespace {

Index& index_of(const ivf_index* index, const char* what) {
  if (index == nullptr || !index->impl) invalid(std::string(what) + ": index is NULL");
  return *index->impl;
}

void check_ids(const int64_t* ids, int64_t n, const char* what) {
  if (n < 0) invalid(std::string(what) + ": n must be >= 0, got " + std::to_string(n));
  if (n > 0 && ids == nullptr) invalid(std::string(what) + ": ids is NULL");
  if (n > std::numeric_limits<int64_t>::max() / int64_t(sizeof(int64_t)))
    invalid(std::string(what) + ": n overflows the addressable size");
}

void host_only(const ivf_params* params, const char* what) {
  if (search_params_of(params).memory != MemoryKind::Host)
    fail(Errc::Unsupported, std::string(what) + ": ids and outputs must be in host memory");
}

}  // namespace

extern "C" {

IVF_API ivf_status ivf_remove(ivf_index* index, const ivf_params* params, const int64_t* ids, int64_t n,
                              int64_t* removed) {
  return guarded([&] {
    Index& idx = index_of(index, "ivf_remove");
    check_ids(ids, n, "ivf_remove");
    host_only(params, "ivf_remove");
    const int64_t count = idx.remove(ids, n);
    if (removed != nullptr) *removed = count;
  });
}

IVF_API ivf_status ivf_update(ivf_index* index, const ivf_params* params, const void* data, ivf_dtype dtype,
                              int64_t n, int64_t dim, const int64_t* ids) {
  return guarded([&] {
    Index& idx = index_of(index, "ivf_update");
    const SearchParams call = search_params_of(params);
    const MatrixView x = matrix_arg(data, dtype, n, dim, idx.dim(), call.memory, "ivf_update");
    if (ids == nullptr) invalid("ivf_update: ids is NULL");
    if (call.memory == MemoryKind::Device && call.stream != nullptr) wait_for_stream(call.stream);
    idx.update(x, ids);
  });
}

IVF_API ivf_status ivf_get(const ivf_index* index, const ivf_params* params, const int64_t* ids, int64_t n, void* out,
                           ivf_dtype dtype, int64_t dim, uint8_t* found) {
  return guarded([&] {
    const Index& idx = index_of(index, "ivf_get");
    check_ids(ids, n, "ivf_get");
    host_only(params, "ivf_get");
    if (n > 0 && out == nullptr) invalid("ivf_get: out is NULL");
    if (dim != idx.dim())
      invalid("ivf_get: dimension " + std::to_string(dim) + " does not match the index's " + std::to_string(idx.dim()));
    if (dtype != IVF_DTYPE_F32 && dtype != static_cast<ivf_dtype>(idx.storage()))
      invalid("ivf_get: output dtype " + std::to_string(dtype) + " is neither f32 nor the index's storage type (" +
              element_name(idx.storage()) + ")");
    if (n > std::numeric_limits<int64_t>::max() / dim / int64_t(sizeof(float)))
      invalid("ivf_get: n * dim overflows the addressable size");
    if (n == 0) return;
    if (dtype == IVF_DTYPE_F32) {
      idx.get(ids, n, static_cast<float*>(out), found);
      return;
    }
    // The stored type: the decoded rows encode back exactly.
    std::vector<float> rows(static_cast<std::size_t>(n * dim));
    idx.get(ids, n, rows.data(), found);
    const std::vector<unsigned char> bytes =
        encode_rows(MatrixView::host_f32(rows.data(), n, dim), idx.storage(), "ivf_get: row");
    std::memcpy(out, bytes.data(), bytes.size());
  });
}

IVF_API ivf_status ivf_count_ids(const ivf_index* index, const int64_t* ids, int64_t n, int64_t* counts) {
  return guarded([&] {
    const Index& idx = index_of(index, "ivf_count_ids");
    check_ids(ids, n, "ivf_count_ids");
    if (n > 0 && counts == nullptr) invalid("ivf_count_ids: counts is NULL");
    if (n == 0) return;
    idx.count_ids(ids, n, counts);
  });
}

IVF_API ivf_status ivf_filter_create(ivf_filter** out, const int64_t* ids, int64_t n, ivf_filter_mode mode) {
  return guarded([&] {
    if (out == nullptr) invalid("ivf_filter_create: out is NULL");
    check_ids(ids, n, "ivf_filter_create");
    if (mode != IVF_FILTER_ALLOW && mode != IVF_FILTER_DENY)
      invalid("ivf_filter_create: mode " + std::to_string(mode) + " is neither IVF_FILTER_ALLOW nor IVF_FILTER_DENY");
    auto f = std::make_unique<ivf_filter>();
    f->impl = std::make_unique<IdFilter>(ids, n, mode == IVF_FILTER_ALLOW);
    *out = f.release();
  });
}

IVF_API void ivf_filter_free(ivf_filter* filter) { delete filter; }

IVF_API ivf_status ivf_filter_bytes(const ivf_filter* filter, int64_t* host_bytes, int64_t* device_bytes) {
  return guarded([&] {
    if (filter == nullptr || !filter->impl) invalid("ivf_filter_bytes: filter is NULL");
    if (host_bytes) *host_bytes = static_cast<int64_t>(filter->impl->host_bytes());
    if (device_bytes) *device_bytes = static_cast<int64_t>(filter->impl->device_bytes());
  });
}

}  // extern "C"
