// Device side of id sets for filtered search (host side: core/cuda/id_set.hpp). A dense set is
// a bitset over [base, base + nbits): one load of one word per test, no hashing. A sparse set
// is an IdMap used as a set. IdSetView picks between them with one uniform branch.
#pragma once

#include <cstdint>

#include "id_map_view.cuh"

namespace ivfgpu::cuda {

struct IdBitsetView {
  const uint32_t* words = nullptr;  // ceil(nbits / 32)
  int64_t base = 0;                 // the smallest id the bitset covers
  uint64_t nbits = 0;

  __device__ __forceinline__ bool contains(int64_t id) const {
    // Unsigned difference: no overflow for any pair of int64 (INT64_MIN against INT64_MAX too).
    const uint64_t off = static_cast<uint64_t>(id) - static_cast<uint64_t>(base);
    if (off >= nbits) return false;
    return (__ldg(words + (off >> 5)) >> (off & 31u)) & 1u;
  }
};

// Trivially copyable; valid while the IdSet it came from lives and is not modified.
struct IdSetView {
  bool dense = true;  // true: `bits`; false: `map`
  IdBitsetView bits;
  IdMapView map;

  __device__ __forceinline__ bool contains(int64_t id) const { return dense ? bits.contains(id) : map.contains(id); }
};

// Whether storage slot `slot` is marked removed (removed: one bit per slot, or null: none).
__device__ __forceinline__ bool slot_removed(const uint64_t* removed, int64_t slot) {
  return removed != nullptr && ((removed[slot >> 6] >> (slot & 63)) & 1u);
}

// Whether the row in storage slot `slot` may be returned: not removed and, under a filter
// (1: allow-list, 2: deny-list; 0: none), its id passes. id_of() reads the id only when a
// filter asks for it. The one exclusion rule of every scan.
template <class IdOf>
__device__ __forceinline__ bool row_allowed(const uint64_t* removed, int filter, const IdSetView& set, int64_t slot,
                                            IdOf&& id_of) {
  if (slot_removed(removed, slot)) return false;
  return filter == 0 || set.contains(id_of()) == (filter == 1);
}

}  // namespace ivfgpu::cuda
