// What the two seeds on tensor cores share (scan_seed.cuh: int8; scan_seed_f16.cuh: f16): a
// lane's few best costs, the way a query's first entries and bound are set from a warp's sorted
// k best, and the exact scan of a query the lanes could not settle (a block each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cub/block/block_scan.cuh>

#include "async_copy.cuh"
#include "launch.cuh"
#include "scan_prune.cuh"
#include "scan_tensor.hpp"
#include "scan_tiles.cuh"
#include "warp_sort.cuh"

namespace ivfgpu::cuda::scan_detail {

// A lane's kSeedKeep best (cost, candidate position) for one query row, by cost, and the best
// cost it dropped.
struct SeedKept {
  float cost[kSeedKeep];
  int32_t pos[kSeedKeep];
  float dropped;
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int j = 0; j < kSeedKeep; ++j) {
      cost[j] = __int_as_float(0x7f800000);
      pos[j] = -1;
    }
    dropped = __int_as_float(0x7f800000);
  }
  // Inserts (v, at) in cost order; the last falls out. Rows come in position order within a
  // lane, so equal costs keep it.
  __device__ __forceinline__ void offer(float v, int32_t at) {
    if (!(v < cost[kSeedKeep - 1])) {
      dropped = fminf(dropped, v);
      return;
    }
    dropped = fminf(dropped, cost[kSeedKeep - 1]);
#pragma unroll
    for (int j = kSeedKeep - 1; j > 0; --j) {
      const bool shift = v < cost[j - 1], here = !shift && v < cost[j];
      pos[j] = shift ? pos[j - 1] : here ? at : pos[j];
      cost[j] = shift ? cost[j - 1] : here ? v : cost[j];
    }
    if (v < cost[0]) {
      cost[0] = v;
      pos[0] = at;
    }
  }
};

// A unit of a seed: one list, a kSeedQueries-query tile of the pairs probing it there, and
// kSeedUnitRows of its rows (args.tile_off counts tiles x row chunks per list). A list's query
// tiles are its fastest index, so the blocks that read the same row chunk start together and all
// but the first find the rows in L2; chunk by chunk for one tile, the other tiles' blocks read the
// chunk again from DRAM (ncu, H200, 1M x 960 fp32, nprobe 16, k 10: seed_f16_kernel read 9.9 GB
// from DRAM for 3.8 GB of rows; bench/RESULTS.md, session 56).
struct SeedUnit {
  int64_t list, first_row;  // the list, the unit's first row in it
  int queries, rows;        // the tile's queries, the unit's rows
  int64_t tile;             // the query tile's index in the list's pairs
};
template <class T>
__device__ __forceinline__ SeedUnit seed_unit(const TileArgs<T>& a, int64_t u) {
  SeedUnit s;
  const int64_t at = block_unit_of(a.tile_off, a.nlist, u);  // the list's place in tile_off
  s.list = unit_list_at(a, at);
  const int64_t size = a.list_size[s.list];
  const int64_t tiles = (a.pair_count[s.list] + kSeedQueries - 1) / kSeedQueries, local = u - a.tile_off[at];
  s.tile = local % tiles;
  s.first_row = (local / tiles) * kSeedUnitRows;
  const int64_t prem = a.pair_count[s.list] - s.tile * kSeedQueries;
  s.queries = static_cast<int>(prem < kSeedQueries ? prem : kSeedQueries);
  s.rows = static_cast<int>(size - s.first_row < kSeedUnitRows ? size - s.first_row : kSeedUnitRows);
  return s;
}
// Threads 0 .. kSeedQueries - 1: the unit's queries (q_row, -1 past the tile's last) and the
// candidate position of the list's row 0 for each (q_base).
template <class T>
__device__ __forceinline__ void seed_unit_queries(const TileArgs<T>& a, const SeedUnit& s, int64_t* q_row,
                                                  int64_t* q_base) {
  const int tid = threadIdx.x;
  if (tid >= kSeedQueries) return;
  q_row[tid] = -1;
  if (tid >= s.queries) return;
  const int64_t pr = a.grouped[a.pair_begin[s.list] + s.tile * kSeedQueries + tid];
  q_row[tid] = pr / a.nprobe;
  q_base[tid] = a.cand.offsets[(pr / a.nprobe) * (a.nprobe + 1) + pr % a.nprobe];
}
// How many of the unit's 16-row groups (w, w + kSeedWarps, ...) warp w takes.
__device__ __forceinline__ int seed_warp_groups(const SeedUnit& s, int warp) {
  const int groups = (s.rows + 15) / 16;
  return groups > warp ? (groups - warp + kSeedWarps - 1) / kSeedWarps : 0;
}
// The unit's queries' squared norms into q_sq (0 past the tile's queries), a warp per
// kSeedQueries / kSeedWarps of them: sum = add(sum, q, j) over dimensions j < dim, lane-strided,
// then the warp's sum.
template <class S, class Add>
__device__ __forceinline__ void seed_query_norms(const int64_t* q_row, int64_t dim, S* q_sq, Add&& add) {
  const int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < kSeedQueries; r += kSeedWarps) {
    const int64_t q = q_row[r];
    S sum = 0;
    if (q >= 0)
      for (int64_t j = lane; j < dim; j += 32) sum = add(sum, q, j);
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(kFullMask, sum, o);
    if (lane == 0) q_sq[r] = sum;
  }
}
// Whether row `row` of the unit is judged: inside it, and neither removed nor filtered out.
template <class T>
__device__ __forceinline__ bool seed_row_judged(const TileArgs<T>& a, const SeedUnit& s, int row) {
  if (row >= s.rows) return false;
  if (!a.check_rows) return true;
  const int64_t slot = a.list_start[s.list] + s.first_row + row;
  return row_allowed(a.removed, a.filter, a.filter_set, slot, [&] { return a.ids[slot]; });
}

// Lane (g, t)'s part of a step of its warp: rows g and 8 + g of the unit's 16-row group gi
// (from `rows`, rcount of them; a row past them reads row 0), in each of CH k steps of STEP
// dimensions from step s0, the PER elements from PER * t: f(c, in, a, b) for k step c, with a and
// b the two rows' first elements there and `in` false past dim (dim is a multiple of PER).
template <int CH, int STEP, int PER, class T, class F>
__device__ __forceinline__ void seed_lane_step(const T* rows, int64_t dim, int rcount, int gi, int s0, F&& f) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int ra = gi * 16 + g, rb = ra + 8;
  const T* xa = rows + static_cast<int64_t>(ra < rcount ? ra : 0) * dim + PER * t;
  const T* xb = rows + static_cast<int64_t>(rb < rcount ? rb : 0) * dim + PER * t;
#pragma unroll
  for (int c = 0; c < CH; ++c) {
    const int64_t d = int64_t{s0 + c} * STEP;
    f(c, d + PER * t < dim, xa + d, xb + d);
  }
}
// The lane's loads of such a step into registers (zero past dim); load(p) reads PER elements at p.
template <int CH, int STEP, int PER, class T, class V, class Load>
__device__ __forceinline__ void seed_load_step(const T* rows, int64_t dim, int rcount, int gi, int s0, V (&va)[CH],
                                               V (&vb)[CH], const V& zero, Load&& load) {
  seed_lane_step<CH, STEP, PER>(rows, dim, rcount, gi, s0, [&](int c, bool in, const T* a, const T* b) {
    va[c] = in ? load(a) : zero;
    vb[c] = in ? load(b) : zero;
  });
}
// The f16 seed's row loads, asynchronous (cp.async) into a ring of STAGES steps in shared
// memory, so that several steps' loads are in flight without holding registers: loaded into
// registers a step ahead (seed_load_step, above) the kernel took 167 registers, three blocks an
// SM, and stalled on its loads and fixed-latency dependencies about equally; through the ring it
// takes 119-125 registers at four blocks and 15% less time (ncu, session 45). The int8 seed keeps
// the registers: its steps are a few instructions each, and the ring's shared loads cost it 1-5%.
// Lane (g, t) copies, for each of CH k steps of STEP dimensions, the PER elements from PER * t of
// rows g and 8 + g of a 16-row group, and reads back only what it copied itself: no barrier.
// Words are laid out [stage][k step][row half][lane], so a warp's read of one is conflict-free.
template <class T, int CH, int STEP, int PER, int STAGES>
struct SeedRing {
  static constexpr int kBytes = PER * static_cast<int>(sizeof(T));
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async copies 4, 8 or 16 bytes");
  using Word = std::conditional_t<kBytes == 16, uint4, std::conditional_t<kBytes == 8, uint2, uint32_t>>;
  static constexpr int kStages = STAGES;
  static constexpr std::size_t kWarpBytes = std::size_t{STAGES} * CH * 2 * 32 * kBytes;

  Word* base;  // this warp's ring

  // Step (16-row group gi, k steps s0 ..) into stage st, as seed_lane_step walks it: rows past
  // rcount read row 0 of `rows` (their columns are never judged), zeros past dim.
  __device__ __forceinline__ void issue(const T* rows, int64_t dim, int rcount, int gi, int s0, int st) const {
    const int lane = threadIdx.x % 32;
    seed_lane_step<CH, STEP, PER>(rows, dim, rcount, gi, s0, [&](int c, bool in, const T* a, const T* b) {
      Word* w = base + ((st * CH + c) * 2) * 32 + lane;
      if (in) {
        copy_async(w, a);
        copy_async(w + 32, b);
      } else {
        *w = Word{};
        w[32] = Word{};
      }
    });
  }
  // The word lane copied for k step c of stage st, row half n (row g or 8 + g).
  __device__ __forceinline__ Word at(int st, int c, int n) const {
    return base[((st * CH + c) * 2 + n) * 32 + threadIdx.x % 32];
  }

 private:
  __device__ static __forceinline__ void copy_async(Word* to, const T* from) {
    const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(to));
    if constexpr (kBytes == 16)
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(from) : "memory");
    else
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(from), "n"(kBytes) : "memory");
  }
};
// A step of a warp's walk through its 16-row groups: the group (the warp's j-th, rows of group
// warp + j * kSeedWarps) and the chunk of k steps within it. The walks advance it a step at a
// time instead of dividing the step's index by the chunks a group, a runtime count: ncu (H100,
// f16 rows and queries, 1M x 128, nprobe 16, session 63) had the two divisions a step at ~10% of
// the f16 seed's instructions.
struct SeedStep {
  int group = 0, chunk = 0;
  __device__ __forceinline__ void advance(int per_group) {
    if (++chunk == per_group) {
      chunk = 0;
      ++group;
    }
  }
};
// A warp's nsteps steps (per_group chunks a group) through its ring: issue(step, stage) starts a
// step's copies, body(step, stage) uses them. Stages - 1 steps are in flight while one is used;
// every iteration commits a group (empty past the last step), so waiting for all but the newest
// stages - 2 groups means the step has arrived. A stage is refilled only after the body that
// read it.
template <int STAGES, class Issue, class Body>
__device__ __forceinline__ void seed_ring_steps(int nsteps, int per_group, Issue&& issue, Body&& body) {
  SeedStep issued, used;  // the next step to issue, to use
  int issue_stage = 0, use_stage = 0;
  const auto next_stage = [](int& stage) { stage = stage + 1 == STAGES ? 0 : stage + 1; };
  const auto issue_next = [&] {
    issue(issued, issue_stage);
    issued.advance(per_group);
    next_stage(issue_stage);
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < nsteps) issue_next();
    copies_commit();
  }
  for (int i = 0; i < nsteps; ++i) {
    copies_wait<STAGES - 2>();
    if (i + STAGES - 1 < nsteps) issue_next();
    copies_commit();
    body(used, use_stage);
    used.advance(per_group);
    next_stage(use_stage);
  }
}
// Before the first step of a 16-row group: the lane's accumulators and squared-norm parts.
template <class S>
__device__ __forceinline__ void seed_clear_group(S (&acc)[2][4], S (&xsq)[2]) {
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    xsq[n] = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[n][j] = 0;
  }
}
// After the last step of 16-row group gi: xsq[n] holds a quarter of the squared norm of row
// 8n + g of the group (lanes 4g .. 4g + 3 hold the rest), and the lane's accumulator columns are
// rows 8n + 2t + c (c = 0, 1). For each of those rows that is judged (seed_row_judged):
// f(n, c, row, its squared norm).
template <class T, class S, class F>
__device__ __forceinline__ void seed_for_judged_columns(const TileArgs<T>& a, const SeedUnit& su, int gi,
                                                        S (&xsq)[2], F&& f) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    xsq[n] += __shfl_xor_sync(kFullMask, xsq[n], 1);
    xsq[n] += __shfl_xor_sync(kFullMask, xsq[n], 2);
  }
#pragma unroll
  for (int n = 0; n < 2; ++n) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const S xs = __shfl_sync(kFullMask, xsq[n], 4 * (2 * t + c));
      const int row = gi * 16 + 8 * n + 2 * t + c;
      if (seed_row_judged(a, su, row)) f(n, c, row, xs);
    }
  }
}
// A warp's nsteps steps (each a chunk of CH k steps of one of its 16-row groups, per_group
// chunks a group): body(step, va, vb) multiplies a step's rows while the next one's loads
// (load(next, va, vb)) are in flight.
template <int CH, class V, class Load, class Body>
__device__ __forceinline__ void seed_pipelined_steps(int nsteps, int per_group, Load&& load, Body&& body) {
  V na[CH], nb[CH];
  SeedStep step, next;
  if (nsteps > 0) load(next, na, nb);
  next.advance(per_group);
  for (int i = 0; i < nsteps; ++i) {
    V va[CH], vb[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      va[c] = na[c];
      vb[c] = nb[c];
    }
    if (i + 1 < nsteps) load(next, na, nb);
    next.advance(per_group);
    body(step, va, vb);
    step.advance(per_group);
  }
}

// A lane's two query rows' kept values into the query's share of sv (one atomic for the four
// lanes of a query row in the warp; slots past the share, never by its size, would be lost:
// counted as a dropped row, they flag the query), and the warp's best dropped cost into the
// query's. q: the row's query, or -1 past the tile's last. Every lane of the warp calls it.
__device__ __forceinline__ void seed_keep_values(const SeedValues& sv, const SeedKept& best, int64_t q) {
  const int lane = threadIdx.x % 32, t = lane % 4;
  float dropped = best.dropped;
  for (int o = 1; o < 4; o *= 2) dropped = fminf(dropped, __shfl_xor_sync(kFullMask, dropped, o));
  int base = 0;
  if (q >= 0 && t == 0) base = atomicAdd(sv.count + q, 4 * kSeedKeep);
  base = __shfl_sync(kFullMask, base, lane & ~3);
  if (q < 0) return;
  const bool fits = base + 4 * kSeedKeep <= sv.stride;
  if (t == 0) atomicMin(sv.dropped + q, to_ordered(fits ? dropped : -__int_as_float(0x7f800000)));
  if (!fits) return;
  const int64_t at = q * sv.stride + base + t * kSeedKeep;
#pragma unroll
  for (int j = 0; j < kSeedKeep; ++j) {
    sv.cost[at + j] = best.cost[j];
    sv.pos[at + j] = best.pos[j];
  }
}

// A warp's sorted k best keys (ordered cost << 32 | candidate position; lane i holds the i-th,
// ~0 past the last): how many there are and the k-th cost (+inf with fewer than k).
struct SeedTop {
  int found;
  float kth;
};
__device__ __forceinline__ SeedTop seed_top(unsigned long long mine, int k) {
  const int lane = threadIdx.x % 32;
  const int found = __popc(__ballot_sync(kFullMask, lane < k && mine != ~0ull));
  const unsigned long long kth = __shfl_sync(kFullMask, mine, (k - 1) & 31);  // k <= 32
  return SeedTop{found, found == k ? from_ordered(static_cast<uint32_t>(kth >> 32)) : __int_as_float(0x7f800000)};
}

// Query q's first entries from the warp's sorted k best (as seed_top takes them): exact
// (seeded), their k-th cost its bound (none with fewer than k). Where !complete, no entries and
// no bound, and the query is listed in sv's flagged queries (when given) for seed_flagged_kernel.
// Every lane of the warp calls it.
__device__ __forceinline__ void seed_set_entries(const PruneState& pr, int64_t q, unsigned long long mine,
                                                 const SeedTop& top, bool complete, const SeedValues* sv) {
  const int lane = threadIdx.x % 32;
  if (complete && lane < top.found) {
    pr.pos[q * pr.cap + lane] = static_cast<int32_t>(mine & 0xffffffffu);
    pr.opt[q * pr.cap + lane] = from_ordered(static_cast<uint32_t>(mine >> 32));
  }
  if (lane == 0) {
    pr.found[q] = complete ? top.found : 0;
    pr.seeded[q] = complete ? top.found : 0;
    pr.bound[q] = complete && top.found == pr.k ? to_ordered(top.kth) : kNoBound;
    if (sv != nullptr && !complete) sv->flagged[atomicAdd(sv->nflagged, 1)] = static_cast<int32_t>(q);
  }
}

// How many values query q kept (its count, at most its share's stride).
__device__ __forceinline__ int seed_kept_count(const SeedValues& sv, int64_t q) {
  return static_cast<int>(min(static_cast<int64_t>(sv.count[q]), sv.stride));
}
// The k best of query q's n kept values by (cost, tag(i)), i the value's index among the query's
// kept ones, as a warp's running list (WarpBest). A first pass takes each lane's least cost; the
// k-th of those bounds the k-th best cost from above (k lanes each hold a cost at or below it),
// so the second offers only values at or below it (ties at it included): a merge or a few
// insertions for the whole query, where every chunk of 32 values went to the list before (ncu,
// H200, 1M x 128 uint8, nprobe 16: seed_entries_kernel 40-41 us before, 30.6 us after).
constexpr int kSeedFilterMin = 64;  // values past which the first pass runs
template <class Tag>
__device__ __forceinline__ WarpBest seed_kept_best(const SeedValues& sv, int64_t q, int n, int k, Tag&& tag) {
  const int lane = threadIdx.x % 32;
  const float inf = __int_as_float(0x7f800000);
  const float* cost = sv.cost + q * sv.stride;
  unsigned long long least = ~0ull;  // past every ordered cost: a lane without values
  // Up to two chunks its sort would cost more than the merges it saves (an estimate).
  for (int i = lane; n > kSeedFilterMin && i < n; i += 32) {
    const float c = cost[i];
    if (c < inf && to_ordered(c) < least) least = to_ordered(c);
  }
  // Fewer than k lanes hold a finite cost (few rows kept: the rest are +inf), or no first pass:
  // then ~0, and every value passes.
  const unsigned long long bound = n > kSeedFilterMin ? __shfl_sync(kFullMask, warp_sort32(least), k - 1) : ~0ull;
  WarpBest best;
  for (int i0 = 0; i0 < n; i0 += 32) {
    const int i = i0 + lane;
    const float c = i < n ? cost[i] : inf;
    const bool offered = c < inf && to_ordered(c) <= bound;
    best.offer(offered ? static_cast<unsigned long long>(to_ordered(c)) << 32 | static_cast<uint32_t>(tag(i)) : ~0ull,
               k);
  }
  return best;
}
// Query q's first entries from the warp's sorted k best exact keys (seed_set_entries): complete,
// so its exact top-k of the seed's probes, unless a lane dropped a row whose cost reaches their
// k-th (sv.dropped: the best cost any lane dropped); otherwise flagged for seed_flagged_kernel.
// Every lane of the warp calls it.
__device__ __forceinline__ void seed_finish_entries(const SeedValues& sv, const PruneState& pr, int64_t q,
                                                    unsigned long long mine) {
  const float inf = __int_as_float(0x7f800000);
  const SeedTop top = seed_top(mine, pr.k);
  const float dropped = from_ordered(sv.dropped[q]);
  const bool complete = dropped == inf || (top.kth < inf && dropped > top.kth);
  seed_set_entries(pr, q, mine, top, complete, &sv);
}

// The flagged queries' exact scans, spread over the whole device: each flagged query's seed
// probes are cut into chunks of kFlaggedRows rows, numbered in query order (its items), and block b
// takes items b, b + gridDim.x, ...: a lane a row, each warp's k best by (cost, position) kept by
// a running list and merged across the block, the chunk's k best keys then parked in the query's
// values (no longer read: the re-scoring kernel is done with them). seed_flagged_merge_kernel then
// takes each flagged query's k best of its chunks' as seed_set_entries sets them. Cost gives a
// row's exact cost, the SIMT scan's value (IP: the similarity negated): Cost::stage(a, q) prepares
// the block's shared state for query q (every thread calls it, between barriers) and
// Cost::of(a, q, slot) is the cost of the row at slot.
//
// Why: a block a flagged query left the kernel as long as its busiest block's queries (ncu,
// H200, 1M x 960 fp32, nprobe 16, k 10: 1.79 ms, the busiest SM active 2.65M cycles against a
// mean of 0.71M); a chunk a block, chunk c of every query in one column of blocks, made it worse
// (2.46 ms: the first chunks' columns held nearly all the work). bench/RESULTS.md, session 56.
//
// The values hold a query's chunks: a query's seed probes' rows T are at most the largest first
// probes' total, so its chunks number at most T / kFlaggedRows + seed <= 2 (ceil(T / 2,048) +
// seed), which is 2 stride / kSeedUnitValues (tensor_seed_stride), each of k <= kSeedMaxK keys.
constexpr int64_t kFlaggedRows = kSeedUnitRows / 2;
static_assert(2 * kSeedMaxK <= kSeedUnitValues, "a flagged query's chunks' keys fit its values");
__host__ __device__ inline int64_t flagged_chunk_bound(int64_t stride) { return 2 * stride / kSeedUnitValues; }

// How many chunks probe p of query q makes, and all its seed probes.
template <class T>
__device__ __forceinline__ int64_t probe_chunks(const TileArgs<T>& a, const int32_t* probes, int64_t q, int64_t p) {
  return (a.list_size[probes[q * a.nprobe + p]] + kFlaggedRows - 1) / kFlaggedRows;
}
template <class T>
__device__ __forceinline__ int64_t flagged_chunks(const TileArgs<T>& a, const int32_t* probes, int64_t seed,
                                                  int64_t q) {
  int64_t chunks = 0;
  for (int64_t p = 0; p < seed; ++p) chunks += probe_chunks(a, probes, q, p);
  return chunks;
}
// Query q's chunk c of its seed probes (c below its count): the probe, and its first row there.
template <class T>
__device__ __forceinline__ int64_t flagged_chunk(const TileArgs<T>& a, const int32_t* probes, int64_t seed, int64_t q,
                                                 int64_t c, int64_t& first_row) {
  int64_t p = 0;
  for (; p + 1 < seed; ++p) {
    const int64_t chunks = probe_chunks(a, probes, q, p);
    if (c < chunks) break;
    c -= chunks;
  }
  first_row = c * kFlaggedRows;
  return p;
}
// A chunk's key parked in, and read back from, the query's values: the 64 bits as they are.
__device__ __forceinline__ void park_key(const SeedValues& sv, int64_t at, unsigned long long key) {
  sv.cost[at] = __uint_as_float(static_cast<uint32_t>(key >> 32));
  sv.pos[at] = static_cast<int32_t>(key & 0xffffffffu);
}
__device__ __forceinline__ unsigned long long parked_key(const SeedValues& sv, int64_t at) {
  return static_cast<unsigned long long>(__float_as_uint(sv.cost[at])) << 32 | static_cast<uint32_t>(sv.pos[at]);
}

// Every block reads the list of flagged queries (kThreads at a time, a prefix sum of their chunk
// counts), which the re-scoring wrote: usually empty, so the kernel costs its launch. It read
// every query's flag before, nq / kThreads rounds of a barrier each even with none flagged (ncu,
// H100, 1M x 128 f16, nprobe 16, k 10: 24.7 us at boost clocks, session 66). Items are numbered
// in the list's order, which varies from run to run; each chunk's k best keys, and so the merge,
// do not. The grid is at least the chunk bound, so a query gives a block at most one item a round.
template <class T, class Cost>
__global__ void seed_flagged_kernel(TileArgs<T> a, const int32_t* probes, int64_t seed, SeedValues sv,
                                    PruneState pr) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ unsigned long long scratch[kThreads];
  __shared__ Cost cost;
  __shared__ int64_t item_q[kThreads], item_c[kThreads];
  __shared__ int nitems;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t grid = gridDim.x;
  int64_t before = 0;  // items of the queries before this round's
  const int64_t nf = *sv.nflagged;
  for (int64_t f0 = 0; f0 < nf; f0 += kThreads) {
    const int64_t q = f0 + tid < nf ? sv.flagged[f0 + tid] : -1;
    const int64_t chunks = q >= 0 ? flagged_chunks(a, probes, seed, q) : 0;
    if (chunks > flagged_chunk_bound(sv.stride)) __trap();  // rows no slot holds: the bound's argument broke
    // Also the barrier after which the previous round is done with the items and the scan's storage.
    if (!__syncthreads_or(chunks > 0)) continue;  // no items: `before` stays
    int64_t first = 0, total = 0;
    Scan(scan_storage).ExclusiveSum(chunks, first, total);
    if (tid == 0) nitems = 0;
    __syncthreads();
    // This block's item of the query, if any: the first t >= before + first with t % grid == b.
    const int64_t t0 = before + first, mine = t0 + ((blockIdx.x - t0 % grid) % grid + grid) % grid;
    if (mine < t0 + chunks) {
      const int at = atomicAdd(&nitems, 1);
      item_q[at] = q;
      item_c[at] = mine - t0;
    }
    before += total;
    __syncthreads();
    for (int i = 0; i < nitems; ++i) {
      const int64_t fq = item_q[i];
      int64_t r0 = 0;
      const int64_t p = flagged_chunk(a, probes, seed, fq, item_c[i], r0);
      __syncthreads();  // the previous item is done with cost and scratch
      cost.stage(a, fq);
      __syncthreads();
      const int64_t l = probes[fq * a.nprobe + p], size = a.list_size[l];
      const int64_t base = a.cand.offsets[fq * (a.nprobe + 1) + p];
      const int64_t end = r0 + kFlaggedRows < size ? r0 + kFlaggedRows : size;
      WarpBest best;
      for (int64_t w0 = r0 + int64_t{warp} * 32; w0 < end; w0 += kThreads) {
        const int64_t r = w0 + lane, slot = a.list_start[l] + r;
        unsigned long long key = ~0ull;
        if (r < end &&
            (!a.check_rows || row_allowed(a.removed, a.filter, a.filter_set, slot, [&] { return a.ids[slot]; })))
          key = static_cast<unsigned long long>(to_ordered(cost.of(a, fq, slot))) << 32 |
                static_cast<uint32_t>(base + r);
        best.offer(key, pr.k);
      }
      // A warp list's entries past k are dropped first: they are not among its k best.
      const unsigned long long top = block_merge_sorted32(lane < pr.k ? best.mine : ~0ull, scratch);
      if (warp == 0 && lane < pr.k) park_key(sv, fq * sv.stride + item_c[i] * pr.k + lane, top);
    }
  }
}

// A warp per flagged query: the k best of its chunks' keys (~0 where a chunk had fewer than k
// rows), its exact top-k of the seed probes.
template <class T>
__global__ void __launch_bounds__(kThreads) seed_flagged_merge_kernel(TileArgs<T> a, const int32_t* probes,
                                                                      int64_t seed, SeedValues sv, PruneState pr) {
  const int lane = threadIdx.x % 32;
  const int64_t nf = *sv.nflagged;
  for (int64_t f = global_warp(); f < nf; f += warp_stride()) {
    const int64_t q = sv.flagged[f];
    const int64_t n = flagged_chunks(a, probes, seed, q) * pr.k;
    WarpBest best;
    for (int64_t i0 = 0; i0 < n; i0 += 32)
      best.offer(i0 + lane < n ? parked_key(sv, q * sv.stride + i0 + lane) : ~0ull, pr.k);
    seed_set_entries(pr, q, best.mine, seed_top(best.mine, pr.k), true, nullptr);
  }
}

template <class T, class Cost>
void launch_seed_flagged(const DeviceContext& ctx, cudaStream_t stream, const TileArgs<T>& args, int64_t nq,
                         const int32_t* probes, int64_t seed, const SeedValues& values, const PruneState& prune) {
  if (nq <= 0) return;
  const auto kernel = seed_flagged_kernel<T, Cost>;
  const int64_t resident = resident_grid(ctx, reinterpret_cast<const void*>(kernel), kThreads, 0);
  const int64_t grid = std::min<int64_t>(std::max(resident, flagged_chunk_bound(values.stride)), 1 << 30);
  kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(args, probes, seed, values, prune);
  IVF_CUDA_CHECK_LAUNCH();
  // A warp a flagged query, and few are (none in most batches): two blocks an SM loop over any
  // number of them, where a block a 256 queries left ~1,250 blocks at nq 10,000 to read a zero count.
  const unsigned merge_grid = grid_for_sms(nq * 32, kThreads, ctx.limits().sm_count, 2);
  seed_flagged_merge_kernel<T><<<merge_grid, kThreads, 0, stream>>>(args, probes, seed, values, prune);
  IVF_CUDA_CHECK_LAUNCH();
}

}  // namespace ivfgpu::cuda::scan_detail
