// The pruned form of the tensor-core pass (scan_tensor.hpp, PruneState): its per-tile
// epilogue, which keeps candidates on chip, and the settling kernel that turns what survives
// into the answer. Included only by scan_mma.cuh and scan_tensor.cuh. docs/tensor-scan.md
// gives the argument; in short:
//
// Costs: a distance, or a negated similarity, so smaller is better for every metric. For each
// (query, row) the tile has a pessimistic cost (never better than the exact one) and an
// optimistic one (never worse: the pessimistic moved back by twice the margin).
//
// Bound: bound[q] holds, as an ordered key, a cost that the query's exact k-th best cannot be
// worse than. It starts from the exact k best of the query's first probe (scan.cu). A tile with
// at least k rows whose pessimistic costs beat it lowers it to the k-th of them: those k rows'
// exact costs are no worse. It only ever falls.
//
// Append: a row goes to the query's list only if its optimistic cost reaches the bound as the
// tile sees it (read when its block took the tile's queries, lowered by the block itself
// since). A row left out is worse than a bound that only falls, so it cannot be among the k
// best. Every row of the exact k best is therefore appended, wherever its tile ran.
// The list holds cap entries (position, optimistic cost); a query whose rows overflow it (ties
// within the margin everywhere) is flagged by its count.
//
// Settle: one warp per query re-scores, with the SIMT scan's arithmetic, the appended rows that
// can still enter (optimistic cost within the final bound and the k-th exact cost found so far)
// and keeps the k best by (exact cost, candidate position): the SIMT scan's order, ties included.
// A query with many entries takes a block instead, and an overflowed query is scanned in full,
// exactly, by a block (settle_block_query; both in one launch, settle_kernel). Past k = 32 a
// block settles each query both ways, sorting in shared memory (settle_wide_kernel).
#pragma once

#include <cstdint>

#include "element_traits.cuh"
#include "ordered_key.cuh"
#include "scan_tensor.hpp"
#include "scan_tiles.hpp"
#include "block_register_sort.cuh"
#include "scan_tiles.cuh"
#include "warp_sort.cuh"

namespace ivfgpu::cuda::scan_detail {

constexpr unsigned kFullMask = 0xffffffffu;

// The distance between a query and a stored row exactly as the SIMT scan computes it: a
// sequential fp32 sum in dimension order, or (INT: integer rows against integer queries) the
// exact integer sum rounded once to float. Where both rows start 16-byte aligned with a
// multiple of four elements (exact_vec4), four elements come per load; the sum keeps its order.
template <class T, bool IP, bool INT>
__device__ __forceinline__ void exact_term(float q, float x, float& acc, long long& total) {
  if constexpr (INT) {
    const long long qi = __float2ll_rn(q), xi = __float2ll_rn(x);
    total += IP ? qi * xi : (qi - xi) * (qi - xi);
  } else if constexpr (IP) {
    acc = fmaf(q, x, acc);
  } else {
    const float diff = q - x;
    acc = fmaf(diff, diff, acc);
  }
}
template <class T, bool IP, bool INT>
__device__ __forceinline__ void exact_terms4(const float4& q, const float4& x, float& acc, long long& total) {
  exact_term<T, IP, INT>(q.x, x.x, acc, total);
  exact_term<T, IP, INT>(q.y, x.y, acc, total);
  exact_term<T, IP, INT>(q.z, x.z, acc, total);
  exact_term<T, IP, INT>(q.w, x.w, acc, total);
}
// The sum from dimension j on, continuing acc / total.
template <class T, bool IP, bool INT>
__device__ __forceinline__ float exact_row_sum_from(const float* query, const T* xr, int64_t j, int64_t dim, bool vec4,
                                                    float acc, long long total) {
  if (vec4)
    for (; j + 4 <= dim; j += 4)
      exact_terms4<T, IP, INT>(*reinterpret_cast<const float4*>(query + j), DeviceElement<T>::load4(xr + j), acc,
                               total);
  for (; j < dim; ++j) exact_term<T, IP, INT>(query[j], DeviceElement<T>::load1(xr + j), acc, total);
  if constexpr (INT) return __ll2float_rn(total);
  return acc;
}
template <class T, bool IP, bool INT>
__device__ __forceinline__ float exact_row_distance(const float* query, const T* xr, int64_t dim, bool vec4) {
  return exact_row_sum_from<T, IP, INT>(query, xr, 0, dim, vec4, 0.0f, 0);
}
// exact_row_distance with four-element loads (vec4), kAhead loads of the row and of the query
// issued before their terms are summed: the same terms in the same order, so the same bits, with
// a lane's loads overlapped (the f16 seed re-scores a few rows a lane, latency-bound otherwise).
template <class T, bool IP>
__device__ __forceinline__ float exact_row_distance_ahead(const float* query, const T* xr, int64_t dim) {
  constexpr int kAhead = 8;
  float acc = 0.0f;
  int64_t j = 0;
  for (; j + 4 * kAhead <= dim; j += 4 * kAhead) {
    float4 x[kAhead], q[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      x[i] = DeviceElement<T>::load4(xr + j + 4 * i);
      q[i] = *reinterpret_cast<const float4*>(query + j + 4 * i);
    }
    long long unused = 0;
#pragma unroll
    for (int i = 0; i < kAhead; ++i) exact_terms4<T, IP, false>(q[i], x[i], acc, unused);
  }
  return exact_row_sum_from<T, IP, false>(query, xr, j, dim, true, acc, 0);
}
// Two pairs' exact_row_distance_ahead at once, kAhead loads of each ahead: each sum keeps its
// terms and order (the same bits as exact_row_distance), two chains of dependent fmas side by
// side. For the wide pass's deferred re-scoring, where a lane holds several pairs whose rows come
// from L2 (one pair a lane per tile, session 79, gained nothing: a lane held under one pair).
template <class T, bool IP>
__device__ __forceinline__ void exact_row_distances_ahead2(const float* q0, const T* x0, const float* q1, const T* x1,
                                                           int64_t dim, float& d0, float& d1) {
  constexpr int kAhead = 4;
  float acc0 = 0.0f, acc1 = 0.0f;
  int64_t j = 0;
  for (; j + 4 * kAhead <= dim; j += 4 * kAhead) {
    float4 xa[kAhead], qa[kAhead], xb[kAhead], qb[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      xa[i] = DeviceElement<T>::load4(x0 + j + 4 * i);
      xb[i] = DeviceElement<T>::load4(x1 + j + 4 * i);
      qa[i] = *reinterpret_cast<const float4*>(q0 + j + 4 * i);
      qb[i] = *reinterpret_cast<const float4*>(q1 + j + 4 * i);
    }
    long long unused = 0;
#pragma unroll
    for (int i = 0; i < kAhead; ++i) {
      exact_terms4<T, IP, false>(qa[i], xa[i], acc0, unused);
      exact_terms4<T, IP, false>(qb[i], xb[i], acc1, unused);
    }
  }
  d0 = exact_row_sum_from<T, IP, false>(q0, x0, j, dim, true, acc0, 0);
  d1 = exact_row_sum_from<T, IP, false>(q1, x1, j, dim, true, acc1, 0);
}
// Whether exact_row_distance may take four elements per load for these rows and queries.
template <class T>
__host__ __device__ inline bool exact_vec4(const T* vectors, const float* queries, int64_t dim) {
  return dim % 4 == 0 && reinterpret_cast<uintptr_t>(vectors) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(queries) % 16 == 0;
}

// The k-th smallest (k >= 1) of the warp's 64 ordered keys, two per lane: a radix selection,
// one bit per step, counting with ballots.
__device__ __forceinline__ uint32_t warp_kth_of_64(uint32_t o0, uint32_t o1, int k) {
  uint32_t prefix = 0, mask = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t b = 1u << bit;
    const bool z0 = (o0 & mask) == prefix && (o0 & b) == 0;
    const bool z1 = (o1 & mask) == prefix && (o1 & b) == 0;
    const int zeros = __popc(__ballot_sync(kFullMask, z0)) + __popc(__ballot_sync(kFullMask, z1));
    if (zeros < k) {
      k -= zeros;
      prefix |= b;
    }
    mask |= b;
  }
  return prefix;
}

// Per query row of a tile: its margin (from the tile's largest row norm, so it covers every
// row of the tile) and two thresholds. With `base` the cost without margin, a row is appended
// when its optimistic cost base - margin can reach the bound u (base <= take = u + m), and
// counts toward lowering it when its pessimistic cost base + margin beats u (base < lower =
// u - m). The epilogue tests neither on base itself: it tests t = dot - |x|^2 / 2 (L2; the
// dot product itself for inner product), so that each (query, row) costs one subtraction and
// two comparisons. With base = |q|^2 - 2t (L2) or -t (inner product) the conditions become
//   append: t >= append_at = (|q|^2 - take) / 2   (inner product: -take)
//   count:  t >  count_at  = (|q|^2 - lower) / 2  (inner product: -lower)
// Every threshold is rounded outward, so the float comparisons never decide against the real
// ones; the rounding of t itself is one more rounding of the L2 assembly, which the margin's
// b term bounds (MarginTerms). Without a bound every row is appended (append_at is the lowest
// finite float, so that excluded rows, t = -inf, still fail) and every kept row counts.
// Either way a row that counts is appended too (take >= lower, and without a bound every
// finite t reaches append_at): the epilogue's first test looks for appends only.
template <int N>
struct PruneRows {
  float margin[N];       // the wide pass: the slope of its a term in a row's norm (wide_row_thresholds)
  float2 thresholds[N];  // (append_at, count_at)
  int below[N];
};

constexpr uint32_t kNoBound = 0xffffffffu;  // an ordered key past every cost

template <bool IP, int N>
__device__ __forceinline__ void prune_row_thresholds(const MarginTerms& mg, float qsq, float xmax, uint32_t u,
                                                     PruneRows<N>& rows, int r) {
  const float m = candidate_margin(mg, sqrtf(qsq), xmax), inf = __int_as_float(0x7f800000);
  rows.margin[r] = m;
  rows.below[r] = 0;
  if (u == kNoBound) {
    rows.thresholds[r] = make_float2(-3.4028235e38f, -inf);
    return;
  }
  const float uf = from_ordered(u), take = __fadd_ru(uf, m), lower = __fsub_rd(uf, m);
  rows.thresholds[r] = IP ? make_float2(-take, -lower)
                          : make_float2(__fmul_rd(0.5f, __fsub_rd(qsq, take)), __fmul_ru(0.5f, __fsub_ru(qsq, lower)));
}

// The wide pass's thresholds (wide_tile_marks; nothing counts there): with per_row, a query row's
// margin takes each tile row's own norm instead of the tile's largest. The margin is
// a |q| |x| + b (|q| + |x|)^2 (+ s, c terms where operands may flush; MarginTerms), and a is
// nearly all of it: append_at takes the rest at the tile's largest norm xmax (no smaller, as
// before), and margin[r] holds the slope (a |q| / 2 for L2, a |q| for inner product; rounded up)
// that turns a row's norm into the a term in t's units, so that the mark test is
//   t + slope |x| >= append_at,
// one fma a pair, and a row in the margin of only the tile's largest holds fewer marks. Rounded
// to nearest, that fma is monotone: it never falls below a float threshold its real value
// reaches, so a row the tile-wide margin marked for its own norm is still marked here. A CPU
// simulation of the bench's mixture (bench/RESULTS.md, session 73) counted 2,685 marks a query
// at k 1000, nprobe 16, against 2,882 with the tile's largest norm (1,986 rows within the bound).
// Without per_row (IVFGPU_WIDE_MARGIN=tile, for A/B runs) the slope is 0 and the tile's margin
// is whole, as before.
template <bool IP, int N>
__device__ __forceinline__ void wide_row_thresholds(const MarginTerms& mg, float qsq, float xmax, uint32_t u,
                                                    bool per_row, PruneRows<N>& rows, int r) {
  MarginTerms rest = mg;
  if (per_row) rest.a = 0.0f;
  prune_row_thresholds<IP>(rest, qsq, xmax, u, rows, r);
  rows.thresholds[r].y = __int_as_float(0x7f800000);  // counts nothing
  rows.margin[r] = per_row ? __fmul_ru(IP ? mg.a : 0.5f * mg.a, __fsqrt_ru(qsq)) : 0.0f;
}

// A tile's query row past its unit's queries: thresholds no t reaches (t is finite or -inf, and
// NaN compares false), so that the epilogue's first test needs no per-row bound check.
template <int N>
__device__ __forceinline__ void exclude_row_thresholds(PruneRows<N>& rows, int r) {
  const float inf = __int_as_float(0x7f800000);
  rows.thresholds[r] = make_float2(inf, inf);
}

// Entry `at` of query q: a row's candidate position and cost (optimistic, or exact where the
// entries are), unless the query has overflowed its cap (then the settling scans it in full).
__device__ __forceinline__ void store_entry(const PruneState& pr, int64_t q, int at, int64_t pos, float cost) {
  if (at >= pr.cap) return;
  pr.pos[q * pr.cap + at] = static_cast<int32_t>(pos);
  pr.opt[q * pr.cap + at] = cost;
}

// A row that can still enter: its candidate position and optimistic cost.
__device__ __forceinline__ void append_row(const PruneState& pr, int64_t q, int64_t pos, float opt) {
  store_entry(pr, q, atomicAdd(pr.found + q, 1), pos, opt);
}

// The wide pass's in-place re-scoring (pr.exact on the bf16 pass, scan_resident.cuh), by every
// thread of the block once a tile's epilogue has marked its pairs (bit r of pair_rows[c]: query
// row r reached its bound at tile row c). list_marked_pairs lists them tile row by tile row into
// pairs (clearing the marks), and rescore_listed_pairs scores each by the SIMT scan's arithmetic
// and appends those that reach their query's bound with their exact costs, so that the settle
// reads no row again; the rest cannot be among the k best.
//
// A pair's code: query row r, tile row c and the row tile's place in its unit (a unit has at most
// kMmaUnitTiles), so that the pairs of a unit's tiles can wait in pairs to be re-scored together.
constexpr int kPairRowBits = 6, kPairTileShift = 2 * kPairRowBits;
constexpr int kPairCapacity = kMmaTile * kMmaTile;  // the wide pass's pairs array: a whole tile's marks fit
static_assert(kMmaTile == 1 << kPairRowBits && kMmaUnitTiles << kPairTileShift <= 1 << 16, "a pair code in 16 bits");
__device__ __forceinline__ int pair_query_row(unsigned short p) { return (p >> kPairRowBits) & (kMmaTile - 1); }
__device__ __forceinline__ int pair_tile_row(unsigned short p) { return p & (kMmaTile - 1); }
__device__ __forceinline__ int pair_tile(unsigned short p) { return p >> kPairTileShift; }

// Lists the tile's marks after the `listed` pairs already in pairs, the tile being the unit's
// `tile`-th, and returns how many pairs are listed then (every thread, the same). Where they
// would not fit, flush(listed) (by every thread, after a barrier) re-scores the listed pairs first,
// and the tile's follow them from the start. Thread t takes 16 query rows of tile row t / 4, and a
// block-wide prefix sum of their counts places each. Warp 0 had listed them alone, two tile rows a
// lane, while the other warps waited at the barrier after it: 17% of the kernel's stall samples at
// k 1000 (H100, 1M x 128, nprobe 16, session 61). Pairs must be read only after a barrier.
template <class Flush>
__device__ __forceinline__ int list_marked_pairs(unsigned long long* pair_rows, unsigned short* pairs, int tile,
                                                 int listed, Flush&& flush) {
  constexpr int kParts = kThreads / kMmaTile, kBits = kMmaTile / kParts;  // 4 threads a tile row, 16 bits each
  static_assert(kThreads % kMmaTile == 0 && kBits * kParts == kMmaTile && kBits < 64, "a tile row's parts");
  constexpr int kWarps = kThreads / 32;
  __shared__ int warp_pairs[kWarps];  // written before the first barrier below, read after it
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int trow = tid / kParts, part = tid % kParts;  // the thread's tile row and its part of it
  const unsigned long long mine = (pair_rows[trow] >> (part * kBits)) & ((1ull << kBits) - 1);
  const int here = __popcll(mine);
  int incl = here;
  for (int o = 1; o < 32; o *= 2) {
    const int t = __shfl_up_sync(kFullMask, incl, o);
    if (lane >= o) incl += t;
  }
  if (lane == 31) warp_pairs[warp] = incl;
  __syncwarp();  // the row's four parts (one warp) have read its marks
  if (part == 0) pair_rows[trow] = 0;
  __syncthreads();
  int n = 0, at = incl - here;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const int t = warp_pairs[w];
    n += t;
    if (w < warp) at += t;
  }
  if (listed + n > kPairCapacity) {  // the same for every thread
    flush(listed);
    __syncthreads();  // the listed pairs are read before the tile's overwrite them
    listed = 0;
  }
  at += listed;
  const int code = tile << kPairTileShift | trow;
  for (unsigned long long m = mine; m != 0; m &= m - 1) {
    const int r = part * kBits + __ffsll(static_cast<long long>(m)) - 1;
    pairs[at++] = static_cast<unsigned short>(code | r << kPairRowBits);
  }
  return listed + n;
}

// Re-scores pairs[0, n) (after a barrier since they were listed), every thread: pair i's distance
// by distance(r, tile, c), the unit's tile-th row tile starting at candidate row v_first + tile *
// kMmaTile. With two (a lane holds several pairs), a lane's pairs i and i + blockDim run side by
// side (distances2). Listed by tile row, a warp's lanes mostly share rows (pairs in the order
// marked, a line per lane and load: the pass took 9.3 ms against 7.5 at 1M x 128, k 1000, a
// four-probe seed, when the rows came from L2). A warp's lanes that append for the same query take
// their places with one atomic. Eight loads run ahead of the sums (exact_row_distance_ahead: the
// same bits): each pair is a dependent chain of dim sums. With the marks' 32-bit atomics
// (shared_or64) the kernel went from 4.75 to 4.03 ms there.
template <bool IP, class Distance, class Distances2>
__device__ __forceinline__ void rescore_listed_pairs(const PruneState& pr, Distance&& distance,
                                                     Distances2&& distances2, bool two, int n,
                                                     const unsigned short* pairs, int64_t v_first,
                                                     const int64_t* q_row, const int64_t* out_base,
                                                     const uint32_t* qbound) {
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  // Pair i (i < n) with its exact distance d, by the whole warp: appended if it reaches its bound.
  const auto append = [&](int i, float d) {
    bool take = false;
    int64_t q = -1, pos = 0;
    float cost = 0.0f;
    if (i < n) {
      const unsigned short p = pairs[i];
      const int r = pair_query_row(p);
      q = q_row[r];
      cost = IP ? -d : d;
      const uint32_t u = qbound[r];
      take = u == kNoBound || !(cost > from_ordered(u));
      pos = out_base[r] + v_first + pair_tile(p) * kMmaTile + pair_tile_row(p) - q * pr.stride;
    }
    const unsigned want = __ballot_sync(kFullMask, take);
    if (!take) return;
    const unsigned peers = __match_any_sync(want, static_cast<unsigned long long>(q));
    const int leader = __ffs(peers) - 1, rank = __popc(peers & ((1u << lane) - 1));
    int base = 0;
    if (lane == leader) base = atomicAdd(pr.found + q, __popc(peers));
    store_entry(pr, q, __shfl_sync(peers, base, leader) + rank, pos, cost);
  };
  const auto one = [&](int i) {
    const unsigned short p = pairs[i];
    return distance(pair_query_row(p), pair_tile(p), pair_tile_row(p));
  };
  const int end = (n + 31) / 32 * 32;  // whole warps: append's ballot needs every lane
  const int step = static_cast<int>(blockDim.x);
  if (two) {  // pairs i and i + step side by side (j < end is the same for a warp's lanes)
    for (int i = tid; i < end; i += 2 * step) {
      const int j = i + step;
      float di = 0.0f, dj = 0.0f;
      if (j < n) {
        const unsigned short p = pairs[i], o = pairs[j];
        distances2(pair_query_row(p), pair_tile(p), pair_tile_row(p), pair_query_row(o), pair_tile(o),
                   pair_tile_row(o), di, dj);
      } else if (i < n) {
        di = one(i);
      }
      append(i, di);
      if (j < end) append(j, dj);
    }
    return;
  }
  for (int i = tid; i < end; i += step) append(i, i < n ? one(i) : 0.0f);
}

// A tile row holding at least k rows better than the bound, by one warp: lane holds the
// pessimistic costs of tile rows lane and lane + 32 (+inf where there is none). The k-th of
// them becomes the bound, in global memory and in the block's copy.
__device__ __forceinline__ void lower_row_bound(const PruneState& pr, int64_t q, float c0, float c1, uint32_t& local) {
  const uint32_t kth = warp_kth_of_64(to_ordered(c0), to_ordered(c1), pr.k);
  if (threadIdx.x % 32 == 0) {
    atomicMin(pr.bound + q, kth);
    if (kth < local) local = kth;
  }
}

// The (cost, position) key of a candidate row by the SIMT scan's arithmetic.
template <class T, bool IP, bool INT>
__device__ __forceinline__ uint64_t exact_key(const SettleArgs<T>& a, const float* query, int64_t l, int64_t row,
                                              int64_t pos) {
  const float d = exact_row_distance<T, IP, INT>(query, a.vectors + (a.list_start[l] + row) * a.dim, a.dim,
                                                 exact_vec4(a.vectors, a.queries, a.dim));
  return (static_cast<uint64_t>(cost_key(d, IP)) << 32) | static_cast<uint32_t>(pos);
}

// The key of query q's entry i at candidate position p with stored cost `cost` (its probe and
// row located from p). An entry of the seed (i < seeded) holds its exact cost already: the SIMT
// scan's, which exact_key would compute again bit for bit; its row is not read.
template <class T, bool IP, bool INT>
__device__ __forceinline__ uint64_t entry_key(const SettleArgs<T>& a, int64_t q, const float* query, int i,
                                              int seeded, int32_t p, float cost) {
  if (i < seeded) return (static_cast<uint64_t>(to_ordered(cost)) << 32) | static_cast<uint32_t>(p);
  int64_t probe, row;
  a.cand.locate(q, p, probe, row);
  return exact_key<T, IP, INT>(a, query, a.probes[q * a.nprobe + probe], row, p);
}
__device__ __forceinline__ int seeded_entries(const PruneState& pr, int64_t q) {
  if (pr.exact) return static_cast<int>(pr.cap);  // every entry: the integer pass's costs are exact
  return pr.seeded != nullptr ? __ldcg(pr.seeded + q) : 0;
}

// The key of row `row` of query q's probed list l, whose candidate positions start at off, or
// none (all ones) where the scan excludes the row: removed, or rejected by a filter.
template <class T, bool IP, bool INT>
__device__ __forceinline__ uint64_t candidate_row_key(const SettleArgs<T>& a, const float* query, int64_t l,
                                                      int64_t row, int64_t off) {
  const int64_t slot = a.list_start[l] + row;
  if (!row_allowed(a.removed, a.filter, a.filter_set, slot, [&] { return a.ids[slot]; })) return ~uint64_t{0};
  return exact_key<T, IP, INT>(a, query, l, row, off + row);
}

// Results rank[g] (< k) of query q from their (rank + 1)-th best keys best[g], for each g with
// live[g], as the finaliser writes them: padding past the candidates and for distances equal to
// the padding value. The G keys' lookups go together: each key's probe (a binary search of the
// query's candidate offsets, the same steps for every key), list and id. A key at a time, each
// result waited on its own chain of ~7 dependent loads: 27% of the wide settle's stall samples at
// k 4096 (ncu, H100, session 75).
template <class T, bool IP, int G>
__device__ __forceinline__ void write_settled_group(const SettleArgs<T>& a, int64_t q, const int (&rank)[G],
                                                    const uint64_t (&best)[G], const bool (&live)[G]) {
  constexpr uint64_t kNone = ~uint64_t{0};
  const int64_t* off = a.cand.offsets + q * (a.nprobe + 1);
  const int64_t first = off[0];
  float d[G];
  bool real[G];  // a neighbour, not padding
  uint32_t pos[G];
  int lo[G];
  int64_t start[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    d[g] = a.pad;
    if (best[g] != kNone) {
      const float cost = from_ordered(static_cast<uint32_t>(best[g] >> 32));
      d[g] = IP ? -cost : cost;
    }
    real[g] = live[g] && best[g] != kNone && d[g] != a.pad;
    pos[g] = static_cast<uint32_t>(best[g]);
    lo[g] = 0;
    start[g] = first;
  }
  // off[lo] <= pos < off[lo + n] (CandidateRows::locate's probe, empty probes skipped alike).
  for (int n = static_cast<int>(a.nprobe); n > 1;) {
    const int half = n / 2;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (!real[g]) continue;
      const int64_t o = off[lo[g] + half];
      if (o <= static_cast<int64_t>(pos[g])) {
        lo[g] += half;
        start[g] = o;
      }
    }
    n -= half;
  }
  int64_t id[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    id[g] = -1;
    if (!real[g]) continue;
    const int64_t l = a.probes[q * a.nprobe + lo[g]], row = static_cast<int64_t>(pos[g]) - start[g];
    id[g] = a.list_ids != nullptr ? a.list_ids[l][row] : a.ids[a.list_start[l] + row];
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (!live[g]) continue;
    const int64_t e = q * a.k + rank[g];
    a.out_ids[e] = id[g];
    a.out_dists[e] = real[g] ? d[g] : a.pad;
  }
}
template <class T, bool IP>
__device__ __forceinline__ void write_settled(const SettleArgs<T>& a, int64_t q, int64_t rank, uint64_t best) {
  const int ranks[1] = {static_cast<int>(rank)};
  const uint64_t keys[1] = {best};
  const bool live[1] = {true};
  write_settled_group<T, IP, 1>(a, q, ranks, keys, live);
}

// A warp's share of query q's entries: rounds of 32 entries starting at `first`, one every
// `stride` entries, into its list `best` (lane j: the (j+1)-th best (cost, position) so far).
// Only an entry whose optimistic cost reaches the final bound and the warp's k-th so far is
// re-scored. The optimistic costs come four rounds at a time: the final bound turns most
// entries away, and one load per round made the queries that appended many rows wait.
template <class T, bool IP, bool INT>
__device__ __forceinline__ uint64_t settle_entries(const SettleArgs<T>& a, int64_t q, const float* query, int n,
                                                   int first, int stride, uint64_t best) {
  constexpr uint64_t kNone = ~uint64_t{0};
  constexpr int kSpan = 4;
  const int lane = threadIdx.x % 32;
  const float bound = from_ordered(__ldcg(a.prune.bound + q));
  const int seeded = seeded_entries(a.prune, q);
  const int32_t* pos = a.prune.pos + q * a.prune.cap;
  const float* opt = a.prune.opt + q * a.prune.cap;
  for (int b0 = first; b0 < n; b0 += kSpan * stride) {
    float o[kSpan];
#pragma unroll
    for (int s = 0; s < kSpan; ++s) {
      const int i = b0 + s * stride + lane;
      o[s] = i < n ? __ldcg(opt + i) : 0.0f;
    }
#pragma unroll
    for (int s = 0; s < kSpan; ++s) {
      const int i = b0 + s * stride + lane;
      const bool reaches = i < n && !(o[s] > bound);
      if (!__any_sync(kFullMask, reaches)) continue;  // a round that changes nothing
      const uint64_t kth = __shfl_sync(kFullMask, best, static_cast<int>(a.k) - 1);
      const float kth_cost =
          kth == kNone ? __int_as_float(0x7fffffff) : from_ordered(static_cast<uint32_t>(kth >> 32));
      uint64_t key = kNone;
      if (reaches && !(o[s] > kth_cost)) key = entry_key<T, IP, INT>(a, q, query, i, seeded, __ldcg(pos + i), o[s]);
      if (__any_sync(kFullMask, key != kNone)) best = warp_merge32(best, key);
    }
  }
  return best;
}

// Queries with at most kSettleWarpEntries entries take a warp each; those with more, and the
// overflowed ones, a block each. A warp settles its query's entries one round after another, so
// a query with many entries (a looser bound) set the warp kernel's length while most warps had
// finished (ncu, H100: 18-23% of the warps active on average).
constexpr int kSettleWarpEntries = 128;

// Query q past kSettleWarpEntries entries, by the whole block: each warp settles every eighth
// round of its entries, or, where the query overflowed its entries, scans every eighth window of
// 32 rows of its probed lists exactly, as the SIMT scan computes them (excluded rows left out);
// warp 0 merges the eight lists. part: the warps' lists, in shared memory.
template <class T, bool IP, bool INT>
__device__ __forceinline__ void settle_block_query(const SettleArgs<T>& a, int64_t q, int n,
                                                   uint64_t (&part)[kThreads / 32][32]) {
  constexpr uint64_t kNone = ~uint64_t{0};
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* query = a.queries + q * a.dim;
  uint64_t best = kNone;
  if (n <= a.prune.cap) {
    best = settle_entries<T, IP, INT>(a, q, query, n, warp * 32, kThreads, best);
  } else {
    for (int64_t p = 0; p < a.nprobe; ++p) {
      const int64_t l = a.probes[q * a.nprobe + p];
      if (l < 0) continue;
      const int64_t size = a.list_size[l], off = a.cand.offsets[q * (a.nprobe + 1) + p];
      for (int64_t r0 = warp * 32; r0 < size; r0 += kThreads) {
        const int64_t row = r0 + lane;
        uint64_t key = kNone;
        if (row < size) key = candidate_row_key<T, IP, INT>(a, query, l, row, off);
        if (__any_sync(kFullMask, key != kNone)) best = warp_merge32(best, key);
      }
    }
  }
  part[warp][lane] = best;
  __syncthreads();
  if (warp == 0) {
    for (int w = 1; w < kThreads / 32; ++w) best = warp_merge32(best, part[w][lane]);
    if (lane < a.k) write_settled<T, IP>(a, q, lane, best);
  }
  __syncthreads();
}

// The settling for k <= 32, one launch: first the queries past kSettleWarpEntries entries, a
// block each, then the rest, a warp each. The few long queries start first and the many short
// ones fill the other blocks beside them: as two kernels the block kernel's longest query ran
// alone after the warp kernel (1M x 128 f32, nprobe 16, k 10, H100: 50 + 69 us).
template <class T, bool IP, bool INT>
__global__ void __launch_bounds__(kThreads) settle_kernel(SettleArgs<T> a) {
  __shared__ uint64_t part[kThreads / 32][32];
  const int lane = threadIdx.x % 32;
  for (int64_t q = blockIdx.x; q < a.nq; q += gridDim.x) {
    const int n = __ldcg(a.prune.found + q);
    if (n > kSettleWarpEntries) settle_block_query<T, IP, INT>(a, q, n, part);
  }
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  for (int64_t q = blockIdx.x * (kThreads / 32) + threadIdx.x / 32; q < a.nq; q += warps) {
    const int n = __ldcg(a.prune.found + q);
    if (n > kSettleWarpEntries) continue;  // settled above
    const uint64_t best = settle_entries<T, IP, INT>(a, q, a.queries + q * a.dim, n, 0, 32, ~uint64_t{0});
    if (lane < a.k) write_settled<T, IP>(a, q, lane, best);
  }
}

// The settling for k in (32, kPruneMaxK], a block per query, each block claiming its next query
// when it is free (SettleArgs::next_unit): a query scanned in full takes many times another's
// time, and with every gridDim-th query (~25 a block at 10,000) each one held up those behind it.
// ncu, H100, 1M x 128 f32, nprobe 16, k 4096 (session 77): the settle 2.47 -> 2.28 ms, and 4.37 ->
// 3.88 ms at three deviations of margin, where more queries fall back.
// The entries that can still enter (optimistic cost within the final bound) get their (exact
// cost, position) keys in shared memory (re-scored with the SIMT arithmetic unless exact), the k
// best are selected, and each is written at its rank (the seed's keys come sorted; only the
// appended ones are sorted). An overflowed query is scanned in full instead, a block-wide window
// of rows at a time: their exact keys join the k best so far, and whenever the shared keys may
// not hold the next window the k best are selected and kept (keep_k_best). The keys are dynamic
// shared memory: one per entry (prune.cap, a power of two at least 2k and k + kThreads).
// Results a thread of settle_wide_kernel writes together (write_settled_group): four make the
// k 1000 settle's one round; k 4096 takes four.
constexpr int kWriteGroup = 4;
template <class T, bool IP, bool INT>
__global__ void __launch_bounds__(kThreads) settle_wide_kernel(SettleArgs<T> a) {
  constexpr unsigned long long kNone = ~0ull;
  extern __shared__ unsigned long long keys[];
  __shared__ int count;
  __shared__ unsigned hist[256];
  __shared__ KthPick picked;
  __shared__ int warp_counts[2 * kThreads / 32];
  __shared__ int seed_kept;
  __shared__ unsigned long long entering_and, entering_or;  // of the keys that can enter
  __shared__ unsigned long long held_last;  // a full scan's k-th key so far: keys above it cannot enter
  const int tid = threadIdx.x, k = static_cast<int>(a.k), nkeys = static_cast<int>(a.prune.cap);
  const auto settle_sort = [&](unsigned long long* first, int m) {  // ends with a barrier
    if (a.register_sort)
      block_sort(first, m);
    else
      block_bitonic_sort(first, m);
  };
  // Writes keys[0, n) as query q's results, keys[i] at rank rank_of(i, keys[i]), a thread's
  // kWriteGroup at a time.
  const auto write_results = [&](int64_t q, int n, auto rank_of) {
    for (int i0 = tid; i0 < n; i0 += kWriteGroup * kThreads) {
      int rank[kWriteGroup];
      uint64_t key[kWriteGroup];
      bool live[kWriteGroup];
#pragma unroll
      for (int g = 0; g < kWriteGroup; ++g) {
        const int i = i0 + g * kThreads;
        live[g] = i < n;
        key[g] = live[g] ? keys[i] : kNone;
        rank[g] = live[g] ? rank_of(i, key[g]) : 0;
      }
      write_settled_group<T, IP, kWriteGroup>(a, q, rank, key, live);
    }
  };
  // A full scan's keys[0, count) cut back to their k best, in no order (block_kth_key, then
  // block_keep_not_above: keys are distinct, so exactly k stay), whose k-th then turns away every
  // later key above it; ends with a barrier. Sorting all the held keys at each fill instead (8,192
  // at k 4096, ~17 sorts for a query of 65,000 rows) made the few queries that the sampled bound
  // misleads cost the whole batch a fifth of its rate, by the rates alone (k 4096, H100, session
  // 76: one deviation less of margin took the batch from 917K to 714K QPS; with this, 782K).
  const auto keep_k_best = [&]() {
    __syncthreads();  // the window's keys and count are in
    const int c = count;
    if (c > k) {
      const unsigned long long last = block_kth_key(keys, c, k, hist, &picked);  // its barriers: c is read
      block_keep_not_above(keys, c, last, warp_counts);  // ends with a barrier
      if (tid == 0) {
        count = k;
        held_last = last;
      }
    }
    __syncthreads();
  };
  __shared__ int64_t claimed;  // next_block_unit's
  for (int64_t q = blockIdx.x; q < a.nq; q = next_block_unit(a, q, &claimed)) {
    const float* query = a.queries + q * a.dim;
    const int n = __ldcg(a.prune.found + q);
    if (tid == 0) {
      count = 0;
      entering_and = ~0ull;
      entering_or = 0;
    }
    __syncthreads();
    bool full = n > a.prune.cap;  // overflowed: scanned in full below
    if (!full) {
      const uint32_t ordered_bound = __ldcg(a.prune.bound + q);
      const float bound = from_ordered(ordered_bound);
      const int32_t* pos = a.prune.pos + q * a.prune.cap;
      const float* opt = a.prune.opt + q * a.prune.cap;
      const int seeded = seeded_entries(a.prune, q);
      // Keys in entry order, all ones for entries that cannot enter: the seed's first, sorted
      // (the select's order: cost, then position; those past the bound are its last), then the
      // appended ones. count: how many can enter (a warp's lanes add once). A thread loads its
      // costs and positions kSettleSpan entries at a time: one entry a load left each block
      // waiting on a chain of dependent loads (~1,650 entries a query at k 1000).
      constexpr int kSettleSpan = 4;
      int entering = 0;
      unsigned long long key_and = ~0ull, key_or = 0;
      for (int i0 = tid; i0 < n; i0 += kSettleSpan * kThreads) {
        float o[kSettleSpan];
        int32_t at[kSettleSpan];
#pragma unroll
        for (int s = 0; s < kSettleSpan; ++s) {
          const int i = i0 + s * kThreads;
          o[s] = i < n ? __ldcg(opt + i) : 0.0f;
          at[s] = i < n ? __ldcg(pos + i) : 0;
        }
#pragma unroll
        for (int s = 0; s < kSettleSpan; ++s) {
          const int i = i0 + s * kThreads;
          const bool enters = i < n && !(o[s] > bound);  // worse than the final bound: cannot enter
          if (!enters) {
            if (i < n) keys[i] = kNone;
            continue;
          }
          const unsigned long long key = entry_key<T, IP, INT>(a, q, query, i, seeded, at[s], o[s]);
          keys[i] = key;
          ++entering;
          key_and &= key;
          key_or |= key;
        }
      }
      entering = __reduce_add_sync(kFullMask, entering);
      if (entering != 0) {  // the bits every entering key shares (block_kth_key's first digits)
        const auto halves = [](unsigned long long v, auto reduce) {
          return static_cast<unsigned long long>(reduce(static_cast<uint32_t>(v >> 32))) << 32 |
                 reduce(static_cast<uint32_t>(v));
        };
        key_and = halves(key_and, [](uint32_t v) { return __reduce_and_sync(kFullMask, v); });
        key_or = halves(key_or, [](uint32_t v) { return __reduce_or_sync(kFullMask, v); });
        if (tid % 32 == 0) {
          atomicAdd(&count, entering);
          atomicAnd(&entering_and, key_and);
          atomicOr(&entering_or, key_or);
        }
      }
      __syncthreads();
      // An estimated bound (PruneState::estimated) holds only where k exact costs are within it:
      // else the query is scanned in full (count is the entries within it: their costs are
      // exact). With none (all ones) every row it can return was appended.
      full = a.prune.estimated && count < k && ordered_bound != 0xffffffffu;
    }
    // keys[0, kept): the k best at most, a sorted run of seeds (the seed's) and then the others.
    int kept, seeds;
    if (!full) {
      // Past k keys (distinct: each holds its position) the k-th by a radix selection, else every
      // key that can enter; those up to it stay, in entry order, and only the appended ones
      // among them are sorted: each key's rank is then its place in its run plus the keys of the
      // other run below it. k 1000 on the 1M x 128 mixture, ~2,300 keys a query: sorting them all
      // took 4.8 ms, selecting first and sorting the k 1.9 (ncu); ranking the runs instead of
      // sorting the k took k 100 / 1000 from 1.30 / 0.89M QPS to 1.37 / 0.92M (H200).
      const int run = a.prune.seeded != nullptr ? min(__ldcg(a.prune.seeded + q), n) : 0;
      // The k smallest keys are entering ones, so their shared top bits need no radix pass.
      const unsigned long long last =
          count > k ? block_kth_key(keys, n, k, hist, &picked, entering_and, __clzll(entering_and ^ entering_or))
                    : kNone - 1;
      if (tid == 0) seed_kept = keys_not_above(keys, run, last);
      __syncthreads();  // before the keys move
      kept = block_keep_not_above(keys, n, last, warp_counts);
      seeds = seed_kept;
    } else {
      __syncthreads();  // every thread has read count
      if (tid == 0) {
        count = 0;
        held_last = kNone;
      }
      for (int64_t p = 0; p < a.nprobe; ++p) {
        const int64_t l = a.probes[q * a.nprobe + p];
        if (l < 0) continue;
        const int64_t size = a.list_size[l], off = a.cand.offsets[q * (a.nprobe + 1) + p];
        for (int64_t r0 = 0; r0 < size; r0 += kThreads) {
          __syncthreads();  // count and held_last are current
          const int64_t row = r0 + tid;
          if (row < size) {
            const int64_t slot = a.list_start[l] + row;
            if (row_allowed(a.removed, a.filter, a.filter_set, slot, [&] { return a.ids[slot]; })) {
              const unsigned long long key = exact_key<T, IP, INT>(a, query, l, row, off + row);
              if (key <= held_last) keys[atomicAdd(&count, 1)] = key;
            }
          }
          __syncthreads();
          if (count > nkeys - kThreads) keep_k_best();  // room for the next window
        }
      }
      keep_k_best();
      kept = count;
      seeds = 0;
    }
    // Only the keys past the sorted run are sorted; each is then written at its rank.
    const int m = pow2_at_least(max(kept - seeds, 1));  // seeds + m <= 2 kept <= cap
    for (int i = kept + tid; i < seeds + m; i += kThreads) keys[i] = kNone;
    __syncthreads();
    settle_sort(keys + seeds, m);  // ends with a barrier
    // Keys not above key - 1 are the keys below it (a key is never 0: that is a NaN's order).
    write_results(q, kept, [&](int i, unsigned long long key) {
      return i < seeds ? i + keys_not_above(keys + seeds, kept - seeds, key - 1)
                       : i - seeds + keys_not_above(keys, seeds, key - 1);
    });
    for (int r = kept + tid; r < k; r += kThreads) write_settled<T, IP>(a, q, r, kNone);
    __syncthreads();  // the next query reuses keys and count
  }
}

template <class T>
void launch_settle(const DeviceContext& ctx, cudaStream_t stream, bool ip, bool integer, const SettleArgs<T>& args) {
  const auto resident_grid = [&](auto kernel, std::size_t dynamic) {
    return static_cast<int64_t>(
               std::max(1, ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, dynamic))) *
           ctx.limits().sm_count;
  };
  // k <= 32: settle_kernel (a block per query with many entries or overflowed, then a warp per
  // query with few). Past 32: a block per query for both.
  auto go = [&](auto settle, auto wide) {
    if (args.k > kSettleNarrowMaxK) {
      // Once per context for the largest cap (DeviceContext::opt_in_shared_memory).
      ctx.opt_in_shared_memory(reinterpret_cast<const void*>(wide), kPruneLargestCap * sizeof(unsigned long long));
      const std::size_t dynamic = static_cast<std::size_t>(args.prune.cap) * sizeof(unsigned long long);
      const int64_t grid = std::min<int64_t>(args.nq, resident_grid(wide, dynamic));
      wide<<<static_cast<unsigned>(std::max<int64_t>(1, grid)), kThreads, dynamic, stream>>>(args);
      IVF_CUDA_CHECK_LAUNCH();
      return;
    }
    const int64_t grid = std::min<int64_t>(std::max<int64_t>(args.nq, 1), resident_grid(settle, 0));
    settle<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(args);
    IVF_CUDA_CHECK_LAUNCH();
  };
  if constexpr (DeviceElement<T>::kInteger) {
    if (integer) {
      ip ? go(settle_kernel<T, true, true>, settle_wide_kernel<T, true, true>)
         : go(settle_kernel<T, false, true>, settle_wide_kernel<T, false, true>);
      return;
    }
  }
  ip ? go(settle_kernel<T, true, false>, settle_wide_kernel<T, true, false>)
     : go(settle_kernel<T, false, false>, settle_wide_kernel<T, false, false>);
}

}  // namespace ivfgpu::cuda::scan_detail
