#include "id_map.hpp"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cmath>

#include "../errors.hpp"
#include "check.hpp"
#include "launch.cuh"
#include "id_map_view.cuh"

namespace ivfgpu::cuda {

namespace {

using idmap::kBusy;
using idmap::kEmpty;
using idmap::kFullMask;
using idmap::kSlots;
using idmap::Probe;
using idmap::TableRef;

constexpr int kThreads = 256;
// An insert batch is sorted in pieces of at most this many keys (uint32 sort indices; bounds the
// temporaries at ~30 bytes per key of the piece).
constexpr int64_t kInsertPiece = int64_t(1) << 28;
// Above this load factor Auto runs the warp-pipelined lookup. Seed 003 (HierarchicalKV) picks it
// above 0.875 because its thread-per-key kernel scans 128-slot buckets serially; ours reads both
// 32-slot buckets' digests in two 32-byte loads, and on the H100 (bench/idmap_bench, 1M and 100M
// keys) it beat the pipelined warp kernel at every load, 1.0 included (1M keys at 1.0: 19.4 vs
// 6.8 G hits/s, 22.7 vs 6.0 G misses/s). So Auto never leaves it; the constant stays the one
// place to retune from the benchmark's table on other hardware.
constexpr double kWarpKernelAbove = 1.0;
// Bucket numbers are uint32 (main + overflow must fit): at most ~3.7e9 main buckets.
constexpr uint64_t kMaxBuckets = 0xE0000000u;

// Device counters, int64 each, at the start of the byte region.
enum Counter : int { kSize = 0, kOverflowed, kFailed, kNew, kErased, kCounters = 8 };

uint32_t overflow_buckets(uint32_t nbuckets) { return std::max<uint32_t>(4, (nbuckets + 15) / 16); }

struct Layout {
  int64_t slots = 0;  // (main + overflow buckets) * 32
  int64_t words = 0;  // int64 words of the allocation
  explicit Layout(uint32_t nbuckets) {
    slots = (static_cast<int64_t>(nbuckets) + overflow_buckets(nbuckets)) * kSlots;
    const int64_t bytes = slots + ((static_cast<int64_t>(nbuckets) + 3) & ~int64_t(3));  // digests, filters
    words = 2 * slots + kCounters + (bytes + 7) / 8;
  }
};

TableRef table_ref(int64_t* base, uint32_t nbuckets) {
  const Layout l(nbuckets);
  TableRef t;
  t.keys = base;
  t.values = base + l.slots;
  t.digests = reinterpret_cast<uint8_t*>(base + 2 * l.slots + kCounters);
  t.filters = t.digests + l.slots;
  t.nbuckets = nbuckets;
  t.noverflow = overflow_buckets(nbuckets);
  return t;
}

unsigned grid_for(int64_t n, const DeviceContext& ctx) { return grid_for_sms(n, kThreads, ctx.limits().sm_count); }

__device__ __forceinline__ void add_counter(int64_t* c, int64_t d) {
  atomicAdd(reinterpret_cast<unsigned long long*>(c), static_cast<unsigned long long>(d));
}

__device__ __forceinline__ int64_t global_thread() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t global_threads() { return int64_t(gridDim.x) * blockDim.x; }

// Claims an empty slot: its digest byte goes 0 -> busy, by CAS on the aligned word holding it.
__device__ bool claim_slot(uint8_t* digests, int64_t slot) {
  unsigned* word = reinterpret_cast<unsigned*>(digests + (slot & ~int64_t(3)));
  const int shift = static_cast<int>(slot & 3) * 8;
  unsigned old = *reinterpret_cast<volatile unsigned*>(word);
  for (;;) {
    if (((old >> shift) & 0xffu) != kEmpty) return false;
    const unsigned prev = atomicCAS(word, old, old | (kBusy << shift));
    if (prev == old) return true;
    old = prev;  // a neighbouring byte changed; ours may still be empty
  }
}

// Busy -> digest, after the key and value are visible.
__device__ void publish_slot(uint8_t* digests, int64_t slot, unsigned digest) {
  unsigned* word = reinterpret_cast<unsigned*>(digests + (slot & ~int64_t(3)));
  atomicXor(word, (kBusy ^ digest) << (static_cast<int>(slot & 3) * 8));
}

__device__ void set_filter(uint8_t* filters, uint32_t bucket, unsigned bit) {
  atomicOr(reinterpret_cast<unsigned*>(filters + (bucket & ~3u)), bit << ((bucket & 3u) * 8));
}

// Places a key known to be absent, all 32 lanes together: into the emptier of its two main
// buckets, else (both full) into its overflow buckets after marking both main filters.
// Returns 0 (main), 1 (overflow) or -1 (all four full: the table must grow).
__device__ int place_warp(const TableRef& t, const Probe& p, int64_t key, int64_t value, int lane) {
  const volatile uint8_t* digests = t.digests;  // other warps claim slots meanwhile
  for (int level = 0; level < 2; ++level) {
    const uint32_t c1 = level == 0 ? p.b1 : p.o1;
    const uint32_t c2 = level == 0 ? p.b2 : p.o2;
    if (level == 1 && lane == 0) {
      set_filter(t.filters, p.b1, p.fbit);
      set_filter(t.filters, p.b2, p.fbit);
    }
    for (int attempt = 0; attempt < 256; ++attempt) {
      const unsigned e1 = __ballot_sync(kFullMask, digests[int64_t(c1) * kSlots + lane] == kEmpty);
      const unsigned e2 = __ballot_sync(kFullMask, digests[int64_t(c2) * kSlots + lane] == kEmpty);
      if ((e1 | e2) == 0) break;
      const bool second = __popc(e2) > __popc(e1);
      const uint32_t b = second ? c2 : c1;
      const unsigned e = second ? e2 : e1;
      // Start the search for an empty slot at a key-dependent lane: fewer CAS collisions.
      const int r = static_cast<int>(p.digest & 31u);
      const unsigned rot = (e >> r) | (e << ((32 - r) & 31));
      const int slot = (__ffs(rot) - 1 + r) & 31;
      const int64_t s = int64_t(b) * kSlots + slot;
      bool won = false;
      if (lane == slot) won = claim_slot(t.digests, s);
      if (__shfl_sync(kFullMask, won, slot)) {
        if (lane == slot) {
          t.keys[s] = key;
          t.values[s] = value;
          __threadfence();
          publish_slot(t.digests, s, p.digest);
        }
        return level;
      }
    }
  }
  return -1;
}

// Keys of a stably sorted batch whose later duplicate supersedes them are skipped.
__device__ __forceinline__ bool superseded(const int64_t* skeys, int64_t n, int64_t i) {
  return i + 1 < n && skeys[i + 1] == skeys[i];
}

__global__ void iota_kernel(uint32_t* idx, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += global_threads()) idx[i] = static_cast<uint32_t>(i);
}

// Counts the batch's distinct keys that are not in the table yet.
__global__ void count_new_kernel(TableRef t, const int64_t* skeys, int64_t n, int64_t* counters) {
  int64_t fresh = 0;
  for (int64_t i = global_thread(); i < n; i += global_threads()) {
    if (superseded(skeys, n, i)) continue;
    int64_t v;
    if (idmap::locate_thread<true>(t, true, skeys[i], &v) < 0) ++fresh;
  }
  if (fresh) add_counter(counters + kNew, fresh);
}

// One warp per distinct key of the sorted batch: overwrite when present, else place. `retry`
// places only the entries a previous pass marked failed.
__global__ void insert_kernel(TableRef t, const int64_t* skeys, const uint32_t* sidx, const int64_t* values, int64_t n,
                              uint8_t* failed, bool retry, int64_t* counters) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  for (int64_t i = global_thread() >> 5; i < n; i += global_threads() >> 5) {
    if (retry ? failed[i] == 0 : superseded(skeys, n, i)) continue;
    const int64_t key = skeys[i];
    const int64_t value = values != nullptr ? values[sidx[i]] : 0;
    int64_t old;
    const int64_t s = idmap::locate_warp<false>(t, true, key, &old);
    if (s >= 0) {
      if (lane == 0) t.values[s] = value;
      continue;
    }
    const int where = place_warp(t, idmap::probe_of(key, t.nbuckets, t.noverflow), key, value, lane);
    if (lane == 0) {
      if (where < 0) {
        failed[i] = 1;
        add_counter(counters + kFailed, 1);
      } else {
        failed[i] = 0;
        add_counter(counters + kSize, 1);
        if (where == 1) add_counter(counters + kOverflowed, 1);
      }
    }
  }
}

// One warp per bucket of the old table (main and overflow): every live pair goes to the new one.
__global__ void rehash_kernel(TableRef from, int64_t from_buckets, TableRef to, int64_t* to_counters) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  for (int64_t b = global_thread() >> 5; b < from_buckets; b += global_threads() >> 5) {
    const int64_t s = b * kSlots + lane;
    unsigned live = __ballot_sync(kFullMask, from.digests[s] != kEmpty);
    const int64_t my_key = from.keys[s];
    const int64_t my_value = from.values[s];
    while (live != 0) {
      const int src = __ffs(live) - 1;
      live &= live - 1;
      const int64_t key = __shfl_sync(kFullMask, my_key, src);
      const int64_t value = __shfl_sync(kFullMask, my_value, src);
      const int where = place_warp(to, idmap::probe_of(key, to.nbuckets, to.noverflow), key, value, lane);
      if (lane == 0) {
        if (where < 0) {
          add_counter(to_counters + kFailed, 1);
        } else {
          add_counter(to_counters + kSize, 1);
          if (where == 1) add_counter(to_counters + kOverflowed, 1);
        }
      }
    }
  }
}

// One warp per key. The digest is cleared with an atomic that returns the old byte, so a key
// repeated in the batch is counted once.
__global__ void erase_kernel(TableRef t, const int64_t* keys, int64_t n, int64_t* counters) {
  const int lane = static_cast<int>(threadIdx.x & 31u);
  for (int64_t i = global_thread() >> 5; i < n; i += global_threads() >> 5) {
    const int64_t key = keys[i];
    int64_t v;
    const int64_t s = idmap::locate_warp<false>(t, true, key, &v);
    if (s < 0 || lane != 0) continue;
    const unsigned digest = idmap::probe_of(key, t.nbuckets, t.noverflow).digest;
    unsigned* word = reinterpret_cast<unsigned*>(t.digests + (s & ~int64_t(3)));
    const int shift = static_cast<int>(s & 3) * 8;
    const unsigned old = atomicAnd(word, ~(0xffu << shift));
    if (((old >> shift) & 0xffu) == digest) {
      add_counter(counters + kSize, -1);
      add_counter(counters + kErased, 1);
    }
  }
}

__device__ __forceinline__ void write_result(int64_t i, bool found, int64_t value, int64_t* values_out,
                                             uint8_t* found_out) {
  if (values_out != nullptr) values_out[i] = found ? value : -1;
  if (found_out != nullptr) found_out[i] = found ? 1 : 0;
}

// Low load: one thread per key (IdMapView::find). Both digest sectors are requested at once;
// many threads per warp keep many requests in flight.
__global__ void __launch_bounds__(kThreads) find_thread_kernel(IdMapView v, const int64_t* __restrict__ keys, int64_t n,
                                                               int64_t* values_out, uint8_t* found_out) {
  for (int64_t i = global_thread(); i < n; i += global_threads()) {
    int64_t value = -1;
    const bool found = v.find(__ldg(keys + i), &value);
    write_result(i, found, value, values_out, found_out);
  }
}

// One warp per key, no pipelining (IdMapView::find_warp): the reference for the pipelined one.
__global__ void __launch_bounds__(kThreads) find_warp_kernel(IdMapView v, const int64_t* __restrict__ keys, int64_t n,
                                                             int64_t* values_out, uint8_t* found_out) {
  for (int64_t i = global_thread() >> 5; i < n; i += global_threads() >> 5) {
    int64_t value = -1;
    const bool found = v.find_warp(__ldg(keys + i), &value);
    if ((threadIdx.x & 31u) == 0) write_result(i, found, value, values_out, found_out);
  }
}

// High load (docs/architecture.md §6): a warp takes a tile of 32 keys (lane l loads key l and hashes it), then
// probes them one after another with all 32 lanes. Two stages, double-buffered in registers:
//   stage 1  digest prefetch: lane l loads byte l of both candidate buckets of key k+1;
//   stage 2  for key k (its digests arrived during the previous step): ballot the digest
//            matches, load key and value of the matching lanes, verify, and, only when both
//            buckets miss and both filters hold the key's bit, probe the overflow buckets.
// Stage 1 of key k+1 is issued before stage 2 of key k, so its latency hides behind the verify.
__global__ void __launch_bounds__(kThreads) find_pipelined_kernel(IdMapView v, const int64_t* __restrict__ keys,
                                                                  int64_t n, int64_t* __restrict__ values_out,
                                                                  uint8_t* __restrict__ found_out) {
  const TableRef& t = v.table;
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int64_t ntiles = (n + 31) >> 5;
  for (int64_t tile = global_thread() >> 5; tile < ntiles; tile += global_threads() >> 5) {
    const int64_t i = tile * 32 + lane;
    const int count = static_cast<int>(std::min<int64_t>(32, n - tile * 32));
    const int64_t my_key = i < n ? __ldg(keys + i) : 0;
    const Probe my = idmap::probe_of(my_key, t.nbuckets, t.noverflow);
    int64_t my_value = -1;
    bool my_found = false;

    uint32_t next_b1 = __shfl_sync(kFullMask, my.b1, 0);
    uint32_t next_b2 = __shfl_sync(kFullMask, my.b2, 0);
    unsigned next_d1 = __ldg(t.digests + int64_t(next_b1) * kSlots + lane);
    unsigned next_d2 = __ldg(t.digests + int64_t(next_b2) * kSlots + lane);
    for (int k = 0; k < count; ++k) {
      const uint32_t b1 = next_b1, b2 = next_b2;
      const unsigned d1 = next_d1, d2 = next_d2;
      if (k + 1 < count) {  // stage 1 for key k + 1
        next_b1 = __shfl_sync(kFullMask, my.b1, k + 1);
        next_b2 = __shfl_sync(kFullMask, my.b2, k + 1);
        next_d1 = __ldg(t.digests + int64_t(next_b1) * kSlots + lane);
        next_d2 = __ldg(t.digests + int64_t(next_b2) * kSlots + lane);
      }
      // stage 2 for key k
      const int64_t key = __shfl_sync(kFullMask, my_key, k);
      const uint32_t digest = __shfl_sync(kFullMask, my.digest, k);
      int64_t value = -1;
      int64_t s = idmap::verify_warp<true>(t.keys, t.values, b1, d1, b2, d2, digest, key, lane, &value);
      if (s < 0 && v.has_overflow) {  // rare: rehash the key rather than hold o1, o2 in registers
        const Probe q = idmap::probe_of(key, t.nbuckets, t.noverflow);
        if ((__ldg(t.filters + b1) & __ldg(t.filters + b2) & q.fbit) != 0) {
          const unsigned e1 = __ldg(t.digests + int64_t(q.o1) * kSlots + lane);
          const unsigned e2 = __ldg(t.digests + int64_t(q.o2) * kSlots + lane);
          s = idmap::verify_warp<true>(t.keys, t.values, q.o1, e1, q.o2, e2, digest, key, lane, &value);
        }
      }
      if (lane == k) {
        my_found = s >= 0;
        my_value = value;
      }
    }
    if (i < n) write_result(i, my_found, my_value, values_out, found_out);
  }
}

}  // namespace

FindKernel choose_find_kernel(double load_factor) {
  return load_factor > kWarpKernelAbove ? FindKernel::WarpPipelined : FindKernel::ThreadPerKey;
}

const char* find_kernel_name(FindKernel k) {
  switch (k) {
    case FindKernel::Auto: return "auto";
    case FindKernel::ThreadPerKey: return "thread";
    case FindKernel::WarpPerKey: return "warp";
    case FindKernel::WarpPipelined: return "pipelined";
  }
  return "?";
}

IdMap::IdMap(const DeviceContext& ctx, int64_t capacity_hint, double max_load_factor, cudaStream_t stream)
    : IdMap(ctx, max_load_factor) {
  require(max_load_factor > 0.0 && max_load_factor <= 1.0, Errc::InvalidArgument,
          "id map: the maximum load factor must be in (0, 1]");
  require(capacity_hint >= 0, Errc::InvalidArgument, "id map: negative capacity");
  DeviceGuard guard(ctx.device());
  allocate(buckets_for(capacity_hint), stream);
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

uint32_t IdMap::buckets_for(int64_t keys) const {
  const double need = std::ceil(static_cast<double>(keys) / (kSlots * max_load_));
  require(need <= static_cast<double>(kMaxBuckets), Errc::InvalidArgument, "id map: capacity too large");
  return std::max<uint32_t>(2, static_cast<uint32_t>(need));
}

int64_t* IdMap::counters() const { return mem_.data() + 2 * Layout(nbuckets_).slots; }

// Allocates an empty table of `nbuckets` main buckets into *this (the old storage, if any, is
// released on `stream` only after the new one exists).
void IdMap::allocate(uint32_t nbuckets, cudaStream_t stream) {
  const Layout l(nbuckets);
  DeviceBuffer<int64_t> mem(*ctx_, static_cast<std::size_t>(l.words), stream, MemoryUse::State);
  IVF_CUDA_CHECK(cudaMemsetAsync(mem.data() + 2 * l.slots, 0, (l.words - 2 * l.slots) * sizeof(int64_t), stream));
  mem_.set_stream(stream);
  mem_ = std::move(mem);
  nbuckets_ = nbuckets;
  noverflow_ = overflow_buckets(nbuckets);
  size_ = overflowed_ = 0;
}

struct IdMap::Counts {
  int64_t c[kCounters];
};

void IdMap::read_counts(cudaStream_t stream) {
  Counts h{};
  IVF_CUDA_CHECK(cudaMemcpyAsync(h.c, counters(), sizeof(h.c), cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  size_ = h.c[kSize];
  overflowed_ = h.c[kOverflowed];
}

namespace {
int64_t read_counter(const int64_t* counters, Counter which, cudaStream_t stream) {
  int64_t v = 0;
  IVF_CUDA_CHECK(cudaMemcpyAsync(&v, counters + which, sizeof(v), cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  return v;
}
}  // namespace

// Builds a table of `nbuckets` beside the current one, moves every pair over, then swaps. An
// allocation failure leaves *this as it was. If the new overflow level fills up (pathological
// hashing), the new table is dropped and a larger one tried.
void IdMap::rehash(uint32_t nbuckets, cudaStream_t stream) {
  const TableRef from = table_ref(mem_.data(), nbuckets_);
  const int64_t from_buckets = static_cast<int64_t>(nbuckets_) + noverflow_;
  for (;;) {
    IdMap fresh(*ctx_, max_load_);
    fresh.allocate(nbuckets, stream);
    const TableRef to = table_ref(fresh.mem_.data(), nbuckets);
    rehash_kernel<<<grid_for(from_buckets * 32, *ctx_), kThreads, 0, stream>>>(from, from_buckets, to, fresh.counters());
    IVF_CUDA_CHECK_LAUNCH();
    if (read_counter(fresh.counters(), kFailed, stream) == 0) {
      fresh.read_counts(stream);
      mem_.set_stream(stream);
      *this = std::move(fresh);
      return;
    }
    require(nbuckets < kMaxBuckets / 2, Errc::InvalidArgument, "id map: capacity too large");
    nbuckets *= 2;
  }
}

void IdMap::reserve(int64_t keys, cudaStream_t stream) {
  DeviceGuard guard(ctx_->device());
  mem_.set_stream(stream);
  const uint32_t need = buckets_for(keys);
  if (need > nbuckets_) rehash(need, stream);
}

void IdMap::insert(const int64_t* keys, const int64_t* values, int64_t n, cudaStream_t stream) {
  require(n >= 0 && (n == 0 || keys != nullptr), Errc::InvalidArgument, "id map insert: bad arguments");
  DeviceGuard guard(ctx_->device());
  mem_.set_stream(stream);
  for (int64_t start = 0; start < n; start += kInsertPiece)
    insert_chunk(keys + start, values != nullptr ? values + start : nullptr, std::min(kInsertPiece, n - start), stream);
}

void IdMap::insert_chunk(const int64_t* keys, const int64_t* values, int64_t n, cudaStream_t stream) {
  // 1. Stable sort by key: the last occurrence of a key ends its run (last wins).
  DeviceBuffer<int64_t> skeys(*ctx_, n, stream);
  DeviceBuffer<uint32_t> idx_in(*ctx_, n, stream), sidx(*ctx_, n, stream);
  iota_kernel<<<grid_for(n, *ctx_), kThreads, 0, stream>>>(idx_in.data(), n);
  IVF_CUDA_CHECK_LAUNCH();
  std::size_t tmp_bytes = 0;
  const int items = static_cast<int>(n);
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, keys, skeys.data(), idx_in.data(), sidx.data(),
                                                 items, 0, 64, stream));
  DeviceBuffer<uint8_t> tmp(*ctx_, tmp_bytes, stream);
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data(), tmp_bytes, keys, skeys.data(), idx_in.data(), sidx.data(),
                                                 items, 0, 64, stream));
  tmp.reset();
  idx_in.reset();
  DeviceBuffer<uint8_t> failed(*ctx_, n, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(failed.data(), 0, n, stream));

  // 2. Grow first when the new keys would pass the maximum load factor: an allocation failure
  //    then leaves the map untouched.
  IVF_CUDA_CHECK(cudaMemsetAsync(counters() + kFailed, 0, 2 * sizeof(int64_t), stream));  // kFailed, kNew
  count_new_kernel<<<grid_for(n, *ctx_), kThreads, 0, stream>>>(table_ref(mem_.data(), nbuckets_), skeys.data(), n,
                                                                 counters());
  IVF_CUDA_CHECK_LAUNCH();
  const int64_t fresh = read_counter(counters(), kNew, stream);
  read_counts(stream);
  const int64_t need = size_ + fresh;
  if (static_cast<double>(need) > max_load_ * static_cast<double>(capacity())) {
    const uint64_t doubled = std::min<uint64_t>(uint64_t(nbuckets_) * 2, kMaxBuckets);
    rehash(std::max<uint32_t>(buckets_for(need), static_cast<uint32_t>(doubled)), stream);
  }

  // 3. Insert; keys that found all four buckets full are retried after a growth.
  bool retry = false;
  for (;;) {
    insert_kernel<<<grid_for(n * 32, *ctx_), kThreads, 0, stream>>>(table_ref(mem_.data(), nbuckets_), skeys.data(),
                                                                    sidx.data(), values, n, failed.data(), retry,
                                                                    counters());
    IVF_CUDA_CHECK_LAUNCH();
    const int64_t failures = read_counter(counters(), kFailed, stream);
    read_counts(stream);
    if (failures == 0) return;
    require(nbuckets_ < kMaxBuckets / 2, Errc::InvalidArgument, "id map: capacity too large");
    rehash(nbuckets_ * 2, stream);
    IVF_CUDA_CHECK(cudaMemsetAsync(counters() + kFailed, 0, sizeof(int64_t), stream));
    retry = true;
  }
}

void IdMap::erase(const int64_t* keys, int64_t n, cudaStream_t stream, int64_t* erased_count) {
  require(n >= 0 && (n == 0 || keys != nullptr), Errc::InvalidArgument, "id map erase: bad arguments");
  DeviceGuard guard(ctx_->device());
  mem_.set_stream(stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(counters() + kErased, 0, sizeof(int64_t), stream));
  if (n > 0) {
    erase_kernel<<<grid_for(n * 32, *ctx_), kThreads, 0, stream>>>(table_ref(mem_.data(), nbuckets_), keys, n,
                                                                    counters());
    IVF_CUDA_CHECK_LAUNCH();
  }
  if (erased_count != nullptr)
    IVF_CUDA_CHECK(cudaMemcpyAsync(erased_count, counters() + kErased, sizeof(int64_t), cudaMemcpyDeviceToDevice, stream));
  read_counts(stream);  // keeps size() a plain read, so const calls never write
}

IdMapView IdMap::view() const {
  IdMapView v;
  v.table = table_ref(mem_.data(), nbuckets_);
  v.has_overflow = overflowed_ > 0;
  return v;
}

void IdMap::find(const int64_t* keys, int64_t n, int64_t* values_out, uint8_t* found_out, cudaStream_t stream,
                 FindKernel kernel) const {
  require(n >= 0 && (n == 0 || keys != nullptr), Errc::InvalidArgument, "id map find: bad arguments");
  if (n == 0) return;
  DeviceGuard guard(ctx_->device());
  if (kernel == FindKernel::Auto) {
    kernel = choose_find_kernel(static_cast<double>(size_) / static_cast<double>(capacity()));
  }
  const IdMapView v = view();
  switch (kernel) {
    case FindKernel::Auto:
    case FindKernel::ThreadPerKey:
      find_thread_kernel<<<grid_for(n, *ctx_), kThreads, 0, stream>>>(v, keys, n, values_out, found_out);
      break;
    case FindKernel::WarpPerKey:
      find_warp_kernel<<<grid_for(n * 32, *ctx_), kThreads, 0, stream>>>(v, keys, n, values_out, found_out);
      break;
    case FindKernel::WarpPipelined:
      find_pipelined_kernel<<<grid_for((n + 31) / 32 * 32, *ctx_), kThreads, 0, stream>>>(v, keys, n, values_out,
                                                                                          found_out);
      break;
  }
  IVF_CUDA_CHECK_LAUNCH();
}

IdMap IdMap::clone(cudaStream_t stream) const {
  DeviceGuard guard(ctx_->device());
  IdMap c(*ctx_, max_load_);
  c.mem_ = DeviceBuffer<int64_t>(*ctx_, mem_.size(), stream, MemoryUse::State);
  IVF_CUDA_CHECK(cudaMemcpyAsync(c.mem_.data(), mem_.data(), mem_.bytes(), cudaMemcpyDeviceToDevice, stream));
  c.nbuckets_ = nbuckets_;
  c.noverflow_ = noverflow_;
  c.read_counts(stream);  // synchronises: the copy is complete and its counts exact
  return c;
}

int64_t IdMap::capacity() const { return static_cast<int64_t>(nbuckets_) * kSlots; }

}  // namespace ivfgpu::cuda
