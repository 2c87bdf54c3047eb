// What the opaque C handles hold.
#pragma once

#include <memory>
#include <shared_mutex>

#include "../../core/index.hpp"
#include "../../core/types.hpp"
#include "ivfgpu/ivfgpu.h"

struct ivf_params {
  ivfgpu::BuildParams build;
  bool nprobe_set = false;  // search: use the index's default unless set
  ivfgpu::MemoryKind memory = ivfgpu::MemoryKind::Host;
  void* stream = nullptr;
};

struct ivf_index {
  // Searches take it shared, mutations exclusive.
  mutable std::shared_mutex mutex;
  std::unique_ptr<ivfgpu::Index> impl;
};

namespace ivfgpu::capi {
// Checks shared by entry points; they throw Errc::InvalidArgument.
void check_matrix(const void* data, ivf_dtype dtype, int64_t n, int64_t dim, int64_t index_dim,
                  const char* what);
// Build parameters of params (defaults for NULL).
BuildParams build_params_of(const ivf_params* params);
}  // namespace ivfgpu::capi
