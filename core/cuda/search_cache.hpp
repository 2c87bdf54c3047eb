// What searches keep on a worker between calls (device_context.hpp: Worker::search): the
// small-batch graphs with their arena and pinned staging. A worker serves one call at a time,
// so none of it needs a lock.
#pragma once

#include "device_context.hpp"
#include "small_batch.hpp"

namespace ivfgpu::cuda {

struct SearchCache {
  SmallBatchGraphs graphs;
};

// The lease's worker's cache, made on first use.
SearchCache& search_cache(const DeviceContext::Lease& lease);

// What ivf_reset's trim gives back of an idle worker's cache (SmallBatchGraphs::release_device_memory).
void release_device_memory(SearchCache& cache) noexcept;

}  // namespace ivfgpu::cuda
