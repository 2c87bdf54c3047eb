#include "stream_plan.hpp"

#include <algorithm>
#include <cmath>

namespace ivfgpu::tier {

namespace {
// A probe count loses half its weight after this many chunks (the cache's memory of the past).
constexpr double kHalfLife = 16.0;
}  // namespace

StreamPlanner::StreamPlanner(std::size_t cache_bytes, std::size_t ring_slot, int64_t nlist)
    : cache_bytes_(cache_bytes), slot_(ring_slot), free_(cache_bytes), entries_(static_cast<std::size_t>(nlist)),
      score_(static_cast<std::size_t>(nlist), 0.0), last_seen_(static_cast<std::size_t>(nlist), 0) {}

double StreamPlanner::score(int64_t l) const {
  return score_[l] * std::exp2(-static_cast<double>(chunk_ - last_seen_[l]) / kHalfLife);
}

void StreamPlanner::evict(int64_t l) {
  Entry& e = entries_[l];
  if (!e.used) return;
  free_.give(e.off, e.bytes);
  --resident_lists_;
  resident_bytes_ -= e.bytes;
  e = Entry{};
}

// Admission: a missed list takes free cache space, or the space of colder lists that this chunk
// does not probe (evicted coldest first); a list colder than every candidate victim stays out.
bool StreamPlanner::admit(int64_t l, std::size_t bytes, std::size_t* off) {
  if (bytes > cache_bytes_) return false;
  evict(l);  // a stale copy of this list (an older block, or fewer rows)
  const double mine = score(l);
  while (!free_.take(bytes, off)) {
    // The coldest cached list not probed by this chunk (victims_ is in that order), if colder.
    while (next_victim_ < victims_.size()) {
      const Entry& e = entries_[victims_[next_victim_].second];
      if (e.used && e.last_chunk != chunk_) break;
      ++next_victim_;  // evicted already, or (re)admitted by this chunk
    }
    if (next_victim_ == victims_.size() || victims_[next_victim_].first >= mine) return false;
    evict(victims_[next_victim_++].second);
  }
  return true;
}

void StreamPlanner::abandon(const ChunkPlan& plan) {
  for (const PlannedGroup& g : plan.groups)
    for (const PlannedSegment& s : g.segments)
      if (s.region == Region::Cache) evict(s.list);
}

PlannedGroup& StreamPlanner::group_with_room(ChunkPlan& plan, std::size_t ring_bytes, std::size_t volume) const {
  if (plan.groups.empty() || plan.groups.back().ring_used + ring_bytes > slot_ ||
      (plan.groups.back().volume > 0 && plan.groups.back().volume + volume > slot_)) {
    plan.groups.emplace_back();
    plan.groups.back().slot = static_cast<int>((plan.groups.size() - 1) % 2);
  }
  return plan.groups.back();
}

ChunkPlan StreamPlanner::plan(const int32_t* pair_counts, const TierStore& store, bool need_ids) {
  ++chunk_;
  const int64_t nlist = store.nlist();
  const std::size_t row_bytes = store.row_bytes();
  ChunkPlan plan;
  std::vector<int64_t> misses;
  for (int64_t l = 0; l < nlist; ++l) {
    const TierList& t = store.list(l);
    if (pair_counts[l] == 0 || t.size == 0) continue;
    score_[l] = score(l) + pair_counts[l];
    last_seen_[l] = chunk_;
    Entry& e = entries_[l];
    // Rows below a state's size never change within a block: more cached rows than this state
    // holds (cached for a newer state after an add) still serve it.
    if (e.used && e.serial == t.serial && e.rows >= t.size) {
      e.last_chunk = chunk_;
      plan.hits.push_back(PlannedSegment{l, 0, t.size, Region::Cache, e.off, e.ids_off, true});
      plan.hit_probes += pair_counts[l];
    } else {
      misses.push_back(l);
      plan.missed_probes += pair_counts[l];
    }
  }
  plan.hit_lists = static_cast<int64_t>(plan.hits.size());
  // Eviction candidates, coldest first (ties: lower list first): the cached lists this chunk
  // does not hit. Their scores do not change while the chunk is planned, so one sort serves
  // every admission (instead of a scan over all lists per eviction).
  victims_.clear();
  next_victim_ = 0;
  for (std::size_t v = 0; v < entries_.size(); ++v)
    if (entries_[v].used && entries_[v].last_chunk != chunk_)
      victims_.emplace_back(score(static_cast<int64_t>(v)), static_cast<int64_t>(v));
  std::sort(victims_.begin(), victims_.end());
  plan.missed_lists = static_cast<int64_t>(misses.size());
  // The hottest misses are offered to the cache first.
  std::stable_sort(misses.begin(), misses.end(), [&](int64_t a, int64_t b) { return score_[a] > score_[b]; });

  for (int64_t l : misses) {
    const TierList& t = store.list(l);
    const std::size_t rows_bytes = static_cast<std::size_t>(t.size) * row_bytes;
    const std::size_t ids_bytes = static_cast<std::size_t>(t.size) * sizeof(int64_t);
    const std::size_t entry_bytes = place(rows_bytes) + place(ids_bytes);
    std::size_t off = 0;
    if (admit(l, entry_bytes, &off)) {
      // Straight into the cache: scanned there from this chunk on.
      Entry& e = entries_[l];
      e = Entry{true, t.serial, t.size, off, entry_bytes, off + place(rows_bytes), chunk_};
      ++resident_lists_;
      resident_bytes_ += entry_bytes;
      PlannedGroup& g = group_with_room(plan, 0, rows_bytes + ids_bytes);
      g.copies.push_back(PlannedCopy{t.rows, Region::Cache, e.off, rows_bytes});
      g.copies.push_back(PlannedCopy{t.ids, Region::Cache, e.ids_off, ids_bytes});
      g.segments.push_back(PlannedSegment{l, 0, t.size, Region::Cache, e.off, e.ids_off, true});
      g.volume += rows_bytes + ids_bytes;
      plan.streamed_bytes += rows_bytes + ids_bytes;
      continue;
    }
    // Through the ring, in pieces that fit a slot.
    const std::size_t per_row = row_bytes + (need_ids ? sizeof(int64_t) : 0);
    const int64_t piece_rows = std::max<int64_t>(1, static_cast<int64_t>((slot_ - 2 * kPlace) / per_row));
    for (int64_t r0 = 0; r0 < t.size; r0 += piece_rows) {
      const int64_t count = std::min(piece_rows, t.size - r0);
      const std::size_t pr = static_cast<std::size_t>(count) * row_bytes;
      const std::size_t pi = need_ids ? static_cast<std::size_t>(count) * sizeof(int64_t) : 0;
      const std::size_t need = place(pr) + place(pi);
      PlannedGroup& g = group_with_room(plan, need, pr + pi);
      const std::size_t at = static_cast<std::size_t>(g.slot) * slot_ + g.ring_used;
      g.copies.push_back(PlannedCopy{t.rows + static_cast<std::size_t>(r0) * row_bytes, Region::Ring, at, pr});
      if (need_ids) g.copies.push_back(PlannedCopy{t.ids + r0, Region::Ring, at + place(pr), pi});
      g.segments.push_back(PlannedSegment{l, r0, count, Region::Ring, at, at + place(pr), need_ids});
      g.ring_used += need;
      g.volume += pr + pi;
      plan.streamed_bytes += pr + pi;
    }
  }
  return plan;
}

}  // namespace ivfgpu::tier
