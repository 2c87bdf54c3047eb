// Sorted 32- and 64-entry lists held across a warp's lanes (lane i holds the i-th smallest; a
// 64-entry list also the 32 + i-th): sorts and merges by bitonic networks, with no shared memory,
// a warp's running k best over a stream (WarpBest), and a pairwise merge of a block's warp lists;
// and a block's bitonic sort in shared memory for longer lists. The pruned pass's settling
// (scan_prune.cuh), the fused small-batch kernels (fused_search.cu: probe selection, tile scan,
// merge) and the segmented select for k <= 32 (select.cu) keep their best few this way.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ivfgpu::cuda {

// Sorts a[0, m) ascending (shared memory), m a power of two, with every thread of the block (a
// multiple of 32 threads). The caller has synchronised after writing a; the block is synchronised
// on return. For lists too long for a warp's registers: the fused kernels' wide probe and tile
// selections, the pruned pass's settling for k past 32 where block_sort (block_register_sort.cuh,
// which sorts 1 to 16 keys a thread in registers) does not take the length. Each stage compares
// m / 2 pairs (i, i + stride), i with the stride's bit clear: thread t takes pairs t + r x
// blockDim.x, pair p being p with a zero bit inserted at the stride's position. Warp w then touches
// entries 64 w .. + 63 (+ 2 r blockDim.x) in every stage of stride at most 32, so between two such stages a
// warp's barrier is enough (40 of the 54 between the 55 stages of 1,024 entries), and the block
// waits only where a stage reaches across warps. A loop over the m entries, half of whose threads
// found no pair, was the settle's largest cost at k 1000 (ncu, H100, session 73: 51% of
// settle_wide_kernel's stall samples).
__device__ inline void block_bitonic_sort(unsigned long long* a, int m) {
  const int pairs = m >> 1;
  for (int size = 2; size <= m; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
        const int i = ((p & ~(stride - 1)) << 1) | (p & (stride - 1)), j = i | stride;
        const unsigned long long x = a[i], y = a[j];
        if ((x > y) == ((i & size) == 0)) {
          a[i] = y;
          a[j] = x;
        }
      }
      const int next = stride > 1 ? stride >> 1 : (size < m ? size : 0);  // the next stage's stride, 0: done
      if (stride <= 32 && next > 0 && next <= 32)
        __syncwarp();
      else
        __syncthreads();
    }
}

// A bound of the k smallest (1 <= k <= count) of the distinct keys a[0, count) (shared memory):
// a key `last` such that exactly k keys are not above it (the k-th smallest, or a value between
// it and the next key), by every thread of the block. A radix selection, eight bits a pass from
// the top, counting in hist (256 shared words); picked (shared) hands each pass's digit, remaining
// rank and the digit's count to the block. It stops at the first pass whose chosen digit holds
// only keys of the k smallest (its count is the rank still wanted): the digit's prefix with every
// lower bit set is then the bound. Keys are (cost, position) pairs, and costs seldom tie: the
// four passes over the positions are then skipped. Where the caller knows that the k smallest
// keys share their top common_bits bits (those of `common`), the whole digits among them are
// taken as the first passes' picks: keys this close in cost share their top byte, which cost a
// pass that picked nothing (the wide settle at k 4096, H100, session 75: ~3.4 passes a query, the
// radix selection a quarter of its stall samples). The caller has synchronised after writing a;
// every thread returns the same key. For a block that needs only the k best of many keys:
// selecting and sorting k is far cheaper than sorting all.
struct KthPick {
  unsigned long long prefix;
  int k;
  unsigned bin;  // keys with the chosen digit
};
__device__ inline unsigned long long block_kth_key(const unsigned long long* a, int count, int k, unsigned* hist,
                                                   KthPick* picked, unsigned long long common = 0,
                                                   int common_bits = 0) {
  const int known = min(max(common_bits, 0) / 8, 7) * 8;  // whole digits; at least the last one is counted
  unsigned long long mask = known == 0 ? 0 : ~0ull << (64 - known), prefix = common & mask;
  for (int shift = 56 - known; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();  // the previous pass's pick is read; hist is clear
    // Whole warps, so that the lanes counting one digit add once: keys this close share their
    // top digits, and one shared atomic a key would queue on a single bin.
    for (int i0 = threadIdx.x - threadIdx.x % 32; i0 < count; i0 += blockDim.x) {
      const int i = i0 + threadIdx.x % 32;
      const unsigned long long v = i < count ? a[i] : 0;
      const bool counts = i < count && (v & mask) == prefix;
      const unsigned digit = static_cast<unsigned>(v >> shift) & 255u;
      const unsigned voters = __ballot_sync(0xffffffffu, counts);
      if (counts) {
        const unsigned same = __match_any_sync(voters, digit);
        if (threadIdx.x % 32 == __ffs(same) - 1) atomicAdd(&hist[digit], __popc(same));
      }
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // warp 0: lane l scans digits 8l .. 8l + 7
      const int lane = threadIdx.x;
      unsigned c[8], sum = 0;
#pragma unroll
      for (int b = 0; b < 8; ++b) sum += c[b] = hist[lane * 8 + b];
      unsigned incl = sum;
      for (int o = 1; o < 32; o *= 2) {
        const unsigned t = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += t;
      }
      const unsigned excl = incl - sum, want = static_cast<unsigned>(k);
      if (excl < want && incl >= want) {  // exactly one lane holds the k-th
        unsigned run = excl, in_digit = 0;  // keys below the digit so far; keys with it
        int digit = -1;
#pragma unroll
        for (int b = 0; b < 8; ++b)
          if (digit < 0) {
            if (run + c[b] >= want) {
              digit = lane * 8 + b;
              in_digit = c[b];
            } else {
              run += c[b];
            }
          }
        picked->prefix = prefix | (static_cast<unsigned long long>(digit) << shift);
        picked->k = k - static_cast<int>(run);
        picked->bin = in_digit;
      }
    }
    __syncthreads();
    prefix = picked->prefix;
    k = picked->k;
    mask |= 0xffull << shift;
    if (picked->bin == static_cast<unsigned>(k)) {  // the whole digit is wanted: the rest of the bits are free
      prefix |= (1ull << shift) - 1;
      break;
    }
  }
  __syncthreads();  // every thread has read the last pick
  return prefix;
}

// Moves the keys of a[0, count) (shared memory) not above `last` to the front, in their order, by
// every thread of the block, a block-wide window at a time (a window's writes land before its
// end, on keys already read); returns how many. warp_counts: 2 x (blockDim.x / 32) shared ints.
__device__ inline int block_keep_not_above(unsigned long long* a, int count, unsigned long long last,
                                           int* warp_counts) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  int kept = 0;
  for (int i0 = 0, parity = 0; i0 < count; i0 += blockDim.x, parity ^= 1) {
    const int i = i0 + threadIdx.x;
    const unsigned long long v = i < count ? a[i] : 0;
    const bool keep = i < count && v <= last;
    const unsigned ballot = __ballot_sync(0xffffffffu, keep);
    int* counts = warp_counts + parity * warps;  // two windows apart: read before the next barrier
    if (lane == 0) counts[warp] = __popc(ballot);
    __syncthreads();  // the window is read; its counts are in
    int before = kept, total = 0;
    for (int w = 0; w < warps; ++w) {
      if (w < warp) before += counts[w];
      total += counts[w];
    }
    if (keep) a[before + __popc(ballot & ((1u << lane) - 1))] = v;
    kept += total;
  }
  __syncthreads();
  return kept;
}

// How many of the sorted a[0, n) are not above `last` (a binary search, by one thread).
__device__ __forceinline__ int keys_not_above(const unsigned long long* a, int n, unsigned long long last) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (a[mid] <= last)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

__device__ __forceinline__ int pow2_at_least(int n) {
  int m = 1;
  while (m < n) m <<= 1;
  return m;
}

// The compare-exchange of register r with lane ^ j: the smaller stays where keep_min.
__device__ __forceinline__ uint64_t exchange_with_lane(uint64_t r, int j, bool keep_min) {
  const uint64_t other = __shfl_xor_sync(0xffffffffu, r, j);
  return keep_min ? (r < other ? r : other) : (r > other ? r : other);
}

// Sorts the warp's 32 keys ascending across lanes (bitonic network).
__device__ __forceinline__ uint64_t warp_sort32(uint64_t key) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int size = 2; size <= 32; size *= 2)
#pragma unroll
    for (int j = size / 2; j > 0; j /= 2) {
      const bool ascending = (lane & size) == 0;  // size 32: the whole warp ascending
      key = exchange_with_lane(key, j, ((lane & j) == 0) == ascending);
    }
  return key;
}

// best and fresh, both sorted ascending across lanes: the 32 smallest of the two, sorted.
__device__ __forceinline__ uint64_t warp_merge_sorted32(uint64_t best, uint64_t fresh) {
  const int lane = threadIdx.x % 32;
  const uint64_t rev = __shfl_sync(0xffffffffu, fresh, 31 - lane);
  uint64_t key = best < rev ? best : rev;  // the 32 smallest, as a bitonic sequence
#pragma unroll
  for (int j = 16; j > 0; j /= 2) key = exchange_with_lane(key, j, (lane & j) == 0);
  return key;
}

// best (sorted ascending across lanes) becomes the 32 smallest of best and fresh (any order).
__device__ __forceinline__ uint64_t warp_merge32(uint64_t best, uint64_t fresh) {
  return warp_merge_sorted32(best, warp_sort32(fresh));
}

// A warp's k <= 32 best entries, sorted across its lanes (lane i holds the i-th). A batch of
// 32 candidates in which a few beat the k-th is inserted one by one; a batch in which many do
// (the first ones, always) is sorted and merged in by bitonic networks (above), which
// costs about what four single insertions do.
struct WarpBest {
  static constexpr int kSerialInserts = 4;
  unsigned long long mine = ~0ull;  // this lane's entry of the sorted list
  unsigned long long kth = ~0ull;   // the list's k-th entry (what a newcomer must beat)

  __device__ void offer(unsigned long long e, int k) {
    const int lane = threadIdx.x % 32;
    unsigned mask = __ballot_sync(0xffffffffu, e < kth);
    if (__popc(mask) > kSerialInserts) {
      mine = warp_merge32(mine, e < kth ? e : ~0ull);
      kth = __shfl_sync(0xffffffffu, mine, k - 1);
      return;
    }
    while (mask != 0) {
      const int src = __ffs(mask) - 1;
      mask &= mask - 1;
      const unsigned long long v = __shfl_sync(0xffffffffu, e, src);
      if (v >= kth) continue;  // the k-th fell meanwhile (uniform: v and kth are warp-wide)
      const int pos = __popc(__ballot_sync(0xffffffffu, mine < v));
      const unsigned long long below = __shfl_up_sync(0xffffffffu, mine, 1);
      if (lane > pos) mine = below;
      if (lane == pos) mine = v;
      kth = __shfl_sync(0xffffffffu, mine, k - 1);
    }
  }
};

// The pairwise merge of a block's warp lists behind block_merge_sorted32/64: each round the
// upper half of the merging warps puts its list in scratch (put(scratch, i) for thread i) and
// the lower half merges the partner's (merge(mine, scratch, partner thread)). blockDim.x: 32
// times a power of two. Every thread of the block must call it.
template <class List, class Key, class Put, class Merge>
__device__ __forceinline__ List block_merge_tree(List mine, Key* scratch, Put&& put, Merge&& merge) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int half = static_cast<int>(blockDim.x / 64); half >= 1; half /= 2) {
    if (warp >= half && warp < 2 * half) put(mine, scratch, static_cast<int>(threadIdx.x));
    __syncthreads();
    if (warp < half) mine = merge(mine, scratch, (warp + half) * 32 + lane);
    __syncthreads();
  }
  return mine;
}

// Each warp of the block passes its sorted list; warp 0 gets back the 32 smallest of all of
// them, sorted (the other warps: unspecified). The lists merge pairwise, halving the warps each
// round: log2(warps) rounds of two barriers, where a shared-memory bitonic sort of the block's
// keys takes one barrier per network stage (28 for 128 keys). blockDim.x: 32 times a power of
// two. scratch: blockDim.x entries of shared memory that no thread is still reading. Every
// thread of the block must call it.
template <class Key>  // a 64-bit unsigned type: uint64_t or unsigned long long
__device__ __forceinline__ Key block_merge_sorted32(Key mine, Key* scratch) {
  static_assert(sizeof(Key) == 8, "64-bit keys");
  return block_merge_tree(
      mine, scratch, [](Key v, Key* s, int i) { s[i] = v; },
      [](Key v, Key* s, int at) -> Key { return warp_merge_sorted32(v, s[at]); });
}

// A sorted 64-entry list across a warp: lane i holds entries i (lo) and 32 + i (hi). The same
// networks as above over 64 entries: the stage that pairs entry i with i + 32 compares a lane's
// two registers, every other stage pairs lanes by a shuffle.
struct WarpList64 {
  uint64_t lo, hi;
};

// The stage pairing entries i and i + 32: a lane's own two registers, ascending.
__device__ __forceinline__ void order_registers(WarpList64& v) {
  const uint64_t a = v.lo < v.hi ? v.lo : v.hi, b = v.lo < v.hi ? v.hi : v.lo;
  v.lo = a;
  v.hi = b;
}

__device__ __forceinline__ WarpList64 warp_sort64(WarpList64 v) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int size = 2; size <= 64; size *= 2)
#pragma unroll
    for (int j = size / 2; j > 0; j /= 2) {
      if (j == 32) {  // size 64: entries lane and lane + 32, ascending
        order_registers(v);
        continue;
      }
      const bool lower = (lane & j) == 0;
      v.lo = exchange_with_lane(v.lo, j, lower == ((lane & size) == 0));
      v.hi = exchange_with_lane(v.hi, j, lower == (((32 + lane) & size) == 0));
    }
  return v;
}

// best and fresh, both sorted: the 64 smallest of the two, sorted.
__device__ __forceinline__ WarpList64 warp_merge_sorted64(WarpList64 best, WarpList64 fresh) {
  const int lane = threadIdx.x % 32;
  // Entry i of fresh reversed is fresh's 63 - i.
  const uint64_t rev_lo = __shfl_sync(0xffffffffu, fresh.hi, 31 - lane);
  const uint64_t rev_hi = __shfl_sync(0xffffffffu, fresh.lo, 31 - lane);
  WarpList64 v{best.lo < rev_lo ? best.lo : rev_lo, best.hi < rev_hi ? best.hi : rev_hi};  // bitonic
  order_registers(v);
#pragma unroll
  for (int j = 16; j > 0; j /= 2) {
    const bool lower = (lane & j) == 0;
    v.lo = exchange_with_lane(v.lo, j, lower);
    v.hi = exchange_with_lane(v.hi, j, lower);
  }
  return v;
}

// block_merge_sorted32 for 64-entry lists. scratch: 2 * blockDim.x entries.
template <class Key>  // a 64-bit unsigned type: uint64_t or unsigned long long
__device__ __forceinline__ WarpList64 block_merge_sorted64(WarpList64 mine, Key* scratch) {
  static_assert(sizeof(Key) == 8, "64-bit keys");
  return block_merge_tree(
      mine, scratch,
      [](const WarpList64& v, Key* s, int i) {
        s[i] = v.lo;
        s[blockDim.x + i] = v.hi;
      },
      [](const WarpList64& v, Key* s, int at) { return warp_merge_sorted64(v, WarpList64{s[at], s[blockDim.x + at]}); });
}

}  // namespace ivfgpu::cuda
