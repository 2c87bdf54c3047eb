// The inverted lists of one published state, behind an interface. A scan sees only the
// read-only ListView: per list, where its rows are, how many are live, their ids, the element
// type and the memory tier. How and where a store keeps its lists (host arrays, device arrays,
// later a pinned host tier, tombstones, shards) is the implementation's business.
//
// Sharing between states: a store's rows live in a storage object whose layout (ListLayout) is
// fixed when it is made. Several published states may share one storage; each has its own live
// sizes. Within one storage the live sizes of successive states only grow, so rows past a
// state's sizes are never read by it, and the single mutator may fill them (an add that fits
// the spare room) while searches of older states run. Anything else (growth, reset, load)
// makes a new storage.
//
// Removals: a removed row stays in its slot, marked in the state's removed-rows bitmap (one
// bit per storage slot; copied on write, so a search that started before a remove still sees
// the row and one that starts after never does). Rows are reclaimed when the storage is
// rebuilt (an add that grows, or a compaction), which copies live rows only. Within one
// storage removed bits, like live sizes, only ever grow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "element_type.hpp"
#include "host_model.hpp"

namespace ivfgpu {

enum class MemoryTier : int32_t { Host = 0, Device = 1 };

struct ListView {
  int64_t nlist = 0;
  int64_t dim = 0;
  ElementType type = ElementType::F32;
  MemoryTier tier = MemoryTier::Host;
  int64_t ntotal = 0;  // live rows: used rows less removed ones
  // In the tier's memory.
  const void* vectors = nullptr;   // rows of `type`, dim elements each
  const int64_t* ids = nullptr;    // one per row
  const int64_t* start = nullptr;  // nlist: first row of each list
  const int64_t* size = nullptr;   // nlist: used rows of each list (removed ones included)
  const int32_t* by_size = nullptr;  // nlist: list ids, largest first (lists_by_size), or null
  const uint64_t* removed = nullptr;  // bit per storage slot, or null when no row is removed
  int64_t removed_count = 0;
  // Host mirrors, for planning (chunk sizes, dispatch).
  const int64_t* host_start = nullptr;
  const int64_t* host_size = nullptr;
  const uint64_t* host_removed = nullptr;
  const int64_t* largest_prefix = nullptr;  // nlist + 1, see largest_lists_prefix

  template <class T>
  const T* rows() const { return static_cast<const T*>(vectors); }
  bool host_removed_at(int64_t slot) const {
    return host_removed != nullptr && ((host_removed[slot >> 6] >> (slot & 63)) & 1u);
  }
};

// Live rows of each list (used rows less removed ones), from a view's host mirrors.
inline std::vector<int64_t> live_list_sizes(const ListView& v) {
  std::vector<int64_t> live(v.host_size, v.host_size + v.nlist);
  if (v.host_removed == nullptr) return live;
  for (int64_t l = 0; l < v.nlist; ++l)
    for (int64_t s = v.host_start[l], e = s + v.host_size[l]; s < e; ++s) live[l] -= v.host_removed_at(s) ? 1 : 0;
  return live;
}

// Removed rows of one storage: a bitmap over its slots. Immutable once published.
struct RemovedRows {
  std::vector<uint64_t> bits;  // ceil(capacity / 64) words
  int64_t count = 0;
  static std::size_t words_for(int64_t capacity) { return static_cast<std::size_t>((capacity + 63) / 64); }
};

class ListStore {
 public:
  virtual ~ListStore() = default;
  virtual ListView view() const = 0;
  int64_t ntotal() const { return view().ntotal; }
  // Bytes this store's storage holds in its tier (shared storage counted whole).
  virtual std::size_t bytes() const = 0;
  // The live rows, list by list, into model.list_offsets / vectors / ids.
  virtual void export_lists(HostModel& model) const = 0;
};

}  // namespace ivfgpu
