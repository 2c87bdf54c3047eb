// The CPU backend's list store: rows in host arrays laid out by a ListLayout (list_layout.hpp),
// shared between published states as list_store.hpp describes, removed rows marked by bitmap.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "../list_layout.hpp"
#include "../list_store.hpp"

namespace ivfgpu::cpu {

// Fixed layout; rows past a state's used sizes are spare room.
struct HostListStorage {
  ListLayout layout;
  // layout.capacity rows of the store's element type: f32 rows in `f32` (so a load's array is
  // taken over without a copy), other types' bytes in `packed`.
  std::vector<float> f32;
  std::vector<unsigned char> packed;
  std::vector<int64_t> ids;  // layout.capacity

  void resize_rows(ElementType type, std::size_t bytes) {
    if (type == ElementType::F32) f32.resize(bytes / sizeof(float)); else packed.resize(bytes);
  }
  unsigned char* rows() {
    return f32.empty() ? packed.data() : reinterpret_cast<unsigned char*>(f32.data());
  }
  const unsigned char* rows() const { return const_cast<HostListStorage*>(this)->rows(); }
  std::size_t row_bytes_held() const { return f32.size() * sizeof(float) + packed.size(); }
};

class HostListStore final : public ListStore {
 public:
  using Ptr = std::shared_ptr<const HostListStore>;
  static Ptr empty(int64_t dim, int64_t nlist, ElementType type = ElementType::F32);
  // Takes the model's arrays over (no copy): its lists are packed, as a load reads them.
  static Ptr from_model(HostModel& model);

  // A new store holding this one's live rows plus n rows x (of the store's element type,
  // already prepared for the metric) with their ids, row i going to list lists[i] after the
  // list's existing rows, in input order. Shares this store's storage when every list has room;
  // otherwise builds a grown one from the live rows only (removed rows are reclaimed there).
  Ptr append(const void* x, const int64_t* ids, const int64_t* lists, int64_t n) const;
  ElementType type() const { return type_; }
  std::size_t row_bytes() const { return row_bytes_; }
  // A new store in which every live row whose id satisfies `match` is removed; .second counts them.
  std::pair<Ptr, int64_t> remove_if(const std::function<bool(int64_t)>& match) const;
  // The live rows in a new storage with the growth rule's spare room; no removed rows.
  Ptr compacted() const;
  // fn(slot, list) for every live row, list by list, in slot order.
  void for_each_live(const std::function<void(int64_t, int64_t)>& fn) const;

  ListView view() const override;
  std::size_t bytes() const override;
  void export_lists(HostModel& model) const override;

 private:
  HostListStore(int64_t dim, ElementType type, std::shared_ptr<HostListStorage> storage, std::vector<int64_t> sizes,
                std::shared_ptr<const RemovedRows> removed);
  // The live rows of every list copied into a new storage of `layout` (sizes: live counts).
  std::shared_ptr<HostListStorage> copy_live(const ListLayout& layout) const;

  int64_t dim_;
  ElementType type_;
  std::size_t row_bytes_;
  std::shared_ptr<HostListStorage> storage_;  // the mutator may write past sizes_
  std::vector<int64_t> sizes_;                // used rows per list
  std::vector<int64_t> largest_prefix_;
  std::shared_ptr<const RemovedRows> removed_;  // null: none
  int64_t ntotal_ = 0;                          // live rows
};

}  // namespace ivfgpu::cpu
