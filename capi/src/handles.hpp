// What the opaque C handles hold.
#pragma once

#include "core/progress.hpp"
#include <memory>

#include "../../core/index.hpp"
#include "../../core/search_request.hpp"
#include "../../core/types.hpp"
#include "ivfgpu/ivfgpu.h"

struct ivf_params {
  ivfgpu::BuildParams build;    // read by ivf_create / ivf_load
  ivfgpu::SearchParams search;  // read by ivf_search, and memory/stream by the _ex mutations
  ivfgpu::progress::Callback progress = nullptr;  // read by the long calls (ivfgpu.h)
  void* progress_user = nullptr;
};

struct ivf_filter {
  std::unique_ptr<ivfgpu::IdFilter> impl;
};

struct ivf_index {
  // The engine index publishes immutable states itself: no lock at this layer.
  std::unique_ptr<ivfgpu::Index> impl;
};

namespace ivfgpu::capi {
// Checks a matrix argument against the index and describes it; throws Errc::InvalidArgument
// (or Unsupported for a dtype not built in).
MatrixView matrix_arg(const void* data, ivf_dtype dtype, int64_t n, int64_t dim, int64_t index_dim, MemoryKind memory,
                      const char* what);
// Build and search parameters of params (defaults for NULL).
BuildParams build_params_of(const ivf_params* params);
SearchParams search_params_of(const ivf_params* params);
// The progress scope of one long call: the callback of params (none for NULL params).
inline progress::Scope progress_of(const ivf_params* params, progress::Stage stage) {
  return progress::Scope(params ? params->progress : nullptr, params ? params->progress_user : nullptr, stage);
}
}  // namespace ivfgpu::capi
