// Block-per-segment radix select: four 8-bit histogram passes find the exact k-th key, one
// ordered gather (block scan, so the result does not depend on thread timing) collects the
// winners, and a bitonic sort in shared memory orders them. Shared memory is sized by k only
// (never by the segment length or nprobe x k). A row longer than the block's buffer streams
// through it once (stream_row): when the buffer fills it is cut to its k best and only keys
// below the k-th enter after that; from k 256 a sample of the row sets a bar before the first
// key enters (sampled_bar), so that few cuts are needed. For k <= 32, warp lists in registers
// (warp_select_kernel) replace all of that, and for k <= 64 on rows of at most 4,096 keys a filter by the threads'
// least entries (filter_select_kernel; a warp's lanes' for k <= 16 on many rows of at most 1,024
// keys, row_filter_select_kernel), with the same output.
#include "select.hpp"

#include <cub/block/block_exchange.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <limits>
#include <string>

#include "../errors.hpp"
#include "check.hpp"
#include "device_buffer.hpp"
#include "ordered_key.cuh"
#include "warp_sort.cuh"

namespace ivfgpu::cuda {

namespace {

constexpr int kThreads = 256;
// Smallest candidate buffer (keys) a block holds in shared memory.
constexpr int64_t kMinBuffer = 4096;
// Rows at least this long are split over several blocks when the rows alone cannot fill the GPU.
constexpr int64_t kPiece = 4096;

// Keys a thread reads per step of a streamed pass; a step is kStep keys, warp w reading
// c0 + w * kWarpKeys + m * 32 + lane into its slot m (a 128-byte line per load), so that
// (warp, slot, lane) is index order and ballots rank a step's keys.
constexpr int kPer = 4;
constexpr int kWarps = kThreads / 32;
constexpr int kWarpKeys = kPer * 32;
constexpr int kStep = kPer * kThreads;

using Scan = cub::BlockScan<int, kThreads>;

struct SelectShared {
  typename Scan::TempStorage scan;
  int hist[256];
  uint32_t prefix;
  int need;
  int bin;  // keys in the chosen bin of the last radix pass
  int warp_count[2][2][kWarps];  // [step parity][class] flagged keys per warp (StepRanks)
};

// Radix select over n keys get(i): afterwards the kk smallest are every key < prefix plus the
// first `need` keys == prefix (by index). Four 8-bit passes; equal bins are aggregated per warp
// because the keys of one row share their top bits.
//
// With stop_at > 0 it may stop after a pass whose bin leaves at most stop_at keys at or below
// it: then it returns true, prefix is the bin's end (a strict bound: the keys below it are the
// kk smallest and at most stop_at - kk more) and need is 0.
template <class Get>
__device__ bool radix_threshold(Get get, int64_t n, int kk, SelectShared& sh, uint32_t& prefix, int& need,
                                int stop_at = 0) {
  const int tid = threadIdx.x, lane = tid & 31;
  uint32_t mask = 0;
  prefix = 0;
  need = kk;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int64_t c0 = 0; c0 < n; c0 += kThreads) {
      const int64_t i = c0 + tid;
      uint32_t bin = 0xffffffffu;
      if (i < n) {
        const uint32_t u = get(i);
        if ((u & mask) == prefix) bin = (u >> shift) & 255u;
      }
      const unsigned peers = __match_any_sync(0xffffffffu, bin);
      if (bin != 0xffffffffu && __ffs(peers) - 1 == lane) atomicAdd(&sh.hist[bin], __popc(peers));
    }
    __syncthreads();
    if (tid < 32) {
      int local[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        local[j] = sh.hist[tid * 8 + j];
        sum += local[j];
      }
      int incl = sum;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (tid >= o) incl += v;
      }
      const int excl = incl - sum;
      const unsigned hit = __ballot_sync(0xffffffffu, excl < need && need <= incl);
      if (tid == __ffs(hit) - 1) {
        int c = excl;
        for (int j = 0; j < 8; ++j) {
          if (c + local[j] >= need) {
            sh.prefix = prefix | (static_cast<uint32_t>(tid * 8 + j) << shift);
            sh.need = need - c;
            sh.bin = local[j];
            break;
          }
          c += local[j];
        }
      }
    }
    __syncthreads();
    const int below = kk - sh.need;  // keys under the chosen bin
    prefix = sh.prefix;
    need = sh.need;
    mask |= 255u << shift;
    const uint64_t end = static_cast<uint64_t>(prefix) + (uint64_t{1} << shift);
    if (shift > 0 && below + sh.bin <= stop_at && end <= 0xffffffffu) {
      prefix = static_cast<uint32_t>(end);
      need = 0;
      return true;
    }
  }
  return false;
}

// Ordered compaction (block scan: the result never depends on thread timing). Keeps, in index
// order, keys with keep(u) and at most `eq_quota` keys == eq_key; emit(slot, u, i) stores them.
// Returns how many keys < lt_bound it saw (all threads agree); it stops once lt_slots and
// eq_quota are both reached.
template <class Get, class Emit>
__device__ int ordered_gather(Get get, int64_t n, uint32_t lt_bound, bool all, uint32_t eq_key, int eq_quota,
                              int lt_slots, SelectShared& sh, Emit emit) {
  constexpr int kPer = 4;  // keys per thread per step: one barrier decides whether any qualifies
  const int tid = threadIdx.x;
  int base_lt = 0, base_eq = 0;
  for (int64_t c0 = 0; c0 < n; c0 += kPer * kThreads) {
    uint32_t u[kPer];
    int lt[kPer], eq[kPer];
    int mine = 0;
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
      const int64_t i = c0 + m * kThreads + tid;
      u[m] = i < n ? get(i) : 0xffffffffu;
      lt[m] = i < n && (all || u[m] < lt_bound);
      eq[m] = i < n && !all && u[m] == eq_key;
      mine |= lt[m] | eq[m];
    }
    if (!__syncthreads_or(mine)) continue;  // the common case when filtering a long row
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
      const int64_t i = c0 + m * kThreads + tid;
      const int e = eq[m] && base_eq < eq_quota;
      int excl, total;
      Scan(sh.scan).ExclusiveSum(lt[m] | (e << 16), excl, total);
      if (lt[m] && base_lt + (excl & 0xffff) < lt_slots) emit(base_lt + (excl & 0xffff), u[m], i);
      if (e) {
        const int r = base_eq + (excl >> 16);
        if (r < eq_quota) emit(lt_slots + r, u[m], i);
      }
      base_lt += total & 0xffff;
      base_eq += total >> 16;
      __syncthreads();
    }
    if (base_lt >= lt_slots && base_eq >= eq_quota) break;
  }
  return base_lt;
}

// A row's keys as the selection orders them: the key (plus its addend, when there is one),
// negated when larger is better, as an ordered integer.
struct RowKeys {
  const float* keys;
  const float* addend;  // or nullptr
  bool larger;
  __device__ uint32_t ordered(float f, float a) const {
    if (addend) f += a;  // only then: adding 0 would turn -0 into +0
    return cost_key(f, larger);
  }
  __device__ uint32_t operator()(int64_t i) const { return ordered(keys[i], addend ? addend[i] : 0.0f); }
};

// Output segment s: its row, where its keys start in the row (a piece of a split row, else 0),
// how many keys it has and how many of them it keeps (kk: at most k, and the row's count cap).
struct SegmentPiece {
  int64_t row, first, len;
  int kk;
};
__device__ __forceinline__ SegmentPiece segment_piece(const SelectInput& in, int64_t s, int64_t k) {
  const int64_t row = s / in.pieces, first = (s % in.pieces) * in.piece;
  int64_t len = in.lens ? in.lens[row] : in.fixed_len;
  if (in.pieces > 1) len = len <= first ? 0 : (len - first < in.piece ? len - first : in.piece);
  int64_t kk = len < k ? len : k;
  if (in.count_cap && in.count_cap[row] < kk) kk = in.count_cap[row];
  return SegmentPiece{row, first, len, static_cast<int>(kk)};
}

// Output j of segment s: entry e (ordered key << 32 | index in the piece) when j < kk, else
// padding (worst key, position -1) where the caller asked for it.
__device__ __forceinline__ void put_selected(const SelectInput& in, const SelectOutput& out, const SegmentPiece& sp,
                                             int64_t s, int64_t k, int64_t j, uint64_t e, bool larger) {
  if (j < sp.kk) {
    const int64_t p = sp.first + static_cast<int64_t>(e & 0xffffffffu);
    out.pos[s * k + j] = in.pos_map ? in.pos_map[sp.row * in.stride + p] : static_cast<int32_t>(p);
    if (out.key) {
      const float f = from_ordered(static_cast<uint32_t>(e >> 32));
      out.key[s * k + j] = larger ? -f : f;
    }
  } else if (in.pad_output) {
    out.pos[s * k + j] = -1;
    out.key[s * k + j] = larger ? -INFINITY : INFINITY;
  }
}

__device__ __forceinline__ int64_t step_index(int64_t c0, int m) {
  return c0 + static_cast<int64_t>(threadIdx.x / 32) * kWarpKeys + m * 32 + threadIdx.x % 32;
}

// Ranks, in index order, one class of flagged keys of a step: ballots in each warp, then
// the warps' counts through shared memory (double-buffered by step parity, so one barrier a
// step suffices). publish(); __syncthreads(); then rank() and total().
struct StepRanks {
  unsigned ballot[kPer];
  int before = 0;  // flagged keys of the warps before this one
  int total = 0;   // of the whole step

  __device__ void publish(const bool (&flag)[kPer], int* counts) {
    int n = 0;
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
      ballot[m] = __ballot_sync(0xffffffffu, flag[m]);
      n += __popc(ballot[m]);
    }
    if (threadIdx.x % 32 == 0) counts[threadIdx.x / 32] = n;
  }
  // After the barrier that follows publish().
  __device__ void gather(const int* counts) {
    const int warp = threadIdx.x / 32;
    before = 0;
    total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const int c = counts[w];
      before += w < warp ? c : 0;
      total += c;
    }
  }
  __device__ int rank(int m) const {
    int r = before;
    const unsigned below = (1u << (threadIdx.x % 32)) - 1u;
#pragma unroll
    for (int j = 0; j < kPer; ++j) r += j < m ? __popc(ballot[j]) : 0;
    return r + __popc(ballot[m] & below);
  }
};

// Cuts buf[0, nb) (in index order) in place, still in index order, to its kk best and at most
// stop_at keys: every key below a bound, or, when the radix passes must go down to single
// values, every key below the kk-th and the first of those equal to it. Sets nb to the keys
// kept and returns the bound (later keys enter only below it). A key's new slot (keys before it
// that stay) is never past its old one, and each step reads all its keys before any is
// written, so nothing is overwritten before it is read.
__device__ uint32_t cut_to_best(uint32_t* buf_key, uint32_t* buf_idx, int& nb, int kk, int stop_at,
                                SelectShared& sh) {
  uint32_t kth;
  int need;
  radix_threshold([&](int64_t i) { return buf_key[i]; }, nb, kk, sh, kth, need, stop_at);
  int lt_before = 0, eq_before = 0, parity = 0;
  for (int c0 = 0; c0 < nb; c0 += kStep, parity ^= 1) {
    uint32_t key[kPer], idx[kPer];
    bool lt[kPer], eq[kPer];
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
      const int i = static_cast<int>(step_index(c0, m));
      key[m] = i < nb ? buf_key[i] : 0xffffffffu;
      idx[m] = i < nb ? buf_idx[i] : 0u;
      lt[m] = i < nb && key[m] < kth;
      eq[m] = i < nb && key[m] == kth;
    }
    StepRanks lt_rank, eq_rank;
    lt_rank.publish(lt, sh.warp_count[parity][0]);
    eq_rank.publish(eq, sh.warp_count[parity][1]);
    __syncthreads();  // the counts are in, and every key of the step has been read
    lt_rank.gather(sh.warp_count[parity][0]);
    eq_rank.gather(sh.warp_count[parity][1]);
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
      const int eq_seen = eq_before + eq_rank.rank(m);
      if (lt[m] || (eq[m] && eq_seen < need)) {
        const int slot = lt_before + lt_rank.rank(m) + (eq_seen < need ? eq_seen : need);
        buf_key[slot] = key[m];
        buf_idx[slot] = idx[m];
      }
    }
    lt_before += lt_rank.total;
    eq_before += eq_rank.total;
  }
  __syncthreads();
  nb = lt_before + (eq_before < need ? eq_before : need);
  return kth;
}

// A row longer than the buffer (cap keys), read once: keys enter the buffer in index order;
// before a step that could overflow it, the buffer is cut to its kk best or a few more
// (cut_to_best) and from then on only keys strictly below the cut's bound enter (a later key
// equal to an exact k-th loses the tie to the kept ones, which come first). Returns the count
// in the buffer, which then holds the row's kk best (ties by smaller index) and keeps each key
// value's copies in index order. Needs cap >= kk + kStep.
//
// open false: from the start only keys below `bar` enter (sampled_bar's). The buffer then holds
// the row's kk best only where at least kk keys are below it; fewer come back (nb < kk) where
// not, and the caller streams the row again, open.
template <int AHEAD, class Get>
__device__ int stream_row(Get get, int64_t len, int kk, int cap, uint32_t* buf_key, uint32_t* buf_idx,
                          SelectShared& sh, bool open = true, uint32_t bar = 0xffffffffu) {
  int nb = 0, parity = 0;
  // AHEAD steps' keys are loaded before the first of them is ranked: a block waits on its loads
  // every step, and with few blocks an SM (large k: the buffer) one step's loads alone leave the
  // memory system mostly idle.
  for (int64_t s0 = 0; s0 < len; s0 += int64_t{AHEAD} * kStep) {
    uint32_t u[AHEAD][kPer];
#pragma unroll
    for (int a = 0; a < AHEAD; ++a)
#pragma unroll
      for (int m = 0; m < kPer; ++m) {
        const int64_t i = step_index(s0 + a * kStep, m);
        u[a][m] = i < len ? get(i) : 0xffffffffu;
      }
#pragma unroll
    for (int a = 0; a < AHEAD; ++a, parity ^= 1) {
      const int64_t c0 = s0 + a * kStep;
      if (c0 >= len) break;  // block-uniform
      // Cut before a step that could overflow (block-uniform), while little else is live. The
      // cut may keep extra keys, up to half the room past kk + kStep, so that its radix passes
      // over the buffer can stop before the last digit.
      if (nb + kStep > cap) {
        // Never above a sampled bar: at least kk keys of the buffer are below either.
        bar = min(bar, cut_to_best(buf_key, buf_idx, nb, kk, kk + (cap - kStep - kk) / 2, sh));
        open = false;
      }
      bool enter[kPer];
#pragma unroll
      for (int m = 0; m < kPer; ++m) enter[m] = step_index(c0, m) < len && (open || u[a][m] < bar);
      StepRanks r;
      r.publish(enter, sh.warp_count[parity][0]);
      __syncthreads();
      r.gather(sh.warp_count[parity][0]);
#pragma unroll
      for (int m = 0; m < kPer; ++m)
        if (enter[m]) {
          buf_key[nb + r.rank(m)] = u[a][m];
          buf_idx[nb + r.rank(m)] = static_cast<uint32_t>(step_index(c0, m));
        }
      nb += r.total;
    }
  }
  __syncthreads();
  return nb;
}

// A long row's starting bar for stream_row, from a sample: without one, the buffer fills with
// whatever comes first and is cut to its k best again and again, each cut radix passes over the
// buffer (at k 4,096 on rows of ~90K keys, ten or more a row). kSampleChunks runs of 8 keys (a
// 32-byte sector each), spaced evenly over the row, stand for it: where kk of len keys are wanted,
// about kSampleKeys * kk / len of the sample are below the row's kk-th key. The bar is taken a few
// standard deviations past that rank (rank_for_bar), so that on a row whose keys are in no
// particular order more than kk keys are below it all but rarely, and few enough to enter
// without a cut (a row whose best keys sit where the runs fall can defeat it: the second read). Returns
// false (no bar) where the rank would keep most of the row anyway. scratch: kSampleKeys words
// (the block's buffer, not yet in use). Correctness never rests on the sample: a row with fewer
// than kk keys below the bar is streamed again, open (block_select_kernel).
constexpr int kSampleChunks = kThreads;
constexpr int kSampleRun = 8;
constexpr int kSampleKeys = kSampleChunks * kSampleRun;
// Sampled bars only from this k: below it a buffer of kMinBuffer keys is cut rarely anyway.
constexpr int kSampledBarMinK = 256;

__device__ __forceinline__ int rank_for_bar(int64_t len, int kk) {
  const float mean = static_cast<float>(kSampleKeys) * static_cast<float>(kk) / static_cast<float>(len);
  return static_cast<int>(ceilf(1.2f * mean + 4.0f * sqrtf(mean) + 8.0f));
}

template <class Get>
__device__ bool sampled_bar(Get get, int64_t len, int kk, uint32_t* scratch, SelectShared& sh, uint32_t& bar) {
  if (kk < kSampledBarMinK || len < 2 * int64_t{kSampleKeys}) return false;
  const int rank = rank_for_bar(len, kk);
  if (rank > kSampleKeys / 4) return false;
  // Thread t reads run t from (t * len / kSampleChunks) rounded down to a sector; len >= 2 *
  // kSampleKeys keeps every run inside the row.
  const int64_t start = (static_cast<int64_t>(threadIdx.x) * len / kSampleChunks) & ~int64_t{kSampleRun - 1};
#pragma unroll
  for (int j = 0; j < kSampleRun; ++j) scratch[j * kThreads + threadIdx.x] = get(start + j);
  __syncthreads();
  uint32_t prefix;
  int need;
  // A bin that leaves at most a quarter more than `rank` sample keys below its end will do.
  const bool strict =
      radix_threshold([&](int64_t i) { return scratch[i]; }, kSampleKeys, rank, sh, prefix, need, rank + rank / 4);
  if (strict) {
    bar = prefix;
    return true;
  }
  // prefix is the rank-th sample key: keys up to it enter.
  if (prefix == 0xffffffffu) return false;
  bar = prefix + 1;
  return true;
}

// The final order of a block's kk selected entries, (ordered key, index in the row): sel holds
// them with the keys below the k-th first, then those equal to it, each part in index order.
// Up to 1,024 entries a bitonic sort of the u64 entries orders them; past that its log^2 stages,
// each a barrier, cost a quarter of the select at k 4,096 (ncu, H200, 1M x 128, nprobe 16: 8.8
// ms), so a stable radix sort of the 32-bit keys (CUB) takes them: stable, it keeps each key's
// entries in the order sel has them, index order, which is the bitonic sort's tie order.
template <int ITEMS>
struct SelectedRadixSort {
  using Sort = cub::BlockRadixSort<uint32_t, kThreads, ITEMS, uint32_t>;
  using Exchange = cub::BlockExchange<uint32_t, kThreads, ITEMS>;
  union TempStorage {
    typename Sort::TempStorage sort;
    typename Exchange::TempStorage exchange;
  };
};
// Entries the bitonic sort orders (a radix build too, for rows with fewer entries than k).
constexpr int kBitonicMaxEntries = 1024;
// Items a thread sorts for k2 (k rounded up to a power of two; 0: the bitonic sort). Past 8,192
// the entries would not fit registers.
constexpr int sort_items_for(int64_t k2) {
  return k2 <= kBitonicMaxEntries || k2 > 8192 ? 0 : static_cast<int>(k2 / kThreads);
}
// Blocks an SM each form is built for: its registers (the buffer of a large k allows few anyway).
constexpr int select_blocks(int items) { return items == 0 ? 5 : items <= 8 ? 4 : items <= 16 ? 2 : 1; }

// Sorts sel[0, kk) in place. temp: the block's TempStorage (the candidate buffer, free by now).
template <int ITEMS>
__device__ void radix_sort_selected(uint64_t* sel, int kk, void* temp_mem) {
  using R = SelectedRadixSort<ITEMS>;
  auto& temp = *reinterpret_cast<typename R::TempStorage*>(temp_mem);
  uint32_t key[ITEMS], idx[ITEMS];
  // Striped loads and stores (entry i * kThreads + tid), free of bank conflicts; the exchange puts
  // them in the blocked order the sort ranks by (thread t holding ranks t * ITEMS ..).
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = i * kThreads + static_cast<int>(threadIdx.x);
    const uint64_t e = j < kk ? sel[j] : ~uint64_t{0};  // past kk: after every entry
    key[i] = static_cast<uint32_t>(e >> 32);
    idx[i] = static_cast<uint32_t>(e);
  }
  typename R::Exchange(temp.exchange).StripedToBlocked(key);
  __syncthreads();
  typename R::Exchange(temp.exchange).StripedToBlocked(idx);
  __syncthreads();
  typename R::Sort(temp.sort).SortBlockedToStriped(key, idx);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = i * kThreads + static_cast<int>(threadIdx.x);
    if (j < kk) sel[j] = (static_cast<uint64_t>(key[i]) << 32) | idx[i];
  }
  __syncthreads();
}

// Sorts sel[0, kk) in place (n2: kk rounded up to a power of two, the bitonic sort's length).
__device__ void bitonic_sort_selected(uint64_t* sel, int kk, int n2) {
  const int tid = threadIdx.x;
  for (int i = kk + tid; i < n2; i += kThreads) sel[i] = ~uint64_t{0};
  __syncthreads();
  for (int size = 2; size <= n2; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int t = tid; t < n2 / 2; t += kThreads) {
        const int i = 2 * t - (t & (stride - 1));
        const int j = i + stride;
        const uint64_t a = sel[i], b = sel[j];
        const bool up = (i & size) == 0;
        if ((a > b) == up) {
          sel[i] = b;
          sel[j] = a;
        }
      }
      __syncthreads();
    }
  }
}

// One block per row (or row piece). Dynamic shared memory: sel[k2] (u64: key << 32 | index)
// then a buffer of `cap` (key, index) pairs. Rows of at most cap keys are selected in the
// buffer. Longer rows stream through it (stream_row: one read of the row, the buffer cut to
// its k best whenever it fills); only a k too large for that (k + kStep > cap, k above 8192 on
// an H100) takes radix passes over the whole row.
// Five blocks per SM (48 registers) with the bitonic sort: a block waits on its loads every
// step, so the select runs as fast as blocks are resident (68 registers unbounded: three).
// SORT_ITEMS > 0 (sort_items_for): the radix sort, for which the buffer is at least its
// TempStorage.
template <int SORT_ITEMS>
__global__ void __launch_bounds__(kThreads, select_blocks(SORT_ITEMS))
    block_select_kernel(SelectInput in, int64_t nseg, int k, bool larger, int cap, SelectOutput out) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Steps a long row's stream loads at once (stream_row): the radix-sort builds (k past 1,024) run
  // four or fewer blocks an SM, held there by their buffers, with registers to spare.
  constexpr int kAhead = SORT_ITEMS >= 16 ? 4 : SORT_ITEMS > 0 ? 2 : 1;
  const int k2 = k <= 1 ? 1 : 1 << (32 - __clz(k - 1));
  uint64_t* sel = reinterpret_cast<uint64_t*>(smem_raw);
  uint32_t* buf_key = reinterpret_cast<uint32_t*>(sel + k2);
  uint32_t* buf_idx = buf_key + cap;
  __shared__ SelectShared sh;
  const int tid = threadIdx.x;

  for (int64_t s = blockIdx.x; s < nseg; s += gridDim.x) {
    const SegmentPiece sp = segment_piece(in, s, k);
    const int64_t row = sp.row, first = sp.first, len = sp.len;
    const int kk = sp.kk;
    const RowKeys load{in.keys + row * in.stride + first, in.addend ? in.addend + first : nullptr, larger};
    __syncthreads();  // the previous row is done with sel and the buffer
    // 1. Candidates into the buffer: the whole row, or the row streamed through it. Only a k
    // too large for the buffer to stream (kk + kStep > cap) selects over the row in place.
    int64_t nb = -1;  // keys in the buffer, -1: selected in place
    if (len <= cap) {
      for (int64_t i = tid; i < len; i += kThreads) {
        buf_key[i] = load(i);
        buf_idx[i] = static_cast<uint32_t>(i);
      }
      nb = len;
    } else if (kk > 0 && kk + kStep <= cap) {
      uint32_t bar = 0xffffffffu;
      bool open = !sampled_bar(load, len, kk, buf_key, sh, bar);
      for (;;) {
        nb = stream_row<kAhead>(load, len, kk, cap, buf_key, buf_idx, sh, open, bar);
        if (nb >= kk || open) break;
        open = true;  // the sample misled: fewer than kk keys are below its bar
        bar = 0xffffffffu;
      }
    }
    __syncthreads();
    // 2. Threshold of the kk best, then gather them into sel (ordered), then sort.
    const bool take_all = nb >= 0 ? kk == nb : kk == len;
    uint32_t prefix = 0xffffffffu;
    int need = 0;
    if (!take_all && kk > 0) {
      if (nb >= 0)
        radix_threshold([&](int64_t i) { return buf_key[i]; }, nb, kk, sh, prefix, need);
      else
        radix_threshold(load, len, kk, sh, prefix, need);
    }
    const int n_lt = kk - need;
    auto to_sel = [&](int slot, uint32_t u, uint32_t idx) {
      sel[slot] = (static_cast<uint64_t>(u) << 32) | idx;
    };
    if (nb >= 0)
      ordered_gather([&](int64_t i) { return buf_key[i]; }, nb, prefix, take_all, prefix, need, n_lt, sh,
                     [&](int slot, uint32_t u, int64_t i) { to_sel(slot, u, buf_idx[i]); });
    else
      ordered_gather(load, len, prefix, take_all, prefix, need, n_lt, sh,
                     [&](int slot, uint32_t u, int64_t i) { to_sel(slot, u, static_cast<uint32_t>(i)); });
    __syncthreads();
    const int n2 = kk <= 1 ? 1 : 1 << (32 - __clz(kk - 1));
    // A row with few entries (shorter than k) sorts them as a small k would.
    if constexpr (SORT_ITEMS > 0) {
      if (n2 > kBitonicMaxEntries)
        radix_sort_selected<SORT_ITEMS>(sel, kk, buf_key);
      else
        bitonic_sort_selected(sel, kk, n2);
    } else {
      bitonic_sort_selected(sel, kk, n2);
    }
    for (int j = tid; j < k; j += kThreads) put_selected(in, out, sp, s, k, j, j < kk ? sel[j] : 0, larger);
    if (tid == 0) out.count[s] = kk;
  }
}

// k <= kWarpSelectMaxK: the same selection as block_select_kernel (the same positions and
// keys, bit for bit) with no radix passes, gathers or shared-memory sort. Each warp keeps its
// k best entries in registers (WarpBest; ordered key << 32 | index: the order the block kernel
// sorts by, so ties go to the smaller index whichever warp reads a key): a chunk of 32 keys is
// skipped when none beats the k-th, its few that do are inserted one by one, and many are
// sorted and merged in. Then the warps' lists merge pairwise. Every row length is streamed;
// split rows come here piece by piece as they do to the block kernel.
constexpr int kWarpSelectMaxK = 32;
// Chunks of 32 keys a lane loads before merging any (eight measured no faster on the H100).
constexpr int kWarpChunks = 4;

// Keys c0 + m * 32 + lane (m < kWarpChunks) of a row of len keys, offered to a warp's list as
// (ordered key << 32 | index) entries; ~0 past the row's end.
__device__ __forceinline__ void offer_chunks(WarpBest& best, const RowKeys& load, int64_t c0, int64_t len, int k) {
  const int lane = threadIdx.x % 32;
  unsigned long long v[kWarpChunks];
#pragma unroll
  for (int m = 0; m < kWarpChunks; ++m) {
    const int64_t i = c0 + m * 32 + lane;
    v[m] = i < len ? (static_cast<unsigned long long>(load(i)) << 32) | static_cast<uint32_t>(i) : ~0ull;
  }
#pragma unroll
  for (int m = 0; m < kWarpChunks; ++m) best.offer(v[m], k);
}

__global__ void __launch_bounds__(kThreads, 6)
    warp_select_kernel(SelectInput in, int64_t nseg, int k, bool larger, SelectOutput out) {
  __shared__ unsigned long long scratch[kThreads];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int64_t s = blockIdx.x; s < nseg; s += gridDim.x) {
    const SegmentPiece sp = segment_piece(in, s, k);
    const int64_t row = sp.row, first = sp.first, len = sp.len;
    const int kk = sp.kk;
    const RowKeys load{in.keys + row * in.stride + first, in.addend ? in.addend + first : nullptr, larger};
    WarpBest best;  // entries past every key are ~0: real indices are below 2^32 - 1
    constexpr int64_t kSpan = int64_t{32} * kWarpChunks;
    for (int64_t c0 = warp * kSpan; c0 < len; c0 += kThreads * kWarpChunks) offer_chunks(best, load, c0, len, k);
    __syncthreads();  // the previous row's merge is done with scratch
    // A warp list's entries past k are dropped first: they are not among its k best.
    const unsigned long long top = block_merge_sorted32(lane < k ? best.mine : ~0ull, scratch);
    if (warp == 0) {
      if (lane < k) put_selected(in, out, sp, s, k, lane, top, larger);
      if (lane == 0) out.count[s] = kk;
    }
  }
}

// Many short rows (a batch's coarse scores, its first probes' distances): one warp per row, its
// list taking the whole row, so no block-wide merge. Block-per-row took 182 us per call for
// 10,000 rows of ~1,000 keys on the H100 (ncu, 1M x 128, nprobe 16): eight warp lists of 128
// keys each, merged in three rounds of two barriers. The same entries as warp_select_kernel (a
// warp's k best of unique (key, index) entries do not depend on how the row was cut).
// Rows past 2,048 keys keep a block: a warp alone waits on its loads one step after another
// (the first probes' distances, ~5,600 keys a row on average, took 254 us a warp each against
// 182 us a block each); fewer than 1,024 rows, too, where a block each finishes sooner.
constexpr int64_t kRowWarpMaxLen = 2048;
constexpr int64_t kRowWarpMinSegments = 1024;

__global__ void __launch_bounds__(kThreads)
    row_warp_select_kernel(SelectInput in, int64_t nseg, int k, bool larger, SelectOutput out) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; s < nseg; s += warps) {
    const SegmentPiece sp = segment_piece(in, s, k);
    const RowKeys load{in.keys + sp.row * in.stride + sp.first, in.addend ? in.addend + sp.first : nullptr, larger};
    WarpBest best;
    for (int64_t c0 = 0; c0 < sp.len; c0 += int64_t{32} * kWarpChunks) offer_chunks(best, load, c0, sp.len, k);
    if (lane < k) put_selected(in, out, sp, s, k, lane, best.mine, larger);
    if (lane == 0) out.count[s] = sp.kk;
  }
}

// Many rows of at most 1,024 keys with k <= 16 (a batch's coarse scores to nprobe 16 at nlist
// <= 1,024): a warp a row, as above, but the row is read once into registers (32 keys a lane,
// striped) and filtered before any reaches the list. The k-th smallest of the lanes' least
// entries bounds the row's k-th entry from above (k lanes each hold an entry at or below it),
// so only entries at or below it are offered: ~1.3 k of them on rows in no particular order
// (k 16: 21 on average, p99 29; a host simulation of uniform keys), one merge, where row_warp_select_kernel
// offers all of the row's chunks and merges until its k-th settles. Past k 16 the bound loosens
// (k 24: ~42 entries, k 32: ~120), so those keep row_warp_select_kernel. The same entries: the k
// smallest of unique (key, index) entries. ncu on the H200, 10,000 rows of 1,024 keys (the
// coarse top-16 at nlist 1,024): 45-46 us against 92-93 us (top-8: 45-48 against 81-83); three
// blocks an SM at 80 registers (no spills) took 49-50 us, four at 64 (32 bytes of spills) are kept.
constexpr int kRowFilterMaxK = 16;
constexpr int kRowFilterItems = 32;
constexpr int64_t kRowFilterMaxLen = int64_t{32} * kRowFilterItems;

__global__ void __launch_bounds__(kThreads, 4)
    row_filter_select_kernel(SelectInput in, int64_t nseg, int k, bool larger, SelectOutput out) {
  __shared__ unsigned long long staged[kWarps][64];  // a warp's passing entries, before its list takes them
  const int lane = threadIdx.x % 32;
  unsigned long long* const buf = staged[threadIdx.x / 32];
  const unsigned lanes_below = (1u << lane) - 1u;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  constexpr int kHalf = kRowFilterItems / 2;  // loads in flight at once: a half row's keys and addends
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; s < nseg; s += warps) {
    const SegmentPiece sp = segment_piece(in, s, k);
    const RowKeys load{in.keys + sp.row * in.stride + sp.first, in.addend ? in.addend + sp.first : nullptr, larger};
    const int len = static_cast<int>(sp.len);
    // Entry m of this lane: key[m] << 32 | its index m * 32 + lane, for m * 32 + lane < len.
    uint32_t key[kRowFilterItems];
    unsigned long long least = ~0ull;  // past every entry: real indices are below 2^32 - 1
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float raw[kHalf], add[kHalf];
#pragma unroll
      for (int m = 0; m < kHalf; ++m) {
        const int i = (h * kHalf + m) * 32 + lane;
        raw[m] = i < len ? load.keys[i] : 0.0f;
        add[m] = load.addend && i < len ? load.addend[i] : 0.0f;
      }
#pragma unroll
      for (int m = 0; m < kHalf; ++m) {
        const int i = (h * kHalf + m) * 32 + lane;
        const uint32_t u = load.ordered(raw[m], add[m]);
        key[h * kHalf + m] = u;
        const unsigned long long e = (static_cast<unsigned long long>(u) << 32) | static_cast<uint32_t>(i);
        if (i < len && e < least) least = e;
      }
    }
    // Fewer than k lanes hold an entry only when the row is shorter than k: then the bound is
    // ~0 and every entry passes.
    const unsigned long long bound = __shfl_sync(0xffffffffu, warp_sort32(least), k - 1);
    WarpBest best;
    int staged_n = 0;  // warp-uniform
#pragma unroll
    for (int m = 0; m < kRowFilterItems; ++m) {
      const int i = m * 32 + lane;
      const unsigned long long e = (static_cast<unsigned long long>(key[m]) << 32) | static_cast<uint32_t>(i);
      const bool pass = i < len && e <= bound;
      const unsigned ballot = __ballot_sync(0xffffffffu, pass);
      if (ballot == 0) continue;  // warp-uniform
      if (pass) buf[staged_n + __popc(ballot & lanes_below)] = e;
      staged_n += __popc(ballot);
      if (staged_n >= 32) {  // rare: many keys equal to the bound's
        __syncwarp();
        best.offer(buf[lane], k);
        const unsigned long long rest = buf[32 + lane];
        __syncwarp();
        buf[lane] = rest;  // entries 32 .. staged_n - 1 move down; the slots past them are never read
        staged_n -= 32;
      }
    }
    __syncwarp();
    if (staged_n > 0) best.offer(lane < staged_n ? buf[lane] : ~0ull, k);
    __syncwarp();  // the next row's entries overwrite buf
    if (lane < k) put_selected(in, out, sp, s, k, lane, best.mine, larger);
    if (lane == 0) out.count[s] = sp.kk;
  }
}

// Rows of at most kFilterMaxLen keys with k <= 64 (a batch's coarse scores up to nprobe 64 and
// nlist 4,096): a block a row, the row read once into registers (ITEMS keys a thread, striped).
// The k-th smallest of the threads' least entries bounds the row's k-th entry from above (k
// threads each hold an entry at or below it), and only those k threads can hold entries at or
// below it, so at most k * ITEMS pass; on rows in no particular order ~1.1 k do. Each entry
// that passes is then ranked among the others by counting, and written at its rank: no sort
// (warp lists merged instead, warp_merge_sorted64, measured 107 us where this takes 100; ncu,
// H100, bench/RESULTS.md). The same entries as the block kernel: the k smallest of unique
// (key, index) entries do not depend on how they were found.
constexpr int kFilterMaxK = 64;
constexpr int kFilterMaxItems = 16;
constexpr int64_t kFilterMaxLen = int64_t{kThreads} * kFilterMaxItems;

// How many of the sorted run[0, 32) are below x: the steps find min(count, 31), then run[31].
__device__ __forceinline__ int run_below(const unsigned long long* run, unsigned long long x) {
  int lo = 0;
#pragma unroll
  for (int step = 16; step > 0; step /= 2)
    if (run[lo + step - 1] < x) lo += step;
  return lo + (run[lo] < x ? 1 : 0);  // below 31, run[lo] is not below x
}

template <int ITEMS>
__global__ void __launch_bounds__(kThreads, ITEMS < 16 ? 4 : 3)
    filter_select_kernel(SelectInput in, int64_t nseg, int k, bool larger, SelectOutput out) {
  __shared__ unsigned long long cand[kFilterMaxK * ITEMS];
  __shared__ unsigned long long runs[kThreads];  // each warp's least entries, sorted
  __shared__ unsigned long long bound;
  __shared__ int ncand;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  constexpr unsigned long long kNone = ~0ull;  // past every entry: real indices are below 2^32 - 1
  for (int64_t s = blockIdx.x; s < nseg; s += gridDim.x) {
    const SegmentPiece sp = segment_piece(in, s, k);
    const RowKeys load{in.keys + sp.row * in.stride + sp.first, in.addend ? in.addend + sp.first : nullptr, larger};
    // Entry m of this thread: its key << 32 | its index m * kThreads + tid (only the key is kept).
    auto entry = [&](uint32_t key, int m) {
      return (static_cast<unsigned long long>(key) << 32) | static_cast<uint32_t>(m * kThreads + tid);
    };
    // Every load of the row issued before any is used (the addend's too: a load under its
    // own branch would wait for the one before it).
    float raw[ITEMS], add[ITEMS];
#pragma unroll
    for (int m = 0; m < ITEMS; ++m) {
      const int64_t i = int64_t{m} * kThreads + tid;
      raw[m] = i < sp.len ? load.keys[i] : 0.0f;
      add[m] = load.addend && i < sp.len ? load.addend[i] : 0.0f;
    }
    uint32_t key[ITEMS];
    unsigned long long least = kNone;
#pragma unroll
    for (int m = 0; m < ITEMS; ++m) {
      const bool in_row = int64_t{m} * kThreads + tid < sp.len;
      key[m] = in_row ? load.ordered(raw[m], add[m]) : 0xffffffffu;
      if (in_row && entry(key[m], m) < least) least = entry(key[m], m);
    }
    least = warp_sort32(least);
    __syncthreads();  // the previous row is done with runs, bound, cand and ncand
    runs[tid] = least;
    if (tid == 0) {
      bound = kNone;  // fewer than k threads hold an entry: every entry passes
      ncand = 0;
    }
    __syncthreads();
    // The bound: the least entry whose rank among all threads' least entries is k - 1 (they are
    // unique; a thread past the row's end holds kNone and takes no part).
    if (least != kNone) {
      int rank = lane;
#pragma unroll
      for (int w = 1; w < kWarps; ++w) rank += run_below(runs + ((warp + w) % kWarps) * 32, least);
      if (rank == k - 1) bound = least;
    }
    __syncthreads();
    const unsigned long long t = bound;
#pragma unroll
    for (int m = 0; m < ITEMS; ++m) {
      const bool pass = int64_t{m} * kThreads + tid < sp.len && entry(key[m], m) <= t;
      const unsigned ballot = __ballot_sync(0xffffffffu, pass);
      if (ballot == 0) continue;  // warp-uniform
      int base = 0;
      if (lane == 0) base = atomicAdd(&ncand, __popc(ballot));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (pass) cand[base + __popc(ballot & ((1u << lane) - 1u))] = entry(key[m], m);
    }
    __syncthreads();
    const int n = ncand;  // at least min(k, len): the k best all pass
    // Each candidate's rank is how many candidates are below it; the k best go to their slots.
    for (int c = tid; c < n; c += kThreads) {
      const unsigned long long x = cand[c];
      int rank = 0;
      for (int j = 0; j < n; ++j) rank += cand[j] < x ? 1 : 0;
      if (rank < k) put_selected(in, out, sp, s, k, rank, x, larger);
    }
    for (int j = n + tid; j < k; j += kThreads) put_selected(in, out, sp, s, k, j, 0, larger);  // padding
    if (tid == 0) out.count[s] = sp.kk;
  }
}

// k rounded up to a power of two: the sort's length.
int64_t sort_length(int64_t k) {
  int64_t k2 = 1;
  while (k2 < k) k2 <<= 1;
  return k2;
}

std::size_t sort_bytes(int64_t k) { return static_cast<std::size_t>(sort_length(k)) * sizeof(uint64_t); }


// Raises the kernel's dynamic shared-memory limit to the device maximum (once per context).
std::size_t prepare_kernel(const DeviceContext& ctx, const void* kernel) {
  cudaFuncAttributes attr{};
  IVF_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const std::size_t max_dynamic = ctx.limits().smem_per_block_optin - attr.sharedSizeBytes;
  ctx.opt_in_shared_memory(kernel, max_dynamic);
  return max_dynamic;
}

// The block select's build for k, and the shared memory its sort needs beyond sel.
struct BlockSelectForm {
  void (*kernel)(SelectInput, int64_t, int, bool, int, SelectOutput);
  std::size_t sort_temp;
};
template <int ITEMS>
BlockSelectForm block_select_form() {
  return BlockSelectForm{block_select_kernel<ITEMS>, sizeof(typename SelectedRadixSort<ITEMS>::TempStorage)};
}
BlockSelectForm block_select_for(int64_t k) {
  switch (sort_items_for(sort_length(k))) {
    case 8:
      return block_select_form<8>();
    case 16:
      return block_select_form<16>();
    case 32:
      return block_select_form<32>();
    default:
      return BlockSelectForm{block_select_kernel<0>, 0};
  }
}

void launch_select(const DeviceContext& ctx, cudaStream_t stream, const SelectInput& in, int64_t nseg, int64_t k,
                   bool larger_is_better, const SelectOutput& out) {
  const int64_t grid = std::min<int64_t>(nseg, int64_t{1} << 30);
  const int64_t row_len = in.pieces > 1 ? in.piece : in.max_len;
  if (k <= kWarpSelectMaxK && row_len <= kRowWarpMaxLen && nseg >= kRowWarpMinSegments) {
    const int64_t blocks = std::min<int64_t>((nseg + kWarps - 1) / kWarps, int64_t{1} << 30);
    if (k >= 1 && k <= kRowFilterMaxK && row_len <= kRowFilterMaxLen) {  // k 0: no entry is its bound
      row_filter_select_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          in, nseg, static_cast<int>(k), larger_is_better, out);
      IVF_CUDA_CHECK_LAUNCH();
      return;
    }
    row_warp_select_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(in, nseg, static_cast<int>(k),
                                                                                 larger_is_better, out);
    IVF_CUDA_CHECK_LAUNCH();
    return;
  }
  // Rows of at most 4,096 keys, k <= 64: filtered by their threads' least entries (ncu, H100,
  // 10,000 rows, the coarse top-nprobe: 1,024 keys at k 64 took 100 us against the block
  // kernel's 182; 4,096 keys at k 64 163 us against 404; 1,024 keys at k 16 84 us against
  // row_warp_select_kernel's 78, so a warp a row keeps those).
  if (k >= 1 && k <= kFilterMaxK && row_len <= kFilterMaxLen) {  // k 0 would take every entry: none is its bound
    auto kernel = row_len <= 4 * kThreads   ? filter_select_kernel<4>
                  : row_len <= 8 * kThreads ? filter_select_kernel<8>
                                            : filter_select_kernel<kFilterMaxItems>;
    kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(in, nseg, static_cast<int>(k), larger_is_better, out);
    IVF_CUDA_CHECK_LAUNCH();
    return;
  }
  // Small k: warp lists (ncu on the H200, batch 64 at nprobe 16: the split select of 64 rows of
  // ~90K keys took 90 + 10.5 us on the block kernel and 41 + 6 us here; bench/RESULTS.md).
  if (k <= kWarpSelectMaxK) {
    warp_select_kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(in, nseg, static_cast<int>(k),
                                                                           larger_is_better, out);
    IVF_CUDA_CHECK_LAUNCH();
    return;
  }
  // The attribute is the same for every call (the largest dynamic size the device allows), so
  // concurrent searches never race on it; each launch asks for what it needs.
  const std::size_t sel = sort_bytes(k);
  BlockSelectForm form = block_select_for(k);
  std::size_t max_dynamic = prepare_kernel(ctx, reinterpret_cast<const void*>(form.kernel));
  if (sel + form.sort_temp > max_dynamic) {  // never on an H100 or H200: keep the bitonic form
    form = BlockSelectForm{block_select_kernel<0>, 0};
    max_dynamic = prepare_kernel(ctx, reinterpret_cast<const void*>(form.kernel));
  }
  // Buffer: 8 bytes a key; room for the row itself when short, else for a stream of 2 * k2 +
  // kStep keys (a cut to the k best every k2 + kStep keys at least; small enough that several
  // blocks share an SM at k 4096).
  int64_t want = std::max<int64_t>(kMinBuffer, static_cast<int64_t>(2 * sel / sizeof(uint64_t)) + kStep);
  want = std::min<int64_t>(want, std::max<int64_t>(row_len, 1));
  const int64_t fit = (static_cast<int64_t>(max_dynamic) - static_cast<int64_t>(sel)) / 8;
  const int64_t cap = std::max<int64_t>(0, std::min(want, fit));
  const std::size_t smem = sel + std::max(static_cast<std::size_t>(cap) * 8, form.sort_temp);
  form.kernel<<<static_cast<unsigned>(grid), kThreads, smem, stream>>>(
      in, nseg, static_cast<int>(k), larger_is_better, static_cast<int>(cap), out);
  IVF_CUDA_CHECK_LAUNCH();
}

// Keys a lane of rank_key_kernel holds in registers: rows of up to 2,048 keys (kRankKeyMaxLen).
// Longer rows take a block each (long_rank_key_kernel): read again at each of 32 bits, the
// wide pass's sample rows at nprobe 64 (thousands of keys) made the warp kernel slower than the
// block select.
constexpr int kRankKeysPerLane = 64;
constexpr int64_t kRankKeyMaxLen = int64_t{kRankKeysPerLane} * 32;

// A thread's share of a row for the rank-th key kernels: keys first + j x STEP (j < N) of the row's
// len, all ones past its end (never below a probe: counts no key).
template <int STEP, int N>
__device__ __forceinline__ void hold_row_keys(const RowKeys& load, int64_t len, unsigned first, uint32_t (&held)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const int64_t i = j * STEP + first;
    held[j] = i < len ? load(i) : 0xffffffffu;
  }
}
// How many of the held keys are below probe.
template <int N>
__device__ __forceinline__ unsigned held_below(const uint32_t (&held)[N], uint32_t probe) {
  unsigned below = 0;
#pragma unroll
  for (int j = 0; j < N; ++j) below += held[j] < probe ? 1u : 0u;
  return below;
}

// A warp per row of at most kRankKeyMaxLen keys: the rank-th smallest ordered key t, bit by bit
// from the top, as the largest t with fewer than rank keys below it (the count is monotone in t,
// so each bit is kept where the count with it set stays below rank). 32 counts of the row held in
// registers: no shared memory, no barriers, where block_select_kernel would also gather and sort
// the rank best (the wide pass's sample needs only its rank-th key, scan.cu's sampled_wide_bound).
// A longer row (only where long_len is given) is left to long_rank_key_kernel: long_len holds
// its length, and 0 for the rows done here.
__global__ void __launch_bounds__(kThreads) rank_key_kernel(const float* keys, int64_t stride, const int64_t* lens,
                                                            int64_t nseg, int rank, bool larger, int64_t* long_len,
                                                            uint32_t* out) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t s = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32; s < nseg; s += warps) {
    const int64_t len = lens[s];
    if (long_len != nullptr && lane == 0) long_len[s] = len > kRankKeyMaxLen ? len : 0;
    if (len > kRankKeyMaxLen) continue;
    if (len < rank) {
      if (lane == 0) out[s] = 0xffffffffu;
      continue;
    }
    const RowKeys load{keys + s * stride, nullptr, larger};
    uint32_t held[kRankKeysPerLane];
    hold_row_keys<32>(load, len, static_cast<unsigned>(lane), held);
    uint32_t t = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t probe = t | (1u << bit);
      if (__reduce_add_sync(0xffffffffu, held_below(held, probe)) < static_cast<unsigned>(rank)) t = probe;
    }
    if (lane == 0) out[s] = t;
  }
}

// Keys a thread of long_rank_key_kernel holds in registers: rows of up to 8,192 keys; the rest of
// a longer row is read again at each bit.
constexpr int kLongRankKeysPerThread = 32;

// A block per row too long for rank_key_kernel (long_len[s] > 0): its rank-th smallest ordered
// key as rank_key_kernel finds it, bit by bit from the top, the block's threads counting the keys
// below each probe (a warp's sum, then the block's through shared memory, one barrier a bit: the
// warp sums alternate between two slots, so a slot is rewritten only after every thread has read
// it). Session 71 had given these rows to the block select, which also gathered and sorted the
// rank best: 0.52 ms of a k 1000 batch at nprobe 64, where every query's sample is long (ncu, H100,
// session 74).
__global__ void __launch_bounds__(kThreads) long_rank_key_kernel(const float* keys, int64_t stride,
                                                                 const int64_t* long_len, int64_t nseg, int rank,
                                                                 bool larger, uint32_t* out) {
  __shared__ unsigned warp_below[2][kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  for (int64_t s = blockIdx.x; s < nseg; s += gridDim.x) {
    const int64_t len = long_len[s];  // the same for the whole block
    if (len == 0) continue;           // rank_key_kernel's row
    if (len < rank) {
      if (threadIdx.x == 0) out[s] = 0xffffffffu;
      continue;
    }
    const RowKeys load{keys + s * stride, nullptr, larger};
    constexpr int64_t kHeld = int64_t{kLongRankKeysPerThread} * kThreads;
    uint32_t held[kLongRankKeysPerThread];
    hold_row_keys<kThreads>(load, len, threadIdx.x, held);
    uint32_t t = 0;
    for (int bit = 31; bit >= 0; --bit) {
      const uint32_t probe = t | (1u << bit);
      unsigned below = held_below(held, probe);
      for (int64_t i = kHeld + threadIdx.x; i < len; i += kThreads) below += load(i) < probe ? 1u : 0u;
      below = __reduce_add_sync(0xffffffffu, below);
      if (lane == 0) warp_below[bit & 1][warp] = below;
      __syncthreads();
      unsigned total = 0;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) total += warp_below[bit & 1][w];
      if (total < static_cast<unsigned>(rank)) t = probe;
    }
    if (threadIdx.x == 0) out[s] = t;
  }
}

}  // namespace

void select_rank_key(const DeviceContext& ctx, cudaStream_t stream, const float* keys, int64_t stride,
                     const int64_t* lens, int64_t nseg, int64_t rank, bool larger_is_better, uint32_t* out) {
  if (nseg == 0) return;
  if (rank < 1 || rank > std::numeric_limits<int32_t>::max())
    fail(Errc::Internal, "select_rank_key: rank " + std::to_string(rank) + " out of range");
  const bool some_long = stride > kRankKeyMaxLen;
  const auto n = static_cast<std::size_t>(nseg);
  DeviceBuffer<int64_t> long_len(ctx, some_long ? n : 1, stream);
  const int64_t blocks = std::min<int64_t>((nseg + kWarps - 1) / kWarps, int64_t{1} << 20);
  rank_key_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      keys, stride, lens, nseg, static_cast<int>(rank), larger_is_better, some_long ? long_len.data() : nullptr, out);
  IVF_CUDA_CHECK_LAUNCH();
  if (!some_long) return;
  // The long rows, a block each (the others' blocks pass them at once).
  long_rank_key_kernel<<<static_cast<unsigned>(std::min<int64_t>(nseg, int64_t{1} << 20)), kThreads, 0, stream>>>(
      keys, stride, long_len.data(), nseg, static_cast<int>(rank), larger_is_better, out);
  IVF_CUDA_CHECK_LAUNCH();
}

int64_t select_rank_key_words(int64_t stride) {
  // long_len (an int64_t) where some row may be long.
  return stride > kRankKeyMaxLen ? 2 : 0;
}

int64_t select_max_k(const DeviceLimits& limits) {
  int64_t k = 1;
  while (sort_bytes(k * 2) + 8 * 1024 <= limits.smem_per_block_optin) k *= 2;
  return k;
}

void select_topk(const DeviceContext& ctx, cudaStream_t stream, const SelectInput& in, int64_t nseg, int64_t k,
                 bool larger_is_better, const SelectOutput& out) {
  const DeviceLimits& limits = ctx.limits();
  if (nseg == 0) return;
  if (k > select_max_k(limits))
    fail(Errc::Unsupported, "k = " + std::to_string(k) + " exceeds the largest k this device can select (" +
                                std::to_string(select_max_k(limits)) + ")");
  // Dispatch: one block per row, unless the rows are too few to fill the GPU and long enough to
  // split; then every piece of a row keeps its k best, and a second pass picks among those.
  const int64_t piece = std::max<int64_t>(kPiece, 4 * k);
  const bool split = nseg < 2 * limits.sm_count && in.max_len >= 2 * piece && k <= 1024;
  if (!split) {
    launch_select(ctx, stream, in, nseg, k, larger_is_better, out);
    return;
  }
  const int64_t pieces = (in.max_len + piece - 1) / piece;
  DeviceBuffer<int32_t> pos1(ctx, static_cast<std::size_t>(nseg * pieces * k), stream);
  DeviceBuffer<float> key1(ctx, static_cast<std::size_t>(nseg * pieces * k), stream);
  DeviceBuffer<int32_t> count1(ctx, static_cast<std::size_t>(nseg * pieces), stream);
  SelectInput a = in;
  a.pieces = pieces;
  a.piece = piece;
  a.pad_output = true;
  launch_select(ctx, stream, a, nseg * pieces, k, larger_is_better, SelectOutput{pos1.data(), key1.data(), count1.data()});
  SelectInput b;
  b.keys = key1.data();
  b.stride = pieces * k;
  b.fixed_len = pieces * k;
  b.max_len = pieces * k;
  b.count_cap = in.lens;  // rows shorter than k keep their own length
  b.pos_map = pos1.data();
  if (!in.lens && in.fixed_len < k) b.fixed_len = in.fixed_len;  // never reached: split rows are long
  launch_select(ctx, stream, b, nseg, k, larger_is_better, out);
}

}  // namespace ivfgpu::cuda
