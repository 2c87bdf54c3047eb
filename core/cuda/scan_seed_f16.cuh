// The f16 seed of the pruned pass (scan_tensor.hpp, launch_f16_seed): f32 queries on rows of
// any type, k <= kF16SeedMaxK; included by the scan_tiles_<type>.cu files. docs/tensor-scan.md,
// "The f16 seed", gives the argument; in short:
//
// The pruned pass starts from each query's exact k best rows of its first probes: its first
// entries, and their k-th cost its first bound. The SIMT seed computes every exact distance of
// those probes and selects (0.72 + 0.19 ms of a ~2.9 ms batch at 1M x 128, nprobe 16, k 10 on
// the H100). This seed finds the same rows from f16 tensor-core costs and re-scores exactly only
// the few that can still be among them; it is the int8 seed's kernel (scan_seed.cuh) with f16
// operands, whose margin (margin_terms_f16: 11 significant bits) is narrow enough for that, where
// bf16's (8 bits) left nearly every query to the exact scan (session 43).
//
// Work unit: one list, a 16-query tile of the pairs probing it there, kSeedUnitRows of its rows;
// a block of four warps, each taking 16-row groups w, w + 4, ... (m16n8k16: queries as A, rows
// as B). A warp copies its rows into a ring of its own in shared memory (SeedRing: cp.async,
// two steps in flight, no barrier) and from there into B fragments: the k order within an mma
// step of 16 dimensions is free, so lane (g, t) takes dimensions 4t .. 4t + 3 of row g (one
// four-element copy) as the k indices 2t, 2t + 1, 2t + 8, 2t + 9 its B registers hold, and the
// query fragments (staged once a unit in shared memory) use the same assignment. L2 centres
// queries and rows on the list's centroid in fp32 first, as the pruned pass does. Each lane
// keeps the kSeedKeep best optimistic costs (the f16 cost less its margin: never worse than the
// exact one) it sees for each of its two query rows, with their candidate positions, and the
// best one it dropped.
//
// A warp per query then (seed_rescore_kernel): with m2 bounding any row's two margins (the
// query's and the rows' largest norms), B = the k-th best kept optimistic cost + m2 bounds the
// exact k-th (k kept rows are no worse). A row can be among the exact k best only if its
// optimistic cost reaches B: those kept are re-scored exactly (the SIMT scan's arithmetic) and
// the k best by (cost, position) become the entries; their k-th cost E is the bound. That is the
// exact top-k unless a lane dropped a row whose optimistic cost reaches E (a lane saw more than
// kSeedKeep rows that close, or a cost was not finite): such a query is flagged and
// seed_flagged_kernel scans its seed probes exactly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "element_traits.cuh"
#include "launch.cuh"
#include "scan_mma.cuh"
#include "scan_prune.cuh"
#include "scan_seed_common.cuh"
#include "scan_tensor.hpp"
#include "scan_tiles.cuh"
#include "warp_sort.cuh"

namespace ivfgpu::cuda::scan_detail {

constexpr int kF16SeedStep = 16;  // dimensions a k step
// The ring's shape, from ncu at base clocks (1M x 128 f32, nprobe 16, k 10, H100, session 45;
// the register pipeline it replaced: 550 us): four k steps a step, three steps in the ring and
// four blocks an SM (119-125 registers), 470 us; two in the ring 494 us, four (three blocks an
// SM) 518 us; two k steps a step, four in the ring, 582-600 us at four or five blocks an SM.
constexpr int kF16SeedChunkSteps = 4;  // k steps a step of a warp's loop loads
constexpr int kF16SeedStages = 3;      // steps in a warp's ring (kF16SeedStages - 1 in flight)
constexpr int kF16SeedBlocks = 4;      // blocks an SM the registers are bounded for
template <class T>
using F16SeedRing = SeedRing<T, kF16SeedChunkSteps, kF16SeedStep, 4, kF16SeedStages>;

// The shared memory of a unit: the query tile's fragments (a k step: 32 lanes x 16 bytes) and
// the list's centroid (fp32, zero past dim), both over dim rounded up to a chunk, then each
// warp's ring of rows.
__host__ __device__ inline int64_t f16_seed_padded_dim(int64_t dim) {
  constexpr int64_t chunk = int64_t{kF16SeedStep} * kF16SeedChunkSteps;
  return (dim + chunk - 1) / chunk * chunk;
}
__host__ __device__ inline std::size_t f16_seed_tile_bytes(int64_t dim) {
  const int64_t padded = f16_seed_padded_dim(dim);
  return static_cast<std::size_t>((padded / kF16SeedStep) * 32 * 16 + padded * 4);
}
template <class T>
std::size_t f16_seed_smem_bytes(int64_t dim) {
  return f16_seed_tile_bytes(dim) + kSeedWarps * F16SeedRing<T>::kWarpBytes;
}

// candidate_margin(m, qn, xn) for one query, as a few fused operations a row (the seed judges every
// (query, row) of its first probes; the general form took ~7 operations a value). The same terms:
// a qn xn + b p^2 + s p + c with p = qn + xn, rounded differently by an ulp or two, which the
// margin's doubling covers.
struct F16MarginAt {
  float qn, aq, b, s, c;
  __device__ F16MarginAt(const MarginTerms& m, float query_norm)
      : qn(query_norm), aq(m.a * query_norm), b(m.b), s(m.s), c(m.c) {}
  __device__ __forceinline__ float of(float xn) const {
    const float p = qn + xn;
    return fmaf(aq, xn, fmaf(fmaf(b, p, s), p, c));
  }
};
// A square root never below the real one: the hardware's approximation (off by a few ulps at
// most, not the IEEE sqrtf's Newton step and its special cases) raised by 2^-20, eight ulps.
// Margins grow with the norms, so they stay bounds (and are doubled besides).
__device__ __forceinline__ float sqrt_at_least(float v) {
  float r;
  asm("sqrt.approx.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r * 1.00000095f;  // 1 + 2^-20
}

// NATIVE (seed_native: f16 rows with f16 queries): nothing is centred
// or rounded, the ring's words are the B fragments as they are, and the margin is
// margin_terms_exact_operands' (the products are exact).
template <class T, bool IP, bool NATIVE = false>
__global__ void __launch_bounds__(kSeedThreads, kF16SeedBlocks)
    seed_f16_kernel(TileArgs<T> a, MarginTerms mg, SeedValues sv) {
  static_assert(!NATIVE || std::is_same_v<T, Half>, "the native seed: f16 rows");
  constexpr bool kCentred = !IP && !NATIVE;
  extern __shared__ __align__(16) unsigned char seed_smem[];
  const int64_t padded = f16_seed_padded_dim(a.dim);
  const int steps = static_cast<int>(padded / kF16SeedStep);
  uint4* qfrag = reinterpret_cast<uint4*>(seed_smem);             // [steps][32]
  float* centre = reinterpret_cast<float*>(qfrag + steps * 32);  // [padded]
  using Ring = F16SeedRing<T>;
  const Ring ring{reinterpret_cast<typename Ring::Word*>(seed_smem + f16_seed_tile_bytes(a.dim) +
                                                         (threadIdx.x / 32) * Ring::kWarpBytes)};
  __shared__ int64_t q_row[kSeedQueries];
  __shared__ int64_t q_base[kSeedQueries];  // the candidate position of the list's row 0
  __shared__ float q_sq[kSeedQueries];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const float inf = __int_as_float(0x7f800000);
  const int64_t total = a.tile_off[a.nlist];
  __shared__ int64_t claimed;  // next_block_unit's
  for (int64_t u = blockIdx.x; u < total; u = next_block_unit(a, u, &claimed)) {
    const SeedUnit su = seed_unit(a, u);
    const int64_t l = su.list, r0 = su.first_row;
    const int pcount = su.queries, rcount = su.rows;
    __syncthreads();  // the previous unit is done with the shared arrays
    seed_unit_queries(a, su, q_row, q_base);
    for (int64_t j = tid; j < padded; j += kSeedThreads)
      centre[j] = (kCentred && j < a.dim) ? a.centroids[l * a.dim + j] : 0.0f;
    __syncthreads();
    // Entry (step s, lane L): A's registers for lane L, queries L / 4 and L / 4 + 8 at dimensions
    // 16 s + 4 (L % 4) .. + 3, centred (L2) and rounded to f16 (dim % 4 == 0: a lane's four are
    // all in the row or all past it).
    for (int e = tid; e < steps * 32; e += kSeedThreads) {
      const int64_t d = int64_t{e / 32} * kF16SeedStep + 4 * (e % 4);
      const auto query = [&](int r) {
        const int64_t q = q_row[r];
        if (q < 0 || d >= a.dim) return make_float4(0.f, 0.f, 0.f, 0.f);
        const float4 v = *reinterpret_cast<const float4*>(a.queries + q * a.dim + d);
        const float4 c = *reinterpret_cast<const float4*>(centre + d);
        return make_float4(v.x - c.x, v.y - c.y, v.z - c.z, v.w - c.w);
      };
      const int r = (e % 32) / 4;
      const float4 lo = query(r), hi = query(r + 8);
      qfrag[e] = make_uint4(pack_f16(lo.x, lo.y), pack_f16(hi.x, hi.y), pack_f16(lo.z, lo.w), pack_f16(hi.z, hi.w));
    }
    // The queries' squared norms (centred, fp32).
    seed_query_norms(q_row, a.dim, q_sq, [&](float sum, int64_t q, int64_t j) {
      const float v = a.queries[q * a.dim + j] - centre[j];
      return fmaf(v, v, sum);
    });
    __syncthreads();
    SeedKept best[2];  // query rows g and g + 8
    best[0].clear();
    best[1].clear();
    const float qsq[2] = {q_sq[g], q_sq[g + 8]};
    const F16MarginAt margin[2] = {F16MarginAt(mg, sqrtf(qsq[0])), F16MarginAt(mg, sqrtf(qsq[1]))};
    const int64_t qbase[2] = {g < pcount ? q_base[g] : 0, g + 8 < pcount ? q_base[g + 8] : 0};
    float xmax = 0.0f;  // the largest squared norm of the rows this lane judged
    const T* rows = a.vectors + (a.list_start[l] + r0) * a.dim;
    // This warp's (16-row group, chunk of kF16SeedChunkSteps k steps) steps, in order, through
    // its ring (seed_ring_steps).
    const int per_group = steps / kF16SeedChunkSteps;
    const int nsteps = seed_warp_groups(su, warp) * per_group;
    const int judged_rows = pcount > 8 ? 2 : 1;  // query rows g + 8 exist only past 8 queries
    float acc[2][4], xsq[2];
    const auto issue = [&](SeedStep at, int st) {
      ring.issue(rows, a.dim, rcount, warp + at.group * kSeedWarps, at.chunk * kF16SeedChunkSteps, st);
    };
    const auto multiply = [&](SeedStep at, int st) {
      const int gi = warp + at.group * kSeedWarps, s0 = at.chunk * kF16SeedChunkSteps;
      if (s0 == 0) seed_clear_group(acc, xsq);
#pragma unroll
      for (int c = 0; c < kF16SeedChunkSteps; ++c) {
        const int s = s0 + c;
        const typename Ring::Word wa = ring.at(st, c, 0), wb = ring.at(st, c, 1);  // the rows' four elements
        const auto decode = [](const typename Ring::Word& w) {
          return DeviceElement<T>::load4(reinterpret_cast<const T*>(&w));
        };
        float4 va = decode(wa), vb = decode(wb);
        if constexpr (kCentred) {
          const float4 m = *reinterpret_cast<const float4*>(centre + s * kF16SeedStep + 4 * t);
          va = make_float4(va.x - m.x, va.y - m.y, va.z - m.z, va.w - m.w);
          vb = make_float4(vb.x - m.x, vb.y - m.y, vb.z - m.z, vb.w - m.w);
        }
        add_squares(xsq[0], va);
        add_squares(xsq[1], vb);
        const uint4 f = qfrag[s * 32 + lane];
        const uint32_t af[4] = {f.x, f.y, f.z, f.w};
        if constexpr (NATIVE) {  // the f16 words as they are: the same bits pack_f16 would give
          const uint32_t* const ba = reinterpret_cast<const uint32_t*>(&wa);
          const uint32_t* const bb = reinterpret_cast<const uint32_t*>(&wb);
          F16Mma::mma(acc[0], af, ba[0], ba[1]);
          F16Mma::mma(acc[1], af, bb[0], bb[1]);
        } else {
          F16Mma::mma(acc[0], af, pack_f16(va.x, va.y), pack_f16(va.z, va.w));
          F16Mma::mma(acc[1], af, pack_f16(vb.x, vb.y), pack_f16(vb.z, vb.w));
        }
      }
      if (s0 + kF16SeedChunkSteps < steps) return;  // the group's products go on
      seed_for_judged_columns(a, su, gi, xsq, [&](int n, int c, int row, float xs) {
        xmax = fmaxf(xmax, xs);
        const float xn = sqrt_at_least(xs);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if (i >= judged_rows) break;
          const float dot = acc[n][2 * i + c];
          const float base = IP ? -dot : fmaf(-2.0f, dot, qsq[i] + xs);
          const float cost = __fsub_rd(base, margin[i].of(xn));
          // A cost that is not finite (an operand past the f16 range) judges nothing: the
          // query is flagged.
          if (fabsf(cost) < inf)
            best[i].offer(cost, static_cast<int32_t>(qbase[i] + r0 + row));
          else
            best[i].dropped = -inf;
        }
      });
    };
    seed_ring_steps<Ring::kStages>(nsteps, per_group, issue, multiply);
    // The kept values and the best dropped cost join the query's (seed_keep_values), and the
    // largest squared norms of the query and of the rows join theirs.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = g + 8 * i;
      const int64_t q = r < pcount ? q_row[r] : -1;
      float norm = xmax;
      for (int o = 1; o < 4; o *= 2) norm = fmaxf(norm, __shfl_xor_sync(kFullMask, norm, o));
      seed_keep_values(sv, best[i], q);
      if (q >= 0 && t == 0) {  // L2: each probe's centroid moves the query by another length
        atomic_max_nonneg(sv.xmax + q, norm);
        atomic_max_nonneg(sv.qsq + q, qsq[i]);
      }
    }
  }
}

// A warp per query (the file's comment says why the result is the exact top-k of the seed's
// probes): the entries, their count (found and seeded), and the bound; or the query flagged.
// The rows to re-score are gathered in shared memory first and taken 32 at a time, a lane each:
// one latency-bound exact sum per lane instead of one for every batch of kept values that holds
// a few.
template <class T, bool IP>
__global__ void __launch_bounds__(kThreads) seed_rescore_kernel(TileArgs<T> a, int64_t nq, const int32_t* probes,
                                                                MarginTerms mg, SeedValues sv, PruneState pr,
                                                                bool best_first) {
  __shared__ int32_t waiting[kThreads / 32][64];
  const int lane = threadIdx.x % 32;
  int32_t* mine = waiting[threadIdx.x / 32];
  const float inf = __int_as_float(0x7f800000);
  for (int64_t q = global_warp(); q < nq; q += warp_stride()) {
    const float* cost = sv.cost + q * sv.stride;
    const int32_t* pos = sv.pos + q * sv.stride;
    // The k-th best kept optimistic cost (+inf with fewer than k rows) plus m2, where m2 bounds
    // every row's two margins, bounds the exact k-th: B. A kept row whose optimistic cost is past
    // B cannot be among the k best.
    const int n = seed_kept_count(sv, q);
    const WarpBest kept = seed_kept_best(sv, q, n, pr.k, [](int i) { return i; });
    const float b = seed_top(kept.mine, pr.k).kth;
    const float m2 = __fmul_ru(2.0f, candidate_margin(mg, sqrtf(sv.qsq[q]), sqrtf(sv.xmax[q])));
    const float limit = b < inf ? __fadd_ru(b, m2) : inf;
    const float* query = a.queries + q * a.dim;
    WarpBest exact;
    // Lane i re-scores the i-th waiting row (i < count) and offers it.
    const auto rescore = [&](int count) {
      unsigned long long key = ~0ull;
      if (lane < count) {
        const int32_t at = mine[lane];
        int64_t probe = 0, row = 0;
        a.cand.locate(q, at, probe, row);
        const T* x = a.vectors + (a.list_start[probes[q * a.nprobe + probe]] + row) * a.dim;
        const float d = exact_row_distance_ahead<T, IP>(query, x, a.dim);
        key = static_cast<unsigned long long>(cost_key(d, IP)) << 32 | static_cast<uint32_t>(at);
      }
      exact.offer(key, pr.k);
    };
    // The exact k-th so far (+inf with fewer than k): a kept row whose optimistic cost is past it
    // cannot be among the k best either, and it falls below B as soon as k rows are re-scored.
    const auto exact_kth = [&] {
      return exact.kth == ~0ull ? inf : from_ordered(static_cast<uint32_t>(exact.kth >> 32));
    };
    // The kept rows whose optimistic cost c has lo < c <= hi() wait in `mine` and are re-scored
    // 32 at a time, the rest at the end. hi() is warp-uniform.
    const auto rescore_kept = [&](float lo, auto&& hi) {
      int held = 0;  // rows waiting in `mine` (at most 31 between batches)
      for (int i0 = 0; i0 < n; i0 += 32) {
        const int i = i0 + lane;
        const float c = i < n ? cost[i] : inf;
        const bool take = c < inf && c > lo && c <= hi();
        const unsigned ballot = __ballot_sync(kFullMask, take);
        if (take) mine[held + __popc(ballot & ((1u << lane) - 1))] = pos[i];
        held += __popc(ballot);
        __syncwarp();
        if (held < 32) continue;
        rescore(32);
        const int rest = held - 32;
        __syncwarp();
        const int32_t moved = lane < rest ? mine[32 + lane] : 0;
        __syncwarp();
        if (lane < rest) mine[lane] = moved;
        held = rest;
        __syncwarp();
      }
      if (held > 0) rescore(held);
      __syncwarp();  // `mine` read before it is written again
    };
    // First the rows up to b (the k best optimistic costs, more at ties), then those past it up to
    // B and the exact k-th. Each row's exact cost lies between its optimistic cost and that plus
    // its two margins, and most are near the middle, so the exact k-th of the first k lands about
    // one margin past b, about half-way to B (at 1M x 960 fp32, k 10, ~21 rows a query up to B).
    if (best_first) {
      rescore_kept(-inf, [&] { return b; });
      if (b < inf) rescore_kept(b, [&] { return fminf(limit, exact_kth()); });
    } else {
      rescore_kept(-inf, [&] { return limit; });
    }
    seed_finish_entries(sv, pr, q, exact.mine);
  }
}

// The exact cost of a row for seed_flagged_kernel: the SIMT scan's arithmetic (IP: the
// similarity negated), four-element loads (the f16 seed's rows always take them).
template <class T, bool IP>
struct FloatRowCost {
  __device__ void stage(const TileArgs<T>&, int64_t) {}
  __device__ float of(const TileArgs<T>& a, int64_t q, int64_t slot) const {
    const float d = exact_row_distance_ahead<T, IP>(a.queries + q * a.dim, a.vectors + slot * a.dim, a.dim);
    return IP ? -d : d;
  }
};

// The seed kernel's build: native (f16 rows, f16 queries) or not.
template <class T, bool IP>
auto f16_seed_kernel_for(bool native) {
  if constexpr (std::is_same_v<T, Half>)
    if (native) return seed_f16_kernel<T, IP, true>;
  if (native) fail(Errc::Internal, "the native seed takes f16 rows only");
  return seed_f16_kernel<T, IP>;
}

template <class T, bool IP>
void launch_f16_seed_metric(const DeviceContext& ctx, cudaStream_t stream, const TileArgs<T>& args, int64_t nq,
                            const int32_t* probes, int64_t seed, const SeedValues& values, const PruneState& prune,
                            bool best_first, bool native) {
  const MarginTerms mg =
      native ? margin_terms_exact_operands(!IP, args.dim, true) : margin_terms_f16(!IP, args.dim, !IP);
  const std::size_t dynamic = f16_seed_smem_bytes<T>(args.dim);
  const auto kernel = f16_seed_kernel_for<T, IP>(native);
  if (dynamic > kDefaultDynamicSmem) ctx.opt_in_shared_memory(reinterpret_cast<const void*>(kernel), dynamic);
  kernel<<<resident_grid(ctx, reinterpret_cast<const void*>(kernel), kSeedThreads, dynamic), kSeedThreads, dynamic,
           stream>>>(args, mg, values);
  IVF_CUDA_CHECK_LAUNCH();
  seed_rescore_kernel<T, IP>
      <<<grid_for(nq * 32, kThreads), kThreads, 0, stream>>>(args, nq, probes, mg, values, prune, best_first);
  IVF_CUDA_CHECK_LAUNCH();
  launch_seed_flagged<T, FloatRowCost<T, IP>>(ctx, stream, args, nq, probes, seed, values, prune);
}

template <class T>
void launch_f16_seed(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args, int64_t nq,
                     const int32_t* probes, int64_t seed, const SeedValues& values, const PruneState& prune,
                     bool best_first, bool native) {
  if (ip)
    launch_f16_seed_metric<T, true>(ctx, stream, args, nq, probes, seed, values, prune, best_first, native);
  else
    launch_f16_seed_metric<T, false>(ctx, stream, args, nq, probes, seed, values, prune, best_first, native);
}

}  // namespace ivfgpu::cuda::scan_detail
