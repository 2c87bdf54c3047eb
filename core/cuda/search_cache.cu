#include "search_cache.hpp"

#include <memory>

namespace ivfgpu::cuda {

void release_device_memory(SearchCache& cache) noexcept { cache.graphs.release_device_memory(); }

SearchCache& search_cache(const DeviceContext::Lease& lease) {
  Worker& w = lease.worker();
  if (!w.search) w.search = std::make_shared<SearchCache>();
  return *w.search;
}

}  // namespace ivfgpu::cuda
