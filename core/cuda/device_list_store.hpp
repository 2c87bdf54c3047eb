// The CUDA backend's list store: rows in device arrays laid out by a ListLayout
// (list_layout.hpp), shared between published states as list_store.hpp describes. Every
// method runs on the stream it is given and synchronises it before returning a new store, so
// a returned store is complete on the device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "../list_layout.hpp"
#include "../list_store.hpp"
#include "device_buffer.hpp"

namespace ivfgpu::cuda {

// Fixed layout; rows past a state's live sizes are spare room.
struct DeviceListStorage {
  ListLayout layout;
  DeviceBuffer<float> vectors;  // layout.capacity * dim
  DeviceBuffer<int64_t> ids;    // layout.capacity
  DeviceBuffer<int64_t> start;  // nlist, layout.start on the device
};

class DeviceListStore final : public ListStore {
 public:
  static std::shared_ptr<const DeviceListStore> empty(const DeviceContext& ctx, cudaStream_t stream, int64_t dim,
                                                      int64_t nlist);
  // The model's lists packed as they are (no sort, no spare room): the device holds one copy of
  // the vectors and ids, nothing more, at any point of the load.
  static std::shared_ptr<const DeviceListStore> from_model(const DeviceContext& ctx, cudaStream_t stream,
                                                           const HostModel& model);

  // A new store with this one's rows plus n device rows x (f32, prepared for the metric), row i
  // going to list assign[i] after the list's rows, in input order, with id ids[i] (device) or,
  // for ids == nullptr, ntotal() + i. Shares this store's storage when every list has room.
  std::shared_ptr<const DeviceListStore> append(const DeviceContext& ctx, cudaStream_t stream, const float* x,
                                                const int64_t* ids, const int32_t* assign, int64_t n) const;

  ListView view() const override;
  std::size_t bytes() const override;
  void export_lists(HostModel& model) const override;

 private:
  DeviceListStore(const DeviceContext& ctx, cudaStream_t stream, int64_t dim,
                  std::shared_ptr<DeviceListStorage> storage, std::vector<int64_t> sizes);

  const DeviceContext* ctx_;
  int64_t dim_;
  std::shared_ptr<DeviceListStorage> storage_;  // the mutator may write past sizes_
  std::vector<int64_t> sizes_;
  std::vector<int64_t> largest_prefix_;
  DeviceBuffer<int64_t> d_sizes_;
  int64_t ntotal_ = 0;
};

}  // namespace ivfgpu::cuda
