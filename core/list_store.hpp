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
  int64_t ntotal = 0;
  // In the tier's memory.
  const void* vectors = nullptr;   // rows of `type`, dim elements each
  const int64_t* ids = nullptr;    // one per row
  const int64_t* start = nullptr;  // nlist: first row of each list
  const int64_t* size = nullptr;   // nlist: live rows of each list
  // Host mirrors, for planning (chunk sizes, dispatch).
  const int64_t* host_start = nullptr;
  const int64_t* host_size = nullptr;
  const int64_t* largest_prefix = nullptr;  // nlist + 1, see largest_lists_prefix

  template <class T>
  const T* rows() const { return static_cast<const T*>(vectors); }
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
