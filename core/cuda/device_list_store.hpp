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
#include "id_bitset.cuh"

namespace ivfgpu::cuda {

// Removed rows of one storage (list_store.hpp) with their device copy.
struct DeviceRemovedRows {
  RemovedRows host;
  DeviceBuffer<uint64_t> bits;
};

// Fixed layout; rows past a state's live sizes are spare room.
struct DeviceListStorage {
  ListLayout layout;
  DeviceBuffer<unsigned char> vectors;  // layout.capacity rows of the store's element type
  DeviceBuffer<int64_t> ids;    // layout.capacity
  DeviceBuffer<int64_t> start;  // nlist, layout.start on the device
};

class DeviceListStore final : public ListStore {
 public:
  static std::shared_ptr<const DeviceListStore> empty(const DeviceContext& ctx, cudaStream_t stream, int64_t dim,
                                                      ElementType type, int64_t nlist);
  // The model's lists packed as they are (no sort, no spare room): the device holds one copy of
  // the vectors and ids, nothing more, at any point of the load.
  static std::shared_ptr<const DeviceListStore> from_model(const DeviceContext& ctx, cudaStream_t stream,
                                                           const HostModel& model);

  // A new store with this one's live rows plus n device rows x (of the store's element type,
  // prepared for the metric),
  // row i going to list assign[i] after the list's rows, in input order, with id ids[i]
  // (device) or, for ids == nullptr, ntotal() + i. Shares this store's storage when every list
  // has room; otherwise builds a grown storage of the live rows (removed rows reclaimed).
  // slots (optional, device, n): where each new row went.
  std::shared_ptr<const DeviceListStore> append(const DeviceContext& ctx, cudaStream_t stream, const void* x,
                                                const int64_t* ids, const int32_t* assign, int64_t n,
                                                int64_t* slots = nullptr) const;
  // A new store in which every live row whose id is in `set` is removed; .second counts them.
  std::pair<std::shared_ptr<const DeviceListStore>, int64_t> remove_in(const DeviceContext& ctx, cudaStream_t stream,
                                                                       const IdSetView& set) const;
  // The live rows in a new storage with the growth rule's spare room; no removed rows.
  std::shared_ptr<const DeviceListStore> compacted(const DeviceContext& ctx, cudaStream_t stream) const;
  // Whether `other` uses the same storage (its slots mean the same rows).
  bool same_storage(const DeviceListStore& other) const { return storage_ == other.storage_; }
  // (id, slot) of every live row, in descending slot order, into device arrays of capacity
  // rows; returns how many. (Descending: an insert that keeps the last of equal keys keeps the
  // row first in list order.)
  int64_t live_pairs(const DeviceContext& ctx, cudaStream_t stream, int64_t* ids, int64_t* slots) const;
  int64_t capacity() const { return storage_->layout.capacity; }

  ListView view() const override;
  std::size_t bytes() const override;
  void export_lists(HostModel& model) const override;

 private:
  DeviceListStore(const DeviceContext& ctx, cudaStream_t stream, int64_t dim, ElementType type,
                  std::shared_ptr<DeviceListStorage> storage, std::vector<int64_t> sizes,
                  std::shared_ptr<const DeviceRemovedRows> removed = nullptr);
  // A storage of `layout` holding this store's live rows, list by list, in order.
  std::shared_ptr<DeviceListStorage> copy_live(const DeviceContext& ctx, cudaStream_t stream, ListLayout layout) const;

  const DeviceContext* ctx_;
  int64_t dim_;
  ElementType type_;
  std::size_t row_bytes_;
  std::shared_ptr<DeviceListStorage> storage_;  // the mutator may write past sizes_
  std::vector<int64_t> sizes_;
  std::vector<int32_t> by_size_;  // lists_by_size(sizes_)
  std::vector<int64_t> largest_prefix_;
  DeviceBuffer<int64_t> d_sizes_;
  DeviceBuffer<int32_t> d_by_size_;
  std::shared_ptr<const DeviceRemovedRows> removed_;  // null: none
  int64_t ntotal_ = 0;                               // live rows
};

}  // namespace ivfgpu::cuda
