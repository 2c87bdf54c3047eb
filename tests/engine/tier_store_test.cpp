// The host tier's store and arenas on plain heap memory (the CUDA backend gives them pinned
// memory): sharing between states, growth that copies only the grown lists, removes that copy
// only the touched lists, block reuse, and (serial, size) naming a list's content.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "core/errors.hpp"
#include "core/host_model.hpp"
#include "core/tier/host_arena.hpp"
#include "core/tier/range_map.hpp"
#include "core/tier/tier_store.hpp"

using namespace ivfgpu;
using namespace ivfgpu::tier;

namespace {

// The rows of every list as (id, first element) pairs, in list order.
std::vector<std::vector<std::pair<int64_t, float>>> contents(const TierStore& s) {
  std::vector<std::vector<std::pair<int64_t, float>>> out(static_cast<std::size_t>(s.nlist()));
  for (int64_t l = 0; l < s.nlist(); ++l)
    for (int64_t r = 0; r < s.list(l).size; ++r)
      out[l].emplace_back(s.list(l).ids[r], reinterpret_cast<const float*>(s.list(l).rows)[r * s.dim()]);
  return out;
}

}  // namespace

TEST(RangeMap, FirstFitAndCoalescing) {
  RangeMap m(100);
  std::size_t a = 0, b = 0, c = 0;
  ASSERT_TRUE(m.take(30, &a));
  ASSERT_TRUE(m.take(30, &b));
  ASSERT_TRUE(m.take(40, &c));
  std::size_t d = 0;
  EXPECT_FALSE(m.take(1, &d));
  m.give(a, 30);
  m.give(c, 40);
  EXPECT_FALSE(m.take(50, &d));  // two holes of 30 and 40, not adjacent
  m.give(b, 30);                 // now one range of 100
  ASSERT_TRUE(m.take(100, &d));
  EXPECT_EQ(d, 0u);
}

TEST(HostArenas, BlocksComeBackAndArenasAreNotCopied) {
  auto arenas = std::make_shared<HostArenas>(heap_memory(), std::size_t{4} << 20);
  auto a = arenas->allocate(1000);
  auto b = arenas->allocate(3000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->host) % 64, 0u);
  EXPECT_EQ(arenas->reserved_bytes(), std::size_t{4} << 20);
  const char* where = a->host;
  a.reset();
  auto c = arenas->allocate(1000);  // first fit: a's range again
  EXPECT_EQ(c->host, where);
  // A request larger than an arena gets an arena of its own; the first stays where it is.
  auto big = arenas->allocate(std::size_t{9} << 20);
  EXPECT_GE(arenas->reserved_bytes(), (std::size_t{4} << 20) + (std::size_t{9} << 20));
  EXPECT_EQ(c->host, where);
  big.reset();
  arenas->trim();
  EXPECT_EQ(arenas->reserved_bytes(), std::size_t{4} << 20);
}

TEST(TierStore, AppendSharesUntouchedListsAndGrowsOnlyWhatOverflows) {
  auto arenas = std::make_shared<HostArenas>(heap_memory(), std::size_t{2} << 20);
  const int64_t dim = 3, nlist = 4;
  auto s0 = TierStore::empty(arenas, dim, ElementType::F32, nlist);
  std::vector<float> x(12 * dim);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i / dim);
  std::vector<int64_t> ids(12), lists(12);
  std::iota(ids.begin(), ids.end(), 100);
  for (int i = 0; i < 12; ++i) lists[i] = i % 3;  // list 3 stays empty
  auto s1 = s0->append(x.data(), ids.data(), lists.data(), 12, 2);
  EXPECT_EQ(s1->ntotal(), 12);
  EXPECT_EQ(s0->ntotal(), 0);
  EXPECT_EQ(s1->list(0).size, 4);
  EXPECT_EQ(s1->list(3).block, nullptr);
  // In input order within a list.
  const auto c1 = contents(*s1);
  EXPECT_EQ(c1[1][0], std::make_pair(int64_t{101}, 1.0f));
  EXPECT_EQ(c1[1][3], std::make_pair(int64_t{110}, 10.0f));
  // One more row for list 0: it fits the spare room, so the block is shared and s1 unchanged.
  int64_t one_id = 7, one_list = 0;
  std::vector<float> one(dim, 42.0f);
  auto s2 = s1->append(one.data(), &one_id, &one_list, 1, 1);
  EXPECT_EQ(s2->list(0).block, s1->list(0).block);
  EXPECT_EQ(s2->list(0).serial, s1->list(0).serial);
  EXPECT_EQ(s1->list(0).size, 4);
  EXPECT_EQ(s2->list(0).size, 5);
  EXPECT_EQ(contents(*s1), c1);
  // Overflow list 2 only: it gets a new block (new serial); lists 0 and 1 keep theirs.
  std::vector<float> many(100 * dim, 5.0f);
  std::vector<int64_t> many_ids(100, 9), many_lists(100, 2);
  auto s3 = s2->append(many.data(), many_ids.data(), many_lists.data(), 100, 2);
  EXPECT_NE(s3->list(2).block, s2->list(2).block);
  EXPECT_NE(s3->list(2).serial, s2->list(2).serial);
  EXPECT_EQ(s3->list(1).block, s2->list(1).block);
  EXPECT_EQ(s3->list(2).size, 104);
  EXPECT_GE(s3->list(2).cap, 104);
  EXPECT_EQ(contents(*s3)[2][3], c1[2][3]);
  EXPECT_EQ(contents(*s2)[2].size(), 4u);
}

TEST(TierStore, RemoveCopiesOnlyTheListsItTouches) {
  auto arenas = std::make_shared<HostArenas>(heap_memory(), std::size_t{2} << 20);
  const int64_t dim = 2, nlist = 3;
  std::vector<float> x(30 * dim);
  std::vector<int64_t> ids(30), lists(30);
  for (int i = 0; i < 30; ++i) {
    x[i * dim] = static_cast<float>(i);
    ids[i] = i % 10;  // repeated ids
    lists[i] = i % 3;
  }
  auto s = TierStore::empty(arenas, dim, ElementType::F32, nlist)->append(x.data(), ids.data(), lists.data(), 30, 2);
  // Id 3 appears at rows 3, 13, 23 -> lists 0, 1, 2; id 0 at rows 0, 10, 20 -> lists 0, 1, 2.
  auto [r, n] = s->remove_if([](int64_t id) { return id == 4; }, 2);  // rows 4, 14, 24: lists 1, 2, 0
  EXPECT_EQ(n, 3);
  EXPECT_EQ(r->ntotal(), 27);
  for (int64_t l = 0; l < nlist; ++l) EXPECT_NE(r->list(l).block, s->list(l).block);
  auto [r2, n2] = r->remove_if([](int64_t id) { return id == 12345; }, 2);
  EXPECT_EQ(n2, 0);
  for (int64_t l = 0; l < nlist; ++l) EXPECT_EQ(r2->list(l).block, r->list(l).block);
  // Removing every row of one list leaves it empty (no block).
  auto [r3, n3] = r->remove_if([](int64_t id) { return id % 3 == 0 || id % 3 == 1 || id % 3 == 2; }, 1);
  EXPECT_EQ(n3, 27);
  EXPECT_EQ(r3->ntotal(), 0);
  EXPECT_EQ(r3->list(0).block, nullptr);
  // The old state still reads its rows.
  EXPECT_EQ(s->ntotal(), 30);
  EXPECT_EQ(contents(*s)[1][1].second, 4.0f);
}

TEST(TierStore, FromModelAdoptsTheArraysAndExportsThemBack) {
  auto arenas = std::make_shared<HostArenas>(heap_memory());
  HostModel m = HostModel::empty(2, Metric::L2, 3);
  m.list_offsets = {0, 2, 2, 5};
  m.vectors = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};
  m.ids = {10, 11, 12, 13, 14};
  const float* data = m.vectors.data();
  auto s = TierStore::from_model(arenas, m);
  EXPECT_EQ(reinterpret_cast<const float*>(s->list(0).rows), data);  // no copy
  EXPECT_EQ(s->list(1).size, 0);
  EXPECT_EQ(s->list(2).ids[2], 14);
  EXPECT_NE(s->list(0).serial, s->list(2).serial);
  HostModel out = HostModel::empty(2, Metric::L2, 3);
  s->export_lists(out);
  EXPECT_EQ(out.list_offsets, (std::vector<int64_t>{0, 2, 2, 5}));
  EXPECT_EQ(out.vectors, (std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(out.ids, (std::vector<int64_t>{10, 11, 12, 13, 14}));
  // Adding to an adopted list moves it into an arena block; the others stay adopted.
  float row[2] = {9, 9};
  int64_t id = 99, list = 2;
  auto t = s->append(row, &id, &list, 1, 1);
  EXPECT_NE(t->list(2).rows, s->list(2).rows);
  EXPECT_EQ(t->list(0).rows, s->list(0).rows);
  EXPECT_EQ(t->list(2).size, 4);
}

TEST(TierStore, OutOfHostMemoryChangesNothing) {
  struct Failing final : HostMemory {
    int left = 1;
    void* allocate(std::size_t bytes, void** device) override {
      if (left-- <= 0) fail(Errc::OutOfHostMemory, "test: no more host memory");
      *device = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
      return *device;
    }
    void release(void* p) noexcept override { std::free(p); }
    void register_range(void* p, std::size_t, void** device) override { *device = p; }
    void unregister_range(void*) noexcept override {}
  };
  auto arenas = std::make_shared<HostArenas>(std::make_shared<Failing>(), std::size_t{2} << 20);
  const int64_t dim = 4;
  auto s = TierStore::empty(arenas, dim, ElementType::F32, 2);
  std::vector<float> x(10 * dim, 1.0f);
  std::vector<int64_t> ids(10, 1), lists(10, 0);
  s = s->append(x.data(), ids.data(), lists.data(), 10, 1);
  // Needs a block bigger than the one arena: a second arena, which fails.
  std::vector<float> big(200000 * dim, 2.0f);
  std::vector<int64_t> big_ids(200000, 2), big_lists(200000, 1);
  try {
    s->append(big.data(), big_ids.data(), big_lists.data(), 200000, 1);
    FAIL() << "expected out of host memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::OutOfHostMemory);
  }
  EXPECT_EQ(s->ntotal(), 10);
  EXPECT_EQ(s->list(1).size, 0);
}
