// Device side of the id map (core/cuda/id_map.hpp): the table layout, the hashes, and a
// trivially copyable view whose lookups other kernels (scan, filters) can call. Device code
// only; no host API is pulled in.
//
// Layout and design (docs/architecture.md §6; after NVIDIA HierarchicalKV PR 251):
//   * Buckets of 32 slots, one per warp lane. Three flat arrays, bucket b owning slots
//     [32b, 32b + 32) of each: digests (uint8, 32 bytes = one sector per bucket), keys (int64,
//     256 bytes), values (int64, 256 bytes). Keys are never used as markers: digest 0 = empty,
//     0xFF = claimed by an insert in flight (never visible to lookups), 1..254 = occupied.
//   * Digests come from a second hash (not the bits that chose the bucket), so two keys in one
//     bucket share a digest with probability 1/254: a lookup loads 32 bytes of digests and
//     touches a key only on a digest match (a full bucket costs 32/254 = 0.13 false key loads).
//     8 bits were chosen over 16 because one bucket's digests then fit one 32-byte sector (one
//     byte per lane, or two uint4 loads for one thread); 16 bits would halve the false loads
//     (already rare) and double the digest traffic.
//   * Two-choice buckets: a key lives in the less loaded of b1(key), b2(key) (b1 != b2). A
//     lookup reads both digest sectors at once, so hits and misses cost the same two sectors
//     at any load. No empty-slot early exit, hence no cliff when buckets are full (the HKV
//     cliff of HierarchicalKV came from a serial scan that relied on empty slots to stop).
//   * Load factor 1.0 (keys = 32 * nbuckets) cannot be met by two choices alone: greedy
//     two-choice with 32-slot buckets overflows 0.004% of keys at load 0.95 and 1.0% at load
//     1.0 (simulated, 4M slots; 1.5-3.6% for tiny tables filled by one wave of concurrent
//     inserts). Those go to a small overflow level of max(4, nbuckets/16) two-choice buckets
//     (o1, o2 from a third hash; 6% more memory), stored after the main buckets in the same
//     arrays. Each main bucket has a filter byte: an overflowing key sets bit f(key) in the
//     filters of both b1 and b2. A lookup that misses b1 and b2 visits the overflow level only
//     when both filters have its bit (simulated at load 1.0: 0.6% of misses, against 17% with
//     a one-bit flag). So a lookup reads at most 4 buckets, almost always 2.
//   * Erase clears the digest to 0. Filters are not cleared (conservative) until a rehash.
//   * Kernels that must not see a key mid-insert never run concurrently with a mutation (the
//     index mutates a clone and publishes it).
#pragma once

#include <cstdint>

namespace ivfgpu::cuda {

namespace idmap {

constexpr int kSlots = 32;             // slots per bucket = warp size
constexpr unsigned kEmpty = 0x00;      // digest of an empty slot
constexpr unsigned kBusy = 0xFF;       // digest of a slot an insert has claimed but not published
constexpr unsigned kFullMask = 0xffffffffu;

// murmur3's 64-bit finaliser: a bijection with full avalanche (sequential ids, ids with equal
// low bits and negative ids all spread).
__host__ __device__ __forceinline__ uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ull;
  k ^= k >> 33;
  return k;
}

// Maps a uniform 32-bit hash onto [0, n) without a division.
__host__ __device__ __forceinline__ uint32_t range32(uint32_t h, uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint64_t>(h) * n) >> 32);
}

// Everything a key's probe needs. Bucket numbers index the flat arrays (overflow buckets are
// already offset by nbuckets).
struct Probe {
  uint32_t b1, b2;  // main buckets
  uint32_t o1, o2;  // overflow buckets
  uint32_t digest;  // 1..254
  uint32_t fbit;    // one bit of the filter byte
};

__host__ __device__ __forceinline__ Probe probe_of(int64_t key, uint32_t nbuckets, uint32_t noverflow) {
  const uint64_t k = static_cast<uint64_t>(key);
  const uint64_t h = mix64(k);                          // main bucket choices
  const uint64_t g = mix64(k ^ 0x9e3779b97f4a7c15ull);  // digest and filter bit
  const uint64_t o = mix64(k + 0xd6e8feb86659fd93ull);  // overflow bucket choices
  Probe p;
  p.b1 = range32(static_cast<uint32_t>(h), nbuckets);
  p.b2 = range32(static_cast<uint32_t>(h >> 32), nbuckets);
  if (p.b2 == p.b1) p.b2 = p.b1 + 1 == nbuckets ? 0 : p.b1 + 1;
  p.o1 = range32(static_cast<uint32_t>(o), noverflow);
  p.o2 = range32(static_cast<uint32_t>(o >> 32), noverflow);
  if (p.o2 == p.o1) p.o2 = p.o1 + 1 == noverflow ? 0 : p.o1 + 1;
  p.o1 += nbuckets;
  p.o2 += nbuckets;
  p.digest = 1 + static_cast<uint32_t>((g >> 32) % 254u);
  p.fbit = 1u << (g & 7u);
  return p;
}

// One bucket's 32 digests as one thread holds them.
struct DigestBlock {
  uint4 lo, hi;
};

template <bool kReadOnly, typename T>
__device__ __forceinline__ T load(const T* p) {
  if constexpr (kReadOnly) return __ldg(p);
  else return *p;
}

template <bool kReadOnly>
__device__ __forceinline__ DigestBlock load_block(const uint8_t* digests, uint32_t bucket) {
  const uint4* p = reinterpret_cast<const uint4*>(digests + static_cast<uint64_t>(bucket) * kSlots);
  return DigestBlock{load<kReadOnly>(p), load<kReadOnly>(p + 1)};
}

// Slot (global index) of `key` in `bucket` whose digests are `d`, or -1. One thread. Key and
// value are loaded together on a digest match (a false match is rare; a true one saves a
// round trip).
template <bool kReadOnly>
__device__ __forceinline__ int64_t verify_thread(const int64_t* keys, const int64_t* values, uint32_t bucket,
                                                 const DigestBlock& d, uint32_t digest, int64_t key,
                                                 int64_t* value) {
  const uint32_t pattern = digest * 0x01010101u;
  const uint32_t w[8] = {d.lo.x, d.lo.y, d.lo.z, d.lo.w, d.hi.x, d.hi.y, d.hi.z, d.hi.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    uint32_t m = __vcmpeq4(w[i], pattern) & 0x01010101u;  // bit 8j set: byte j matches
    while (m != 0) {
      const int slot = i * 4 + ((__ffs(m) - 1) >> 3);
      m &= m - 1;
      const int64_t s = static_cast<int64_t>(bucket) * kSlots + slot;
      const int64_t k = load<kReadOnly>(keys + s);
      const int64_t v = load<kReadOnly>(values + s);
      if (k == key) {
        *value = v;
        return s;
      }
    }
  }
  return -1;
}

// Warp-cooperative verify of two buckets at once: lane l holds digest byte l of each (d1, d2).
// Returns the slot (global index) holding `key`, or -1, in every lane; *value likewise.
template <bool kReadOnly>
__device__ __forceinline__ int64_t verify_warp(const int64_t* keys, const int64_t* values, uint32_t b1,
                                               unsigned d1, uint32_t b2, unsigned d2, uint32_t digest,
                                               int64_t key, int lane, int64_t* value) {
  const int64_t s1 = static_cast<int64_t>(b1) * kSlots + lane;
  const int64_t s2 = static_cast<int64_t>(b2) * kSlots + lane;
  bool hit1 = false, hit2 = false;
  int64_t v1 = 0, v2 = 0;
  if (d1 == digest) {
    const int64_t k = load<kReadOnly>(keys + s1);
    v1 = load<kReadOnly>(values + s1);
    hit1 = k == key;
  }
  if (d2 == digest) {
    const int64_t k = load<kReadOnly>(keys + s2);
    v2 = load<kReadOnly>(values + s2);
    hit2 = k == key;
  }
  const unsigned m1 = __ballot_sync(kFullMask, hit1);
  const unsigned m2 = __ballot_sync(kFullMask, hit2);
  if ((m1 | m2) == 0) return -1;
  const int src = __ffs(m1 != 0 ? m1 : m2) - 1;
  *value = __shfl_sync(kFullMask, m1 != 0 ? v1 : v2, src);
  return static_cast<int64_t>(m1 != 0 ? b1 : b2) * kSlots + src;
}

// This thread's lane in its warp (any block shape).
__device__ __forceinline__ int lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return static_cast<int>(lane);
}

// Plain data shared by the read-only view and the kernels that mutate the table.
struct TableRef {
  uint8_t* digests = nullptr;  // (nbuckets + noverflow) * 32
  int64_t* keys = nullptr;     // same
  int64_t* values = nullptr;   // same
  uint8_t* filters = nullptr;  // nbuckets (rounded up to a multiple of 4)
  uint32_t nbuckets = 0;
  uint32_t noverflow = 0;
};

// Warp-cooperative locate, all 32 lanes with the same key: slot or -1 in every lane.
template <bool kReadOnly>
__device__ __forceinline__ int64_t locate_warp(const TableRef& t, bool check_overflow, int64_t key, int64_t* value) {
  const int lane = lane_id();
  const Probe p = probe_of(key, t.nbuckets, t.noverflow);
  const unsigned d1 = load<kReadOnly>(t.digests + static_cast<int64_t>(p.b1) * kSlots + lane);
  const unsigned d2 = load<kReadOnly>(t.digests + static_cast<int64_t>(p.b2) * kSlots + lane);
  int64_t s = verify_warp<kReadOnly>(t.keys, t.values, p.b1, d1, p.b2, d2, p.digest, key, lane, value);
  if (s >= 0 || !check_overflow) return s;
  const unsigned f = load<kReadOnly>(t.filters + p.b1) & load<kReadOnly>(t.filters + p.b2);
  if ((f & p.fbit) == 0) return -1;
  const unsigned e1 = load<kReadOnly>(t.digests + static_cast<int64_t>(p.o1) * kSlots + lane);
  const unsigned e2 = load<kReadOnly>(t.digests + static_cast<int64_t>(p.o2) * kSlots + lane);
  return verify_warp<kReadOnly>(t.keys, t.values, p.o1, e1, p.o2, e2, p.digest, key, lane, value);
}

// One thread: slot or -1.
template <bool kReadOnly>
__device__ __forceinline__ int64_t locate_thread(const TableRef& t, bool check_overflow, int64_t key, int64_t* value) {
  const Probe p = probe_of(key, t.nbuckets, t.noverflow);
  const DigestBlock d1 = load_block<kReadOnly>(t.digests, p.b1);  // both sectors in flight at once
  const DigestBlock d2 = load_block<kReadOnly>(t.digests, p.b2);
  int64_t s = verify_thread<kReadOnly>(t.keys, t.values, p.b1, d1, p.digest, key, value);
  if (s >= 0) return s;
  s = verify_thread<kReadOnly>(t.keys, t.values, p.b2, d2, p.digest, key, value);
  if (s >= 0 || !check_overflow) return s;
  const unsigned f = load<kReadOnly>(t.filters + p.b1) & load<kReadOnly>(t.filters + p.b2);
  if ((f & p.fbit) == 0) return -1;
  const DigestBlock e1 = load_block<kReadOnly>(t.digests, p.o1);
  const DigestBlock e2 = load_block<kReadOnly>(t.digests, p.o2);
  s = verify_thread<kReadOnly>(t.keys, t.values, p.o1, e1, p.digest, key, value);
  if (s >= 0) return s;
  return verify_thread<kReadOnly>(t.keys, t.values, p.o2, e2, p.digest, key, value);
}

}  // namespace idmap

// A read-only view of an IdMap for use inside any kernel. Valid until the next mutation of the
// map it came from (insert, erase, reserve); the map must not be mutated while a kernel using
// the view runs. Trivially copyable: pass it by value as a kernel argument.
struct IdMapView {
  idmap::TableRef table;
  bool has_overflow = false;  // false: no key ever went to the overflow level (skip filters)

  // One thread, one key. True and *value set when found; *value untouched otherwise.
  __device__ __forceinline__ bool find(int64_t key, int64_t* value) const {
    int64_t v;
    if (idmap::locate_thread<true>(table, has_overflow, key, &v) < 0) return false;
    *value = v;
    return true;
  }

  // Warp-cooperative: all 32 lanes of a warp call it together (converged, full warp) with the
  // same key; every lane gets the same answer. Costs one sector per bucket per warp instead of
  // per thread: for kernels that already hold one key per warp.
  __device__ __forceinline__ bool find_warp(int64_t key, int64_t* value) const {
    int64_t v = 0;
    if (idmap::locate_warp<true>(table, has_overflow, key, &v) < 0) return false;
    *value = v;
    return true;
  }

  __device__ __forceinline__ bool contains(int64_t key) const {
    int64_t v;
    return find(key, &v);
  }
};

}  // namespace ivfgpu::cuda
