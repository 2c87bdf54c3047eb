// What one chunk of a search on the host tier copies and scans (docs/host-tier.md), decided on
// the host from the chunk's probe counts: the probed lists the device cache holds are scanned
// where they sit; every other probed list is copied once, either into the cache (when the
// admission rule takes it) or through a two-slot staging ring, in groups that fill a slot
// (groups alternate slots so a group's copy overlaps the previous group's scan); a list larger
// than a slot is cut into pieces. The planner also keeps the cache's books: which list block
// (serial, rows) sits where, and each list's decayed probe count. No CUDA here: cuda/tier_cache
// executes the plan, and the engine tests execute it with memcpy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "range_map.hpp"
#include "tier_store.hpp"

namespace ivfgpu::tier {

// Where a planned placement lives on the device: the cache region or the ring (2 slots).
enum class Region : uint8_t { Cache, Ring };

struct PlannedSegment {
  int64_t list = 0, row0 = 0, count = 0;
  Region region = Region::Cache;
  std::size_t rows_at = 0;  // byte offset of row row0 in the region
  std::size_t ids_at = 0;   // byte offset of its id, when has_ids
  bool has_ids = false;
};

struct PlannedCopy {
  const void* src = nullptr;  // host-tier memory
  Region region = Region::Cache;
  std::size_t at = 0, bytes = 0;
};

struct PlannedGroup {
  std::vector<PlannedCopy> copies;
  std::vector<PlannedSegment> segments;
  int slot = 0;                // the ring slot its ring pieces use
  std::size_t ring_used = 0;   // bytes of its slot in use
  std::size_t volume = 0;      // bytes it copies
};

struct ChunkPlan {
  std::vector<PlannedSegment> hits;  // cached lists: no copy
  std::vector<PlannedGroup> groups;  // in order
  int64_t hit_lists = 0, missed_lists = 0;
  // Probes, i.e. (query, list) pairs: how much of the chunk's work each side served.
  int64_t hit_probes = 0, missed_probes = 0;
  std::size_t streamed_bytes = 0;
};

class StreamPlanner {
 public:
  // Placements start on this boundary (16-byte loads need 16; 256 keeps lists apart).
  static constexpr std::size_t kPlace = 256;
  static std::size_t place(std::size_t n) { return (n + kPlace - 1) / kPlace * kPlace; }

  StreamPlanner(std::size_t cache_bytes, std::size_t ring_slot, int64_t nlist);

  // The plan of one chunk: pair_counts[l] = queries of the chunk probing list l. need_ids: the
  // scan reads ids (a filter), so ring pieces carry them (cached lists always hold them).
  ChunkPlan plan(const int32_t* pair_counts, const TierStore& store, bool need_ids);

  // The plan was not carried out (a failure before its copies were queued): forget the lists it
  // admitted, so no later chunk takes their unfilled cache space for a hit.
  void abandon(const ChunkPlan& plan);

  int64_t resident_lists() const { return resident_lists_; }
  std::size_t resident_bytes() const { return resident_bytes_; }
  std::size_t ring_slot() const { return slot_; }

 private:
  struct Entry {
    bool used = false;
    uint64_t serial = 0;
    int64_t rows = 0;
    std::size_t off = 0, bytes = 0, ids_off = 0;
    uint64_t last_chunk = 0;
  };

  double score(int64_t l) const;
  bool admit(int64_t l, std::size_t bytes, std::size_t* off);
  void evict(int64_t l);
  PlannedGroup& group_with_room(ChunkPlan& plan, std::size_t ring_bytes, std::size_t volume) const;

  std::size_t cache_bytes_, slot_;
  RangeMap free_;
  std::vector<Entry> entries_;      // per list
  std::vector<double> score_;       // decayed probe counts, as of last_seen_
  std::vector<uint64_t> last_seen_;
  uint64_t chunk_ = 0;
  std::vector<std::pair<double, int64_t>> victims_;  // this chunk's eviction order
  std::size_t next_victim_ = 0;
  int64_t resident_lists_ = 0;
  std::size_t resident_bytes_ = 0;
};

}  // namespace ivfgpu::tier
