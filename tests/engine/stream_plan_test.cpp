// The host tier's streaming plan executed with memcpy (the CUDA backend runs the same plan with
// cudaMemcpyAsync and the scan): every probed row is scanned exactly once, from memory holding
// exactly that row, and no copy overwrites what a scan it may overlap still reads. Overlap is
// modelled as the device allows it: group g+1's copies may run during group g's scan, and
// every copy of a chunk may run during the scan of its cache hits.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/tier/host_arena.hpp"
#include "core/tier/stream_plan.hpp"
#include "core/tier/tier_store.hpp"

using namespace ivfgpu;
using namespace ivfgpu::tier;

namespace {

struct Device {
  std::vector<char> cache, ring;
  char* at(Region r, std::size_t off) { return (r == Region::Cache ? cache.data() : ring.data()) + off; }
};

// The rows (and ids) a segment should see, compared with the bytes at its placement.
std::string check_segment(Device& d, const TierStore& store, const PlannedSegment& s) {
  const TierList& t = store.list(s.list);
  if (s.row0 < 0 || s.count <= 0 || s.row0 + s.count > t.size) return "segment outside its list";
  const std::size_t rb = store.row_bytes();
  if (std::memcmp(d.at(s.region, s.rows_at), t.rows + s.row0 * rb, s.count * rb) != 0)
    return "rows of list " + std::to_string(s.list) + " from " + std::to_string(s.row0) + " differ";
  if (s.has_ids && std::memcmp(d.at(s.region, s.ids_at), t.ids + s.row0, s.count * sizeof(int64_t)) != 0)
    return "ids of list " + std::to_string(s.list) + " differ";
  if (s.rows_at % 16 != 0) return "a placement off the 16-byte boundary";
  return "";
}

// Runs one plan; returns "" or the first violation.
std::string execute(Device& d, const TierStore& store, const ChunkPlan& plan, const int32_t* counts, bool need_ids,
                    std::size_t slot, std::size_t cache_bytes) {
  // Coverage: every row of every probed non-empty list exactly once.
  std::map<int64_t, std::vector<int>> seen;
  auto note = [&](const PlannedSegment& s) {
    auto& v = seen[s.list];
    v.resize(static_cast<std::size_t>(store.list(s.list).size), 0);
    for (int64_t r = s.row0; r < s.row0 + s.count && r < static_cast<int64_t>(v.size()); ++r) ++v[r];
  };
  for (const auto& s : plan.hits) note(s);
  for (const auto& g : plan.groups)
    for (const auto& s : g.segments) note(s);
  for (int64_t l = 0; l < store.nlist(); ++l) {
    const bool probed = counts[l] > 0 && store.list(l).size > 0;
    if (probed != (seen.count(l) != 0)) return "list " + std::to_string(l) + " probed but not planned, or the reverse";
    if (!probed) continue;
    for (int c : seen[l])
      if (c != 1) return "list " + std::to_string(l) + ": a row scanned " + std::to_string(c) + " times";
  }
  // Placements inside their region and slot; groups alternate slots; filters get ids.
  for (std::size_t gi = 0; gi < plan.groups.size(); ++gi) {
    const PlannedGroup& g = plan.groups[gi];
    if (g.slot != static_cast<int>(gi % 2)) return "groups do not alternate slots";
    for (const auto& c : g.copies) {
      const std::size_t lo = c.region == Region::Ring ? g.slot * slot : 0;
      const std::size_t hi = c.region == Region::Ring ? lo + slot : cache_bytes;
      if (c.at < lo || c.at + c.bytes > hi) return "a copy outside its slot or the cache";
    }
    for (const auto& s : g.segments)
      if (need_ids && !s.has_ids) return "a filtered scan without ids";
  }
  // Execution in the order the device may overlap it.
  auto run_copies = [&](std::size_t gi) {
    for (const auto& c : plan.groups[gi].copies) std::memcpy(d.at(c.region, c.at), c.src, c.bytes);
  };
  if (!plan.groups.empty()) run_copies(0);
  for (std::size_t gi = 0; gi < plan.groups.size(); ++gi) {
    if (gi + 1 < plan.groups.size()) run_copies(gi + 1);  // may run during group gi's scan
    for (const auto& s : plan.groups[gi].segments) {
      const std::string e = check_segment(d, store, s);
      if (!e.empty()) return "group " + std::to_string(gi) + ": " + e;
    }
  }
  for (const auto& s : plan.hits) {  // every copy may have run during the hits' scan
    const std::string e = check_segment(d, store, s);
    if (!e.empty()) return "hit: " + e;
  }
  return "";
}

TierStore::Ptr filled(std::shared_ptr<HostArenas> arenas, int64_t dim, const std::vector<int64_t>& sizes,
                      std::mt19937_64& rng) {
  const int64_t nlist = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> lists;
  for (int64_t l = 0; l < nlist; ++l) lists.insert(lists.end(), static_cast<std::size_t>(sizes[l]), l);
  std::shuffle(lists.begin(), lists.end(), rng);
  const int64_t n = static_cast<int64_t>(lists.size());
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<int64_t> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) id = static_cast<int64_t>(rng() >> 1);
  return TierStore::empty(arenas, dim, ElementType::F32, nlist)->append(x.data(), ids.data(), lists.data(), n, 2);
}

}  // namespace

// Random skewed chunks over a store that changes between them (adds that fit, adds that grow a
// list into a new block, removes), with lists larger than a ring slot, with and without ids.
TEST(StreamPlan, EveryRowOnceFromTheRightBytesWhateverTheCacheHolds) {
  std::mt19937_64 rng(5);
  auto arenas = std::make_shared<HostArenas>(heap_memory(), std::size_t{8} << 20);
  const int64_t dim = 24, nlist = 40;  // rows of 96 bytes
  std::vector<int64_t> sizes(static_cast<std::size_t>(nlist));
  for (int64_t l = 0; l < nlist; ++l) sizes[l] = l == 3 ? 30000 : (l % 7 == 0 ? 0 : 50 + (rng() % 3000));
  for (std::size_t cache_bytes : {std::size_t{0}, std::size_t{300} << 10, std::size_t{4} << 20}) {
    TierStore::Ptr store = filled(arenas, dim, sizes, rng);
    const std::size_t slot = std::size_t{256} << 10;  // list 3 (2.9 MB) needs pieces
    StreamPlanner planner(cache_bytes, slot, nlist);
    Device d{std::vector<char>(cache_bytes + 1), std::vector<char>(2 * slot)};
    std::vector<double> w(static_cast<std::size_t>(nlist));
    for (int64_t l = 0; l < nlist; ++l) w[l] = 1.0 / std::pow(double(l + 1), 1.1);
    std::discrete_distribution<int64_t> zipf(w.begin(), w.end());
    int64_t hits = 0;
    for (int chunk = 0; chunk < 60; ++chunk) {
      std::vector<int32_t> counts(static_cast<std::size_t>(nlist), 0);
      const int probes = 1 + static_cast<int>(rng() % 200);
      for (int i = 0; i < probes; ++i) ++counts[zipf(rng)];
      const bool need_ids = rng() % 3 == 0;
      const ChunkPlan plan = planner.plan(counts.data(), *store, need_ids);
      hits += plan.hit_lists;
      ASSERT_EQ(execute(d, *store, plan, counts.data(), need_ids, slot, cache_bytes), "")
          << "cache " << cache_bytes << " chunk " << chunk;
      ASSERT_LE(planner.resident_bytes(), cache_bytes);
      // Change the store now and then: an older state keeps being searched too.
      if (chunk % 9 == 4) {
        std::vector<float> x(50 * dim, 0.5f);
        std::vector<int64_t> ids(50, 7), lists(50);
        for (auto& l : lists) l = static_cast<int64_t>(rng() % nlist);
        store = store->append(x.data(), ids.data(), lists.data(), 50, 1);
      }
      if (chunk % 13 == 8) {
        const int64_t residue = chunk % 11;
        const auto removed = store->remove_if([&](int64_t id) { return id % 11 == residue; }, 2);
        ASSERT_GT(removed.second, 0);
        store = removed.first;
      }
    }
    if (cache_bytes >= (std::size_t{4} << 20)) EXPECT_GT(hits, 0);
    if (cache_bytes == 0) EXPECT_EQ(hits, 0);
  }
}

// A skewed stream keeps the hot lists: after warm-up most probes hit.
TEST(StreamPlan, TheHotListsStayCached) {
  std::mt19937_64 rng(6);
  auto arenas = std::make_shared<HostArenas>(heap_memory(), std::size_t{8} << 20);
  const int64_t dim = 16, nlist = 200;
  TierStore::Ptr store = filled(arenas, dim, std::vector<int64_t>(nlist, 500), rng);  // 32 KB + 4 KB ids each
  const std::size_t entry = StreamPlanner::place(500 * 64) + StreamPlanner::place(500 * 8);
  StreamPlanner planner(40 * entry, std::size_t{1} << 20, nlist);  // room for 40 of 200 lists
  std::vector<double> w(static_cast<std::size_t>(nlist));
  for (int64_t l = 0; l < nlist; ++l) w[l] = 1.0 / std::pow(double(l + 1), 1.1);
  std::discrete_distribution<int64_t> zipf(w.begin(), w.end());
  int64_t hits = 0, probed = 0;
  for (int chunk = 0; chunk < 200; ++chunk) {
    std::vector<int32_t> counts(static_cast<std::size_t>(nlist), 0);
    for (int i = 0; i < 20; ++i) ++counts[zipf(rng)];
    const ChunkPlan plan = planner.plan(counts.data(), *store, false);
    if (chunk >= 50) {
      hits += plan.hit_lists;
      probed += plan.hit_lists + plan.missed_lists;
    }
  }
  EXPECT_EQ(planner.resident_lists(), 40);
  // The 40 hottest of 200 lists under Zipf(1.1) draw about 70% of the probes.
  EXPECT_GT(double(hits) / double(probed), 0.5) << hits << " of " << probed;
}

// A list larger than the whole cache is never admitted; it streams through the ring.
TEST(StreamPlan, ListsLargerThanTheCacheStream) {
  std::mt19937_64 rng(7);
  auto arenas = std::make_shared<HostArenas>(heap_memory(), std::size_t{8} << 20);
  TierStore::Ptr store = filled(arenas, 32, {10000, 10}, rng);  // 1.28 MB and 1.3 KB
  StreamPlanner planner(std::size_t{64} << 10, std::size_t{128} << 10, 2);
  const int32_t counts[2] = {3, 3};
  const ChunkPlan plan = planner.plan(counts, *store, true);
  EXPECT_EQ(planner.resident_lists(), 1);
  int64_t ring_segments = 0;
  for (const auto& g : plan.groups)
    for (const auto& s : g.segments) ring_segments += s.region == Region::Ring ? 1 : 0;
  EXPECT_GE(ring_segments, 10);  // 1.36 MB with ids through 128 KB slots
  Device d{std::vector<char>(std::size_t{64} << 10), std::vector<char>(std::size_t{256} << 10)};
  EXPECT_EQ(execute(d, *store, plan, counts, true, std::size_t{128} << 10, std::size_t{64} << 10), "");
}

// A plan that was not carried out leaves no hit behind on cache space nothing filled.
TEST(StreamPlan, AnAbandonedPlanAdmitsNothing) {
  std::mt19937_64 rng(8);
  auto arenas = std::make_shared<HostArenas>(heap_memory(), std::size_t{8} << 20);
  TierStore::Ptr store = filled(arenas, 8, {100, 200, 300}, rng);
  StreamPlanner planner(std::size_t{1} << 20, std::size_t{64} << 10, 3);
  const int32_t counts[3] = {1, 1, 1};
  const ChunkPlan first = planner.plan(counts, *store, false);
  EXPECT_EQ(planner.resident_lists(), 3);
  planner.abandon(first);
  EXPECT_EQ(planner.resident_lists(), 0);
  EXPECT_EQ(planner.resident_bytes(), 0u);
  const ChunkPlan second = planner.plan(counts, *store, false);
  EXPECT_EQ(second.hit_lists, 0);
  Device d{std::vector<char>(std::size_t{1} << 20), std::vector<char>(std::size_t{128} << 10)};
  EXPECT_EQ(execute(d, *store, second, counts, false, std::size_t{64} << 10, std::size_t{1} << 20), "");
}
