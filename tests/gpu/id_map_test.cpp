// The device id map (core/cuda/id_map.hpp) and id sets (core/cuda/id_set.hpp) against
// std::unordered_map / std::unordered_set: every load factor up to 1.0, all-hit and all-miss
// batches, adversarial ids, duplicates, erase, clone, growth, out of memory, and every lookup
// kernel forced. Skips where no CUDA device is usable.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/backend.hpp"
#include "core/cuda/device_buffer.hpp"
#include "core/cuda/device_context.hpp"
#include "core/cuda/id_map.hpp"
#include "core/cuda/id_set.hpp"
#include "core/errors.hpp"

namespace {

using ivfgpu::cuda::DeviceBuffer;
using ivfgpu::cuda::DeviceContext;
using ivfgpu::cuda::FindKernel;
using ivfgpu::cuda::IdFilterKind;
using ivfgpu::cuda::IdMap;
using ivfgpu::cuda::IdSet;
using Ref = std::unordered_map<int64_t, int64_t>;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
const FindKernel kKernels[] = {FindKernel::Auto, FindKernel::ThreadPerKey, FindKernel::WarpPerKey,
                               FindKernel::WarpPipelined};

// Distinct random ids over the whole int64 range (never -1), none of them in `avoid`.
std::vector<int64_t> random_ids(std::size_t n, uint64_t seed, const Ref& avoid = {}) {
  std::mt19937_64 rng(seed);
  std::unordered_set<int64_t> seen;
  std::vector<int64_t> out;
  while (out.size() < n) {
    const int64_t k = static_cast<int64_t>(rng());
    if (k == -1 || avoid.count(k) || !seen.insert(k).second) continue;
    out.push_back(k);
  }
  return out;
}

class IdMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (ivfgpu::cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device: GPU test skipped";
    ctx_ = std::make_unique<DeviceContext>(0);
    ASSERT_EQ(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (s_ != nullptr) {
      EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
      cudaStreamDestroy(s_);
    }
    ctx_.reset();
  }

  template <typename T>
  DeviceBuffer<T> upload(const std::vector<T>& h) {
    DeviceBuffer<T> d(*ctx_, h.size(), s_);
    if (!h.empty()) {
      EXPECT_EQ(cudaMemcpyAsync(d.data(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s_), cudaSuccess);
    }
    return d;
  }
  template <typename T>
  std::vector<T> download(const T* d, std::size_t n) {
    std::vector<T> h(n);
    if (n) {
      EXPECT_EQ(cudaMemcpyAsync(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost, s_), cudaSuccess);
    }
    EXPECT_EQ(cudaStreamSynchronize(s_), cudaSuccess);
    return h;
  }

  void insert(IdMap& m, const std::vector<int64_t>& keys, const std::vector<int64_t>& values, Ref& ref) {
    auto dk = upload(keys), dv = upload(values);
    m.insert(dk.data(), dv.data(), static_cast<int64_t>(keys.size()), s_);
    for (std::size_t i = 0; i < keys.size(); ++i) ref[keys[i]] = values[i];
  }

  int64_t erase(IdMap& m, const std::vector<int64_t>& keys, Ref& ref) {
    auto dk = upload(keys);
    DeviceBuffer<int64_t> count(*ctx_, 1, s_);
    m.erase(dk.data(), static_cast<int64_t>(keys.size()), s_, count.data());
    for (int64_t k : keys) ref.erase(k);
    return download(count.data(), 1)[0];
  }

  // Looks `queries` up with `kernel` and compares with `ref`: the count of wrong answers.
  int64_t mismatches(const IdMap& m, const Ref& ref, const std::vector<int64_t>& queries, FindKernel kernel,
                     std::string* first) {
    auto dq = upload(queries);
    DeviceBuffer<int64_t> values(*ctx_, queries.size(), s_);
    DeviceBuffer<uint8_t> found(*ctx_, queries.size(), s_);
    m.find(dq.data(), static_cast<int64_t>(queries.size()), values.data(), found.data(), s_, kernel);
    const auto v = download(values.data(), queries.size());
    const auto f = download(found.data(), queries.size());
    int64_t bad = 0;
    for (std::size_t i = 0; i < queries.size(); ++i) {
      const auto it = ref.find(queries[i]);
      const bool want = it != ref.end();
      const int64_t want_v = want ? it->second : -1;
      if ((f[i] != 0) != want || v[i] != want_v || f[i] > 1) {
        if (bad++ == 0 && first)
          *first = "key " + std::to_string(queries[i]) + ": found " + std::to_string(int(f[i])) + " value " +
                   std::to_string(v[i]) + ", want " + std::to_string(want) + " " + std::to_string(want_v);
      }
    }
    return bad;
  }

  // Every kernel, on `queries`.
  void expect_lookups(const IdMap& m, const Ref& ref, const std::vector<int64_t>& queries, const std::string& what) {
    for (FindKernel k : kKernels) {
      std::string first;
      EXPECT_EQ(mismatches(m, ref, queries, k, &first), 0)
          << what << ", kernel " << ivfgpu::cuda::find_kernel_name(k) << ": " << first;
    }
  }

  // All-hit (shuffled keys) and all-miss batches.
  void expect_hits_and_misses(const IdMap& m, const Ref& ref, uint64_t seed, const std::string& what) {
    std::vector<int64_t> hits;
    hits.reserve(ref.size());
    for (const auto& kv : ref) hits.push_back(kv.first);
    std::shuffle(hits.begin(), hits.end(), std::mt19937_64(seed));
    expect_lookups(m, ref, hits, what + " all-hit");
    std::vector<int64_t> misses = random_ids(std::max<std::size_t>(ref.size(), 1000), seed + 1, ref);
    misses.push_back(-1);
    expect_lookups(m, ref, misses, what + " all-miss");
  }

  std::unique_ptr<DeviceContext> ctx_;
  cudaStream_t s_ = nullptr;
};

TEST_F(IdMapTest, LookupsMatchTheReferenceAtEveryLoadFactor) {
  const int64_t slots = 2048 * 32;
  for (double lf : {0.25, 0.5, 0.75, 0.875, 1.0}) {
    IdMap m(*ctx_, slots, 1.0, s_);
    ASSERT_EQ(m.capacity(), slots);
    const auto n = static_cast<std::size_t>(lf * slots);
    const auto keys = random_ids(n, 100 + n);
    std::vector<int64_t> values(n);
    std::mt19937_64 rng(7);
    for (auto& v : values) v = static_cast<int64_t>(rng());
    Ref ref;
    insert(m, keys, values, ref);
    const std::string what = "load " + std::to_string(lf);
    EXPECT_EQ(m.capacity(), slots) << what << ": no growth below the maximum load factor";
    EXPECT_EQ(m.size(), static_cast<int64_t>(n)) << what;
    EXPECT_NEAR(m.load_factor(), lf, 1e-9) << what;
    if (lf == 1.0) {
      EXPECT_GT(m.overflow_count(), 0) << "load 1.0 must exercise the overflow level";
    }
    expect_hits_and_misses(m, ref, 11, what);
  }
}

TEST_F(IdMapTest, AdversarialIdsAtFullLoad) {
  const int64_t n = 256 * 32;  // exactly the capacity: load factor 1.0
  std::vector<std::pair<std::string, std::vector<int64_t>>> sets;
  std::vector<int64_t> seq(n), high(n), neg(n), mixed;
  for (int64_t i = 0; i < n; ++i) {
    seq[i] = i;                                             // sequential
    high[i] = (i - n / 2) * (int64_t(1) << 32);             // equal low 32 bits (0), both signs
    neg[i] = -2 - i * 7919;                                 // negative, never -1
  }
  mixed = {kMin, kMin + 1, kMax, kMax - 1, -2, 0, 1, int64_t(1) << 62, -(int64_t(1) << 62), int64_t(1) << 32};
  for (int64_t i = 0; (int64_t)mixed.size() < n; ++i) mixed.push_back(kMin + 2 + i * (int64_t(1) << 40));
  sets = {{"sequential", seq}, {"same low bits", high}, {"negative", neg}, {"extremes", mixed}};
  for (const auto& [name, keys] : sets) {
    IdMap m(*ctx_, n, 1.0, s_);
    Ref ref;
    std::vector<int64_t> values(keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) values[i] = keys[i] ^ 0x5555;
    insert(m, keys, values, ref);
    EXPECT_EQ(m.capacity(), n) << name;
    EXPECT_EQ(m.size(), n) << name;
    expect_hits_and_misses(m, ref, 21, name);
    // Near misses: neighbours of the inserted ids.
    std::vector<int64_t> near;
    for (int64_t k : keys) {
      if (k != kMax && !ref.count(k + 1)) near.push_back(k + 1);
      if (k != kMin && !ref.count(k - 1)) near.push_back(k - 1);
    }
    expect_lookups(m, ref, near, name + " neighbours");
  }
}

TEST_F(IdMapTest, MinusOneIsAnOrdinaryKey) {
  IdMap m(*ctx_, 64, 0.5, s_);
  Ref ref;
  expect_lookups(m, ref, {-1, 0, kMin, kMax}, "empty map");
  insert(m, {-1, kMin, kMax}, {10, 20, 30}, ref);
  EXPECT_EQ(m.size(), 3);
  expect_lookups(m, ref, {-1, 0, kMin, kMax, -2}, "with -1");
  EXPECT_EQ(erase(m, {-1}, ref), 1);
  expect_lookups(m, ref, {-1, kMin, kMax}, "-1 erased");
}

TEST_F(IdMapTest, DuplicatesInOneBatchLastWinsAndPresentKeysAreOverwritten) {
  IdMap m(*ctx_, 1000, 0.875, s_);
  Ref ref;
  insert(m, {5, 9, 5, 5, -3, 9}, {1, 2, 3, 4, 5, 6}, ref);  // ref applies them in order: last wins
  EXPECT_EQ(ref.at(5), 4);
  EXPECT_EQ(m.size(), 3);
  expect_lookups(m, ref, {5, 9, -3, 4}, "small batch");

  std::mt19937_64 rng(3);
  std::vector<int64_t> keys(20000), values(20000);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    keys[i] = static_cast<int64_t>(rng() % 1500) - 700;  // many repeats, both signs, includes -1
    values[i] = static_cast<int64_t>(i);
  }
  insert(m, keys, values, ref);
  EXPECT_EQ(m.size(), static_cast<int64_t>(ref.size()));
  expect_hits_and_misses(m, ref, 31, "repeats");
  for (auto& v : values) v = -v - 100;  // the same keys again: overwrite
  insert(m, keys, values, ref);
  EXPECT_EQ(m.size(), static_cast<int64_t>(ref.size())) << "overwrites do not add keys";
  expect_hits_and_misses(m, ref, 32, "overwritten");
}

TEST_F(IdMapTest, EraseThenFind) {
  for (double lf : {0.5, 1.0}) {
    const int64_t cap = 512 * 32;
    IdMap m(*ctx_, cap, 1.0, s_);
    Ref ref;
    const auto n = static_cast<std::size_t>(lf * cap);
    const auto keys = random_ids(n, 41 + n);
    insert(m, keys, keys, ref);
    std::vector<int64_t> gone(keys.begin(), keys.begin() + n / 2);
    std::vector<int64_t> batch = gone;
    batch.insert(batch.end(), gone.begin(), gone.begin() + 100);  // repeats count once
    const auto absent = random_ids(500, 43, ref);
    batch.insert(batch.end(), absent.begin(), absent.end());
    std::shuffle(batch.begin(), batch.end(), std::mt19937_64(44));
    const std::string what = "erase at load " + std::to_string(lf);
    EXPECT_EQ(erase(m, batch, ref), static_cast<int64_t>(gone.size())) << what;
    EXPECT_EQ(m.size(), static_cast<int64_t>(n - gone.size())) << what;
    expect_hits_and_misses(m, ref, 45, what);
    expect_lookups(m, ref, gone, what + " erased keys");
    // Everything else too, then all back with new values.
    EXPECT_EQ(erase(m, keys, ref), static_cast<int64_t>(n - gone.size())) << what;
    EXPECT_EQ(m.size(), 0) << what;
    expect_lookups(m, ref, keys, what + " emptied");
    std::vector<int64_t> values(keys.size(), 77);
    insert(m, keys, values, ref);
    EXPECT_EQ(m.size(), static_cast<int64_t>(n)) << what;
    EXPECT_EQ(m.capacity(), cap) << what << ": refilling freed slots needs no growth";
    expect_hits_and_misses(m, ref, 46, what + " refilled");
  }
}

TEST_F(IdMapTest, CloneIsIndependent) {
  IdMap m(*ctx_, 8000, 0.875, s_);
  Ref ref_m;
  const auto keys = random_ids(6000, 51);
  insert(m, keys, keys, ref_m);
  IdMap c = m.clone(s_);
  Ref ref_c = ref_m;
  EXPECT_EQ(c.size(), m.size());
  EXPECT_EQ(c.capacity(), m.capacity());
  insert(c, random_ids(3000, 52, ref_c), std::vector<int64_t>(3000, 1), ref_c);  // may grow the clone
  erase(c, std::vector<int64_t>(keys.begin(), keys.begin() + 2000), ref_c);
  insert(c, std::vector<int64_t>(keys.begin() + 3000, keys.begin() + 3100), std::vector<int64_t>(100, -5), ref_c);
  expect_hits_and_misses(m, ref_m, 53, "original after mutating the clone");
  expect_hits_and_misses(c, ref_c, 54, "clone");
  erase(m, std::vector<int64_t>(keys.begin() + 4000, keys.end()), ref_m);
  expect_hits_and_misses(c, ref_c, 55, "clone after mutating the original");
  expect_hits_and_misses(m, ref_m, 56, "original");
}

TEST_F(IdMapTest, GrowsPastCapacity) {
  IdMap m(*ctx_, 100, 0.875, s_);
  const int64_t cap0 = m.capacity();
  Ref ref;
  for (int b = 0; b < 40; ++b) {
    const auto keys = random_ids(2500, 60 + b, ref);
    insert(m, keys, keys, ref);
    EXPECT_LE(m.load_factor(), 0.875 + 1e-12);
  }
  EXPECT_GT(m.capacity(), cap0);
  EXPECT_EQ(m.size(), 100000);
  expect_hits_and_misses(m, ref, 61, "grown");
  const std::size_t bytes = m.bytes();
  m.reserve(1000000, s_);
  EXPECT_GE(m.capacity() * 0.875, 1000000.0);
  EXPECT_GT(m.bytes(), bytes);
  EXPECT_EQ(m.size(), 100000);
  expect_hits_and_misses(m, ref, 62, "reserved");
  // One batch far larger than the table.
  IdMap small(*ctx_, 0, 1.0, s_);
  Ref ref2;
  const auto keys = random_ids(50000, 63);
  insert(small, keys, keys, ref2);
  EXPECT_EQ(small.size(), 50000);
  EXPECT_LE(small.load_factor(), 1.0);
  expect_hits_and_misses(small, ref2, 64, "one large batch");
}

TEST_F(IdMapTest, OutOfDeviceMemoryLeavesTheMapUnchanged) {
  std::size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  const auto too_many = static_cast<int64_t>(total_b / 4);  // ~17 bytes per slot: > 4x the device
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const ivfgpu::Error& e) {
      return static_cast<int>(e.code());
    }
    return -1;
  };
  EXPECT_EQ(code_of([&] { IdMap big(*ctx_, too_many, 1.0, s_); }), static_cast<int>(ivfgpu::Errc::OutOfDeviceMemory));
  IdMap m(*ctx_, 5000, 0.875, s_);
  Ref ref;
  const auto keys = random_ids(4000, 71);
  insert(m, keys, keys, ref);
  const int64_t cap = m.capacity();
  EXPECT_EQ(code_of([&] { m.reserve(too_many, s_); }), static_cast<int>(ivfgpu::Errc::OutOfDeviceMemory));
  EXPECT_EQ(m.capacity(), cap);
  EXPECT_EQ(m.size(), 4000);
  expect_hits_and_misses(m, ref, 72, "after a failed reserve");
  insert(m, random_ids(100, 73, ref), std::vector<int64_t>(100, 3), ref);
  expect_hits_and_misses(m, ref, 74, "usable after a failed reserve");
}

TEST_F(IdMapTest, EmptyBatchesAreNoOps) {
  IdMap m(*ctx_, 10, 0.875, s_);
  Ref ref;
  m.insert(nullptr, nullptr, 0, s_);
  DeviceBuffer<int64_t> count(*ctx_, 1, s_);
  ASSERT_EQ(cudaMemsetAsync(count.data(), 0xff, sizeof(int64_t), s_), cudaSuccess);
  m.erase(nullptr, 0, s_, count.data());
  EXPECT_EQ(download(count.data(), 1)[0], 0);
  m.find(nullptr, 0, nullptr, nullptr, s_);
  EXPECT_EQ(m.size(), 0);
  // Values may be null (a set): stored as 0.
  auto dk = upload(std::vector<int64_t>{4, 8});
  m.insert(dk.data(), nullptr, 2, s_);
  ref[4] = 0;
  ref[8] = 0;
  expect_lookups(m, ref, {4, 8, 12}, "null values");
}

TEST_F(IdMapTest, OneMillionKeysAtFullLoad) {
  const int64_t n = int64_t(1) << 20;
  IdMap m(*ctx_, n, 1.0, s_);
  Ref ref;
  const auto keys = random_ids(n, 81);
  insert(m, keys, keys, ref);
  EXPECT_EQ(m.capacity(), n);
  EXPECT_EQ(m.size(), n);
  expect_hits_and_misses(m, ref, 82, "1M keys at load 1.0");
}

TEST(IdFilterChoice, DenseSetsGetABitset) {
  using ivfgpu::cuda::choose_id_filter;
  EXPECT_EQ(choose_id_filter(0, 0, 0), IdFilterKind::Bitset);
  EXPECT_EQ(choose_id_filter(1, 5, 5), IdFilterKind::Bitset);
  EXPECT_EQ(choose_id_filter(100, 0, 6399), IdFilterKind::Bitset);   // range 6400 = 64 * 100
  EXPECT_EQ(choose_id_filter(100, 0, 6400), IdFilterKind::HashSet);  // 6401
  EXPECT_EQ(choose_id_filter(100, -3200, 3199), IdFilterKind::Bitset);
  EXPECT_EQ(choose_id_filter(2, kMin, kMax), IdFilterKind::HashSet);
  EXPECT_EQ(choose_id_filter(kMax, kMin, kMax), IdFilterKind::HashSet);
  EXPECT_EQ(choose_id_filter(int64_t(1) << 60, 0, kMax), IdFilterKind::Bitset);  // 2^63 <= 64 * 2^60, no overflow
  EXPECT_EQ(choose_id_filter(int64_t(1) << 60, kMin, kMax), IdFilterKind::HashSet);  // 2^64 ids: never a bitset
}

TEST_F(IdMapTest, IdSetsAnswerMembershipBothWays) {
  struct Case {
    std::string name;
    std::vector<int64_t> ids;
    IdFilterKind kind;
  };
  std::vector<int64_t> dense, neg_dense, sparse = random_ids(5000, 91);
  for (int64_t i = 1000; i < 40000; i += 3) dense.push_back(i);
  dense.insert(dense.end(), dense.begin(), dense.begin() + 500);  // repeats
  for (int64_t i = -500; i <= 500; ++i) neg_dense.push_back(i);
  sparse.push_back(kMin);
  sparse.push_back(kMax);
  const std::vector<Case> cases = {{"dense", dense, IdFilterKind::Bitset},
                                   {"dense around zero", neg_dense, IdFilterKind::Bitset},
                                   {"sparse", sparse, IdFilterKind::HashSet},
                                   {"empty", {}, IdFilterKind::Bitset}};
  for (const auto& c : cases) {
    auto d = upload(c.ids);
    IdSet set = IdSet::build(*ctx_, d.data(), static_cast<int64_t>(c.ids.size()), s_);
    EXPECT_EQ(set.kind(), c.kind) << c.name;
    std::unordered_set<int64_t> ref(c.ids.begin(), c.ids.end());
    std::vector<int64_t> q(c.ids.begin(), c.ids.end());
    for (int64_t v : {kMin, kMin + 1, kMax, kMax - 1, int64_t(-1), int64_t(0), int64_t(999), int64_t(40000)}) q.push_back(v);
    for (int64_t i = 0; i < 3000; ++i) q.push_back(i * 17 - 1000);
    const auto more = random_ids(2000, 92);
    q.insert(q.end(), more.begin(), more.end());
    auto dq = upload(q);
    DeviceBuffer<uint8_t> out(*ctx_, q.size(), s_);
    set.contains(dq.data(), static_cast<int64_t>(q.size()), out.data(), s_);
    const auto got = download(out.data(), q.size());
    int64_t bad = 0;
    for (std::size_t i = 0; i < q.size(); ++i) bad += (got[i] != 0) != (ref.count(q[i]) != 0);
    EXPECT_EQ(bad, 0) << c.name;
  }
}

}  // namespace
