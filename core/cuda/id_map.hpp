// A device-resident hash map from int64 id to int64 value: the index's id map (id -> the
// (list, offset) of the row holding it) and the hash form of filtered search's id sets.
//
// Design and layout: core/cuda/id_map_view.cuh (32-slot buckets, 8-bit digests, two choices
// plus a filtered overflow level, so any lookup reads at most 4 buckets and usually 2).
//
// Contract:
//   * Keys are any int64 (-1, INT64_MIN and INT64_MAX included); no key value is reserved.
//   * All operations are stream-ordered on the caller's stream and take device arrays. Every
//     mutation (constructor, insert, erase, reserve) and clone synchronises that stream before
//     returning (counts are read back to decide on growth and to keep size() a plain read);
//     find does not synchronise.
//   * const member functions write nothing: many host threads may find() on one map at once.
//   * insert of a key already present overwrites its value. Duplicate keys inside one insert
//     batch: the last occurrence wins (the batch is stably sorted on the device first).
//   * Mutations (insert, erase, reserve) and lookups must not overlap in time on the device;
//     an IdMap is not safe to mutate from two host threads. The index publishes immutable
//     states and mutates a clone(), which is the intended use.
//   * Device memory is freed on the stream of the last mutation (or of the clone() that made
//     the map); that stream must still exist when the map is destroyed.
//   * Out of device memory: Errc::OutOfDeviceMemory, and the map is unchanged (growth builds
//     the new table beside the old one). One exception: an insert whose overflow level fills
//     up (never seen below the maximum load factor) grows in the middle of the batch; if that
//     growth runs out of memory the keys already placed stay placed.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device_buffer.hpp"
#include "device_context.hpp"

namespace ivfgpu::cuda {

struct IdMapView;  // id_map_view.cuh: device code only

// Which lookup kernel find() runs. Auto is what callers use; the others exist for tests and
// the benchmark.
enum class FindKernel {
  Auto,
  ThreadPerKey,   // one thread per key, both buckets' digests loaded at once (IdMapView::find)
  WarpPerKey,     // one warp per key, not pipelined (IdMapView::find_warp)
  WarpPipelined,  // one warp per key, next key's buckets prefetched while this one is verified
};

// The one dispatch place: the kernel Auto runs at a given load factor.
FindKernel choose_find_kernel(double load_factor);

const char* find_kernel_name(FindKernel k);

class IdMap {
 public:
  // Room for `capacity_hint` keys without growing, with at most `max_load_factor` (0, 1] of the
  // main slots in use; later growth keeps that bound. Synchronises `stream`.
  IdMap(const DeviceContext& ctx, int64_t capacity_hint, double max_load_factor, cudaStream_t stream);
  ~IdMap() = default;
  IdMap(IdMap&&) noexcept = default;
  IdMap& operator=(IdMap&&) noexcept = default;
  IdMap(const IdMap&) = delete;
  IdMap& operator=(const IdMap&) = delete;

  // Grows (rehashes) so that `keys` keys fit under the maximum load factor. Never shrinks.
  void reserve(int64_t keys, cudaStream_t stream);

  // Inserts or overwrites n pairs (device arrays; values may be null: stores 0, for id sets).
  void insert(const int64_t* keys, const int64_t* values, int64_t n, cudaStream_t stream);

  // Erases the keys present (absent keys and repeats are ignored). erased_count (device, may be
  // null) receives the number of keys removed. Freed slots are reused by later inserts.
  void erase(const int64_t* keys, int64_t n, cudaStream_t stream, int64_t* erased_count = nullptr);

  // values_out[i] = the value of keys[i] or -1 when absent; found_out[i] = 1 / 0. Either output
  // may be null. Device arrays.
  void find(const int64_t* keys, int64_t n, int64_t* values_out, uint8_t* found_out, cudaStream_t stream,
            FindKernel kernel = FindKernel::Auto) const;

  // An independent copy (device to device). Synchronises `stream`.
  IdMap clone(cudaStream_t stream) const;

  IdMapView view() const;

  int64_t size() const { return size_; }  // keys held
  int64_t capacity() const;                // main slots: 32 * buckets
  double load_factor() const { return capacity() == 0 ? 0.0 : double(size()) / double(capacity()); }
  double max_load_factor() const { return max_load_; }
  std::size_t bytes() const { return mem_.bytes(); }
  // Keys placed in the overflow level since the last rehash (diagnostic; erase does not lower it).
  int64_t overflow_count() const { return overflowed_; }

 private:
  struct Counts;
  IdMap(const DeviceContext& ctx, double max_load_factor) : ctx_(&ctx), max_load_(max_load_factor) {}
  void allocate(uint32_t nbuckets, cudaStream_t stream);
  void rehash(uint32_t nbuckets, cudaStream_t stream);
  void insert_chunk(const int64_t* keys, const int64_t* values, int64_t n, cudaStream_t stream);
  void read_counts(cudaStream_t stream);
  uint32_t buckets_for(int64_t keys) const;
  int64_t* counters() const;

  const DeviceContext* ctx_ = nullptr;
  double max_load_ = 1.0;
  uint32_t nbuckets_ = 0, noverflow_ = 0;
  DeviceBuffer<int64_t> mem_;  // keys, values, counters, digests, filters (see id_map.cu)
  // Host mirrors of the device counters, read back by every mutation.
  int64_t size_ = 0, overflowed_ = 0;
};

}  // namespace ivfgpu::cuda
