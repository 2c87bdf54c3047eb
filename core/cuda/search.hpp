// The search pipeline (docs/architecture.md §5): coarse GEMM (A), top-nprobe (B), list scan (C), final
// top-k (D), in query chunks sized from a memory budget, all stream-ordered.
#pragma once

#include <cstdint>

#include "../list_store.hpp"
#include "../search_request.hpp"
#include "device_context.hpp"
#include "id_bitset.cuh"

namespace ivfgpu::cuda {

struct SearchIndexView {
  int64_t dim = 0;
  int64_t nlist = 0;
  Metric metric = Metric::L2;
  const float* centroids = nullptr;       // device
  const float* centroid_norms = nullptr;  // device
  ListView lists;                         // a device-tier view
  const IdSetView* filter_set = nullptr;  // the request's filter on this device, or null
};

// Cosine queries are normalised here (rows.hpp). Synchronous unless request.asynchronous().
void run_search(const DeviceContext& ctx, const SearchIndexView& index, const SearchRequest& req);

}  // namespace ivfgpu::cuda
