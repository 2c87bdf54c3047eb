// The host tier's list store (docs/host-tier.md): every list of a budgeted index lives in
// pinned host memory, each in its own block of the tier's arenas holding `cap` rows and then
// their ids. The device holds copies of some lists (cuda/list_cache) but never the store.
//
// Sharing between published states follows list_store.hpp, per list instead of per storage:
// an add that fits a list's block writes past the list's size in the shared block (sizes only
// grow within one block, so no state reads those rows); a list that outgrows its block, or
// loses rows to a remove, gets a new block and only that list is copied. Rows of a block below
// a state's size never change, so (block, size) names a list's content: the device cache keys
// on it. There are no removed-row marks: a remove copies the lists it touches.
//
// The store does not look inside a row: it moves row_bytes-byte rows of any element type.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "../element_type.hpp"
#include "../list_store.hpp"
#include "host_arena.hpp"

namespace ivfgpu::tier {

struct TierList {
  std::shared_ptr<const HostBlock> block;  // null for a list that never held a row
  char* rows = nullptr;                    // host: cap rows
  int64_t* ids = nullptr;                  // host: cap ids
  const char* device_rows = nullptr;       // the same memory, as the device addresses it
  const int64_t* device_ids = nullptr;
  int64_t cap = 0;
  int64_t size = 0;
  // Names the block's content for the device cache: (serial, size) never names two different
  // row sets (a block's address may be reused after it is freed; a serial never is).
  uint64_t serial = 0;
};

// A fresh serial (process-wide, thread-safe).
uint64_t next_list_serial();

class TierStore final : public ListStore {
 public:
  using Ptr = std::shared_ptr<const TierStore>;
  static Ptr empty(std::shared_ptr<HostArenas> arenas, int64_t dim, ElementType type, int64_t nlist);
  // Takes the model's arrays over and makes them device-visible in place (no copy): its lists
  // are packed, as a load reads them.
  static Ptr from_model(std::shared_ptr<HostArenas> arenas, HostModel& model);

  // A new store holding this one's rows plus n rows (row_bytes each, prepared for the metric)
  // with their ids, row i going to list lists[i] after the list's rows, in input order.
  // All blocks are allocated before any row is written: out of host memory leaves this store
  // (and every state sharing its blocks) as it was.
  Ptr append(const void* rows, const int64_t* ids, const int64_t* lists, int64_t n, int threads) const;
  // A new store without the rows whose id satisfies `match` (called from several threads at
  // once); .second counts them.
  std::pair<Ptr, int64_t> remove_if(const std::function<bool(int64_t)>& match, int threads) const;

  const TierList& list(int64_t l) const { return lists_[static_cast<std::size_t>(l)]; }
  int64_t nlist() const { return static_cast<int64_t>(lists_.size()); }
  int64_t dim() const { return dim_; }
  ElementType type() const { return type_; }
  std::size_t row_bytes() const { return row_bytes_; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  // A list's rows as whole bytes (what a transfer moves).
  std::size_t list_bytes(int64_t l) const { return static_cast<std::size_t>(sizes_[l]) * row_bytes_; }

  ListView view() const override;
  std::size_t bytes() const override;
  void export_lists(HostModel& model) const override;

 private:
  TierStore(std::shared_ptr<HostArenas> arenas, int64_t dim, ElementType type, std::vector<TierList> lists);
  // A list with room for `cap` rows in a new block.
  TierList new_list(int64_t cap) const;

  std::shared_ptr<HostArenas> arenas_;
  int64_t dim_;
  ElementType type_;
  std::size_t row_bytes_;
  std::vector<TierList> lists_;
  std::vector<int64_t> sizes_;
  std::vector<int64_t> largest_prefix_;
  int64_t ntotal_ = 0;
};

// The capacity a list holding `rows` rows gets when it needs a new block: 1/8 spare rounded up
// to 32 rows (the growth rule of list_layout.hpp).
int64_t grown_capacity(int64_t rows);

}  // namespace ivfgpu::tier
