// The staged bf16 pruned pass in steps of 128 rows (list_pair_tile_kernel) for rows of two-byte
// elements (f16, bf16): the shapes that list_mma_kernel's pruned build serves (scan_mma.cuh: past
// the resident tile's 512 dimensions), where the rows load four elements at a time, the device
// has wgmma, and the pass is centred (L2 with the list centroids, up to kMmaMaxCentredDim
// dimensions) or needs no centring (inner product). Included only by scan_tensor.cuh, which
// chooses it. The arithmetic, margin and protocol are list_mma_kernel's: operands centred and
// rounded to bf16, fp32 accumulation, bf16_tile_epilogue, lower_counted_bounds.
//
// Why: list_mma_kernel loads, centres, rounds and stores a query slice for every 64 x 64 tile, and
// its two warpgroups each read the query slabs. Here a step stages the query slab once for two
// 64-row sub-tiles and each warpgroup multiplies all 64 query rows by its own sub-tile
// (m64n64k16), so a product costs three quarters of the staging and half the barriers and query
// operand reads. It stages a slab (32 dimensions) a barrier, not a 64-dimension slice: with whole
// slices a slice ahead in registers, beside 32 accumulators, it spilled ~120 bytes at its 128
// registers, and with two of the three parts loaded as they were staged ncu showed the kernel
// waiting on those loads (L1TEX scoreboard, 42% of its stall cycles) at no gain.
//
// H200 (bench/RESULTS.md, session 54), 1M rows, nprobe 16, against list_mma_kernel: f16 rows
// d 768 261-264K against 226-235K QPS, d 960 335K against 296K; fp32 rows d 960 307-308K against
// 319-323K, so fp32 rows do not come here (they take list_tf32_ring_kernel: scan_staged_tf32.cuh).
//
// The two sub-tiles keep their own per-row state (xhalf, the counted costs and marks, the
// PruneRows counts), each exactly a 64-row tile of list_mma_kernel; only the tile's largest row
// norm, hence the margin, is taken over both (a margin at least as large as either's: safe).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "scan_mma.cuh"
#include "scan_prune.cuh"
#include "scan_tensor.hpp"
#include "wgmma.cuh"

namespace ivfgpu::cuda::scan_detail {

constexpr int kPairRows = 2 * kMmaTile;                   // rows a step
constexpr int kPairQuerySlab = kBf16SlabBytes;            // a query slab: 32 dimensions of 64 rows
constexpr int kPairRowSlab = 2 * kBf16SlabBytes;          // a row slab: 32 dimensions of 128 rows
constexpr int kPairCostBytes = kMmaTile * kMmaTile * 4;   // a sub-tile's counted costs
// Two buffers of a query slab and a row slab (24 KiB); the sub-tiles' costs share them and more.
constexpr std::size_t kPairStageBytes = std::max<std::size_t>(2 * (kPairQuerySlab + kPairRowSlab), 2 * kPairCostBytes);
static_assert(kMmaUnitTiles % 2 == 0, "a unit's chunk is whole steps (a list's last may end half way)");

// The last 128 threads of a THREADS block mark each row of a 128-row step from position v0 of
// list l (vtotal of them) kept unless past its end, removed, or left out by the filter
// (mark_kept_rows' rule).
template <int THREADS = kThreads, class T>
__device__ __forceinline__ void mark_step_rows(const TileArgs<T>& a, int64_t l, int64_t v0, int vtotal, bool* keep) {
  const int tid = threadIdx.x;
  if (tid < THREADS - kPairRows) return;
  const int v = tid - (THREADS - kPairRows);
  const int64_t slot = a.list_start[l] + v0 + v;
  keep[v] = v < vtotal && row_allowed(a.removed, a.filter, a.filter_set, slot, [&] { return a.ids[slot]; });
}

// The end of a 128-row step, after its products and a barrier behind xmax_part (each warp's
// largest squared row norm), qn2 and xhalf: each sub-tile's copy of the query rows' thresholds,
// the epilogue of this warpgroup's sub-tile (bf16_tile_epilogue on its m64n64 accumulators), and
// each sub-tile's bound lowering (lower_counted_bounds), its counted costs at costs + s *
// kPairCostBytes; sub: this warp's sub-tile, wq: its first query row. Shared by
// list_pair_tile_kernel and list_tf32_ring_kernel (scan_staged_tf32.cuh).
//
// QT: the unit's query tiles (the ring's two-tile build: kThreads x QT threads, qh the warp's
// query tile). Tile h's sub-tile s counts into written[2 h + s] and costs + (2 h + s) *
// kPairCostBytes, and warps 8 h .. 8 h + 7 lower tile h's bounds.
template <bool IP, int QT = 1>
__device__ __forceinline__ void settle_pair_step(const float (&acc)[1][8][4], const MarginTerms& mg,
                                                 const float* xmax_part, const float* qn2, const float* xhalf,
                                                 PruneRows<kMmaTile * QT> (&rows_pr)[2],
                                                 unsigned long long (&written)[2 * QT][kMmaTile], unsigned char* costs,
                                                 const int64_t* q_row, const int64_t* out_base, uint32_t* qbound,
                                                 const PruneState& pr, int64_t v0, int pcount, int sub, int wq,
                                                 int qh = 0) {
  constexpr int kQueries = kMmaTile * QT;
  const int tid = threadIdx.x;
  const auto costs_of = [&](int s) { return reinterpret_cast<float(*)[kMmaTile]>(costs + s * kPairCostBytes); };
  if (tid < 2 * kQueries) {  // each sub-tile's copy of the query rows' thresholds
    const int s = tid / kQueries, r = tid % kQueries;
    if (r < pcount) {
      float xmax = xmax_part[0];
#pragma unroll
      for (int w = 1; w < kThreads * QT / 32; ++w) xmax = fmaxf(xmax, xmax_part[w]);
      prune_row_thresholds<IP>(mg, qn2[r], sqrtf(xmax), qbound[r], rows_pr[s], r);
    } else {
      exclude_row_thresholds(rows_pr[s], r);
    }
  }
  __syncthreads();
  const int r0 = qh * kMmaTile;
  const bool counted_here =
      wq + r0 < pcount && bf16_tile_epilogue<IP>(acc, xhalf + sub * kMmaTile, rows_pr[sub], r0, qn2, q_row, out_base,
                                                 pr, v0 + sub * kMmaTile, wq, 0, pcount - r0, costs_of(2 * qh + sub),
                                                 written[2 * qh + sub]);
  // The next step writes no marks before two barriers more; each sub-tile lowers as a tile.
  const bool counted = __syncthreads_or(counted_here);
  const int warp = tid / 32, h = QT > 1 ? warp / (kThreads / 32) : 0, h0 = h * kMmaTile;
  const int hcount = pcount - h0 < kMmaTile ? pcount - h0 : kMmaTile;
#pragma unroll
  for (int s = 0; s < 2; ++s)
    lower_counted_bounds(pr, counted, hcount, rows_pr[s].below + h0, written[2 * h + s], costs_of(2 * h + s),
                         q_row + h0, qbound + h0, warp % (kThreads / 32), kThreads / 32);
}

// Warpgroup w multiplies the 64 query rows (warp w % 4 holding rows 16 (w % 4) .. + 16) by rows
// 64 w .. + 64 of the step; threads stage row-coalesced (coalesced_load_slice) each sub-tile's
// slice and the query slice.
template <class T, bool IP>
__global__ void __launch_bounds__(kThreads, 2)
    list_pair_tile_kernel(TileArgs<T> a, MarginTerms mg, PruneState pr) {
  // 1,024-byte aligned: a wgmma descriptor's swizzle assumes slabs on 512-byte boundaries.
  extern __shared__ __align__(1024) unsigned char pair_stage[];
  __shared__ unsigned long long written[2][kMmaTile];  // per sub-tile, as list_mma_kernel's
  __shared__ PruneRows<kMmaTile> rows_pr[2];            // the same thresholds; each sub-tile's counts
  __shared__ float qn2[kMmaTile];                       // centred queries' squared norms (fp32)
  __shared__ float xhalf[kPairRows];                    // half each row's squared norm, +inf if excluded
  __shared__ bool keep[kPairRows];
  __shared__ int64_t q_row[kMmaTile], out_base[kMmaTile];
  __shared__ uint32_t qbound[kMmaTile];
  __shared__ float xmax_part[kThreads / 32];
  __shared__ __align__(16) float centre_s[IP ? 4 : kMmaMaxCentredDim];
  if (wgmma_build_missing<true>()) return;  // code without wgmma never launches this kernel

  const int tid = threadIdx.x, warp = uniform_warp_index(), lane = tid % 32;
  const int sub = warp / 4, wq = (warp % 4) * 16;
  const int dim = static_cast<int>(a.dim);
  constexpr int kSlab = 32;  // dimensions staged a barrier
  unsigned char* const qs = pair_stage;                       // buffer b at b * kPairQuerySlab
  unsigned char* const xs = pair_stage + 2 * kPairQuerySlab;  // buffer b at b * kPairRowSlab
  const uint32_t q_base = static_cast<uint32_t>(__cvta_generic_to_shared(qs));
  const uint32_t x_base = static_cast<uint32_t>(__cvta_generic_to_shared(xs));
  if ((q_base % 1024) != 0) __trap();  // the swizzle would read other bytes than the staging wrote
  // Sub-tile s's counted costs share the staging memory (settle_pair_step): written after every
  // warp's last products (a barrier between), read before the next step stages (its first barrier
  // between).
  const float* const centre = IP ? nullptr : centre_s;
  for (int i = tid; i < kMmaTile; i += kThreads) written[0][i] = written[1][i] = 0;  // cleared by each reader

  const int64_t total = a.tile_off[a.nlist];
  __shared__ int64_t claimed;  // next_block_unit's
  for (int64_t t = blockIdx.x; t < total; t = next_block_unit(a, t, &claimed)) {
    const MmaUnit<T> u = mma_unit(a, t, true);  // a list's query tiles first (scan_mma.cuh)
    const int pcount = u.pcount;
    __syncthreads();  // the previous unit is done with the per-query arrays and the centroid
    load_query_tile<kMmaTile>(a, u.list, u.qt, pcount, 0, q_row, out_base);
    // Through L2, where other blocks lower the bounds; a bound read early is only higher: safe.
    if (tid < pcount) qbound[tid] = __ldcg(pr.bound + q_row[tid]);
    if constexpr (!IP)  // zero past dim up to whole slabs: coalesced_centre_slab reads a slab's every column
      for (int j = tid; j < (dim + kSlab - 1) / kSlab * kSlab; j += kThreads)
        centre_s[j] = j < dim ? a.centroids[u.list * a.dim + j] : 0.0f;
    __syncthreads();  // q_row, the centroid
    // The thread's two query rows (a copy of the unit's first past pcount: never read).
    const float* my_q[kCoalescedRows];
#pragma unroll
    for (int h = 0; h < kCoalescedRows; ++h) {
      const int64_t q = q_row[coalesced_row(h)];
      my_q[h] = a.queries + (q >= 0 ? q : q_row[0]) * a.dim;
    }
    // The next slab in registers, loaded a slab ahead: the queries' and each sub-tile's (a
    // sub-tile past the list's end stages copies of the step's first row). A slab at a time, the
    // three take 24 registers beside the 32 accumulators; whole slices (48) spilled at 128.
    float4 qv[kCoalescedRows], xv[2][kCoalescedRows];
    const auto load = [&](int d0, int64_t v0, int vtotal) {
      coalesced_load_slab<float>(qv, [&](int h) { return my_q[h]; }, d0, dim);
      const T* first = u.rows + v0 * a.dim;
      coalesced_load_tile_slab(xv[0], first, vtotal < kMmaTile ? vtotal : kMmaTile, a.dim, d0);
      coalesced_load_tile_slab(xv[1], vtotal > kMmaTile ? first + kMmaTile * a.dim : first, vtotal - kMmaTile, a.dim,
                               d0);
    };
    load(0, u.vt_begin * kMmaTile, u.rows_at(u.vt_begin * kMmaTile, kPairRows));
    for (int64_t vt = u.vt_begin; vt < u.vt_end; vt += 2) {  // chunks hold an even number of tiles
      const int64_t v0 = vt * kMmaTile;
      const int vtotal = u.rows_at(v0, kPairRows);
      const bool first_step = vt == u.vt_begin;
      __syncthreads();  // the previous step is done with the buffers, keep and xhalf
      mark_step_rows(a, u.list, v0, vtotal, keep);
      float acc[1][8][4];
      zero_accumulators(acc);
      float qsums[kCoalescedRows] = {}, xsums[2][kCoalescedRows] = {};
      // Slab d0 from the registers into buffers b.
      const auto stage = [&](int d0, int b) {
        if constexpr (!IP) {
          coalesced_centre_slab(qv, centre, d0);
          coalesced_centre_slab(xv[0], centre, d0);
          coalesced_centre_slab(xv[1], centre, d0);
        }
        coalesced_store_slab_bf16(qs + b * kPairQuerySlab, qv, qsums, first_step);
#pragma unroll
        for (int s = 0; s < 2; ++s)
          coalesced_store_slab_bf16(xs + b * kPairRowSlab + s * kBf16SlabBytes, xv[s], xsums[s], true);
        wgmma_stores_visible();  // before the barrier that lets the tensor cores read them
      };
      // The registers' next slab: slab d0 of this step, or past its end the next step's first,
      // which then travels over the epilogue.
      const auto prefetch = [&](int d0) {
        if (d0 < dim)
          load(d0, v0, vtotal);
        else if (vt + 2 < u.vt_end)
          load(0, v0 + kPairRows, u.rows_at(v0 + kPairRows, kPairRows));
      };
      stage(0, 0);
      prefetch(kSlab);
      __syncthreads();
      for (int d0 = 0, b = 0; d0 < dim; d0 += kSlab, b ^= 1) {
        const bool more = d0 + kSlab < dim;
        // This slab's products (two k steps), while the next one stages.
        wgmma_fence();
#pragma unroll
        for (int s = 0; s < 2; ++s)
          wgmma_m64n64k16_bf16(acc, wgmma_slab_desc(q_base + b * kPairQuerySlab + 32 * s),
                               wgmma_slab_desc(x_base + b * kPairRowSlab + sub * kBf16SlabBytes + 32 * s));
        wgmma_commit();
        // The other buffers were last read by the previous slab's products, before the barrier.
        if (more) {
          stage(d0 + kSlab, b ^ 1);
          prefetch(d0 + 2 * kSlab);
        }
        wgmma_wait_all();
        if (more) __syncthreads();  // the staged slab is visible; this one's buffers are free
      }
      // Squared norms: the eight lanes of a row hold its parts (coalesced_store_bf16). Rows past
      // the list's end copy the step's first row: they cannot raise the largest.
      if (first_step) coalesced_row_sums(qsums);
      coalesced_row_sums(xsums[0]);
      coalesced_row_sums(xsums[1]);
      float xsq = fmaxf(fmaxf(xsums[0][0], xsums[0][1]), fmaxf(xsums[1][0], xsums[1][1]));
      if (lane % 8 == 0)
#pragma unroll
        for (int h = 0; h < kCoalescedRows; ++h) {
          const int r = coalesced_row(h);
          if (first_step) qn2[r] = qsums[h];  // the same queries on the unit's later steps
#pragma unroll
          for (int s = 0; s < 2; ++s)
            xhalf[s * kMmaTile + r] =
                keep[s * kMmaTile + r] ? (IP ? 0.0f : 0.5f * xsums[s][h]) : __int_as_float(0x7f800000);
        }
      for (int o = 8; o < 32; o *= 2) xsq = fmaxf(xsq, __shfl_xor_sync(kFullMask, xsq, o));
      if (lane == 0) xmax_part[warp] = xsq;
      __syncthreads();
      settle_pair_step<IP>(acc, mg, xmax_part, qn2, xhalf, rows_pr, written, pair_stage, q_row, out_base, qbound, pr,
                           v0, pcount, sub, wq);
    }
  }
}

// Launches a 128-row step kernel (this one, list_tf32_ring_kernel) persistently: the blocks of
// `smem` dynamic shared bytes that fit an SM, on every SM; each walks the units from its index.
template <class T>
void launch_step_kernel(const DeviceContext& ctx, cudaStream_t stream,
                        void (*kernel)(TileArgs<T>, MarginTerms, PruneState), std::size_t smem,
                        const TileArgs<T>& args, const MarginTerms& mg, const PruneState& prune,
                        int threads = kThreads) {
  ctx.opt_in_shared_memory(reinterpret_cast<const void*>(kernel), smem);
  const int per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem);
  const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * ctx.limits().sm_count);
  kernel<<<grid, threads, smem, stream>>>(args, mg, prune);
  IVF_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_pair_tile_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                           const MarginTerms& mg, const PruneState& prune) {
  launch_step_kernel(ctx, stream, ip ? list_pair_tile_kernel<T, true> : list_pair_tile_kernel<T, false>,
                     kPairStageBytes, args, mg, prune);
}

}  // namespace ivfgpu::cuda::scan_detail
