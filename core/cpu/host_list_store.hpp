// The CPU backend's list store: rows in host arrays laid out by a ListLayout (list_layout.hpp),
// shared between published states as list_store.hpp describes.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../list_layout.hpp"
#include "../list_store.hpp"

namespace ivfgpu::cpu {

// Fixed layout; rows past a state's live sizes are spare room.
struct HostListStorage {
  ListLayout layout;
  std::vector<float> vectors;  // layout.capacity * dim
  std::vector<int64_t> ids;    // layout.capacity
};

class HostListStore final : public ListStore {
 public:
  static std::shared_ptr<const HostListStore> empty(int64_t dim, int64_t nlist);
  // Takes the model's arrays over (no copy): its lists are packed, as a load reads them.
  static std::shared_ptr<const HostListStore> from_model(HostModel& model);

  // A new store holding this one's rows plus n rows x (f32, already prepared for the metric)
  // with their ids, row i going to list lists[i] after the list's existing rows, in input
  // order. Shares this store's storage when every list has room; otherwise builds a grown one.
  std::shared_ptr<const HostListStore> append(const float* x, const int64_t* ids, const int64_t* lists,
                                              int64_t n) const;

  ListView view() const override;
  std::size_t bytes() const override;
  void export_lists(HostModel& model) const override;

 private:
  HostListStore(int64_t dim, std::shared_ptr<HostListStorage> storage, std::vector<int64_t> sizes);

  int64_t dim_;
  std::shared_ptr<HostListStorage> storage_;  // the mutator may write past sizes_
  std::vector<int64_t> sizes_;
  std::vector<int64_t> largest_prefix_;
  int64_t ntotal_ = 0;
};

}  // namespace ivfgpu::cpu
