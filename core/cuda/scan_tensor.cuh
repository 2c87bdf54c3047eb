// The tensor-core form of stage C and the exact refinement behind it (scan_tensor.hpp); included
// only by the scan_tiles_<type>.cu files, which instantiate both for their type.
//
// First pass: each block takes one (list, 64-query tile, 64-vector tile) of the list-major
// schedule, stages both tiles in shared memory (rows decoded; the keys pass as fp32 for TF32
// mma.sync m16n8k8, the pruned pass rounded to bf16 for m16n8k16, scan_mma.cuh) and multiplies
// them on tensor cores with fp32 accumulation, while SIMT threads sum the fp32 squared norms of
// the same values. The epilogue turns each dot product into a
// distance (L2: |q|^2 + |x|^2 - 2 q.x) and widens it by a bound on its error (candidate_margin)
// toward the pessimistic side, so the candidate row holds, for every row, a key no better than
// its exact distance can be. Each list's largest row norm is kept for the refinement.
//
// Refinement: after a top-k of those pessimistic keys, U (the k-th) is a value the exact k-th
// distance cannot be worse than; a row can only be among the exact k best when its optimistic
// key (the pessimistic key moved back by twice the list's margin) reaches U. Those rows (the k
// best and whatever ties them within the bound: a handful beyond k on ordinary data) are
// re-scored with exactly the SIMT scan's arithmetic; every other row keeps its pessimistic key,
// strictly worse than U. The final top-k then takes only exact distances (at least k of them
// are no worse than U): the same ids and distances as the SIMT scan.
#pragma once

#include <cmath>
#include <type_traits>

#include "../errors.hpp"
#include "scan_mma.cuh"
#include "scan_resident.cuh"
#include "scan_staged_pair.cuh"
#include "scan_staged_tf32.cuh"
#include "scan_tensor.hpp"
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {

template <class T>
void launch_tensor_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                        float* list_norm, const PruneState* prune) {
  // Rows of two-byte elements (f16, bf16) take the 128-row steps where they can, fp32 rows the
  // tf32 ring (scan_staged_tf32.cuh); integer rows (with fp32 queries here) were not measured.
  // Only those builds are compiled.
  if constexpr (std::is_same_v<T, float>) {
    if (prune != nullptr && tf32_ring_usable(ctx, args.vec4)) {
      launch_tf32_ring_scan(ctx, stream, ip, args, *prune);  // one or two query tiles a unit
      return;
    }
  }
  // list_mma_kernel's and list_pair_tile_kernel's per-query arrays hold one query tile (the
  // passes that group tiles check theirs likewise).
  if (args.unit_queries != kMmaTile) fail(Errc::Internal, "list_mma_kernel's units were tiled for another pass");
  if constexpr (sizeof(T) == 2) {
    if (prune != nullptr && pair_tile_usable(ctx, ip, args.vec4, args.centroids != nullptr, args.dim)) {
      launch_pair_tile_scan(ctx, stream, ip, args, margin_terms(!ip, args.dim, !ip, true), *prune);
      return;
    }
  }
  const bool wg = prune != nullptr && wgmma_usable(ctx);
  const auto kernel = wg ? (ip ? list_mma_kernel<T, true, true, true> : list_mma_kernel<T, false, true, true>)
                      : prune != nullptr ? (ip ? list_mma_kernel<T, true, true> : list_mma_kernel<T, false, true>)
                                         : (ip ? list_mma_kernel<T, true, false> : list_mma_kernel<T, false, false>);
  const int per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, 0);
  const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * ctx.limits().sm_count);
  // The kernel's own condition for centring (list_mma_kernel), which its margin must know.
  const bool centred = prune != nullptr && staged_pass_centred(ip, args.centroids != nullptr, args.dim);
  // The pruned pass multiplies bf16 operands, the keys pass TF32 (list_mma_kernel).
  kernel<<<grid, kThreads, 0, stream>>>(args, margin_terms(!ip, args.dim, centred, prune != nullptr), list_norm,
                                        prune != nullptr ? *prune : PruneState{});
  IVF_CUDA_CHECK_LAUNCH();
}

// One block per query: rows whose optimistic key reaches the k-th pessimistic key are
// re-scored exactly (the SIMT scan's arithmetic: a sequential fp32 sum in dimension order, or
// integer sums for integer queries on integer rows); every other row is left as it is. The
// query's candidate row is read straight through (coalesced) with one margin for all of it,
// that of the largest row norm among its probed lists; only survivors look up their list.
template <class T, bool IP, bool INT>
__global__ void __launch_bounds__(kThreads) refine_kernel(RefineArgs<T> a) {
  __shared__ float part[kThreads / 32], part_max[kThreads / 32];
  __shared__ float bound;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const MarginTerms mg = margin_terms(!IP, a.dim);
  for (int64_t q = blockIdx.x; q < a.nq; q += gridDim.x) {
    const float* query = a.queries + q * a.dim;
    float s = 0.0f, xmax = 0.0f;
    for (int64_t j = tid; j < a.dim; j += kThreads) s = fmaf(query[j], query[j], s);
    for (int64_t p = tid; p < a.nprobe; p += kThreads) xmax = fmaxf(xmax, a.list_norm[a.probes[q * a.nprobe + p]]);
    for (int o = 16; o > 0; o /= 2) {
      s += __shfl_xor_sync(0xffffffffu, s, o);
      xmax = fmaxf(xmax, __shfl_xor_sync(0xffffffffu, xmax, o));
    }
    __syncthreads();  // the previous query is done with the shared values
    if (lane == 0) {
      part[warp] = s;
      part_max[warp] = xmax;
    }
    if (tid == 0) {
      // Fewer candidates than k: every one is returned, so every one is re-scored.
      bound = a.sel_count[q] < a.k ? a.excluded : a.sel_key[q * a.k + a.k - 1];
    }
    __syncthreads();
    float qq = 0.0f, xn = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) {
      qq += part[w];
      xn = fmaxf(xn, part_max[w]);
    }
    const float m2 = 2.0f * candidate_margin(mg, sqrtf(qq), xn);
    const float u = bound;
    float* keys = a.cand.dist + q * a.cand.stride;
    const int64_t len = a.cand.lengths[q];
    for (int64_t pos = tid; pos < len; pos += kThreads) {
      const float key = keys[pos];
      if (key == a.excluded) continue;
      const bool may_enter = u == a.excluded || (IP ? key + m2 >= u : key - m2 <= u);
      // A row that cannot enter keeps its pessimistic key: it is worse than u, and the k rows
      // whose pessimistic keys reach u are re-scored to exact values no worse than u, so the
      // final top-k never takes it (and not writing ~every key back saves a pass of writes).
      if (!may_enter) continue;
      int64_t probe, row;
      a.cand.locate(q, pos, probe, row);
      const int64_t l = a.probes[q * a.nprobe + probe];
      keys[pos] = exact_row_distance<T, IP, INT>(query, a.vectors + (a.list_start[l] + row) * a.dim, a.dim,
                                                 exact_vec4(a.vectors, a.queries, a.dim));
    }
  }
}

template <class T>
void launch_refine(const DeviceContext& ctx, cudaStream_t stream, bool ip, bool integer, const RefineArgs<T>& args) {
  auto pick = [&](auto kernel) {
    const int per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, 0);
    const int64_t grid = std::min<int64_t>(args.nq, static_cast<int64_t>(std::max(1, per_sm)) * ctx.limits().sm_count);
    kernel<<<static_cast<unsigned>(std::max<int64_t>(1, grid)), kThreads, 0, stream>>>(args);
  };
  if constexpr (DeviceElement<T>::kInteger) {
    if (integer) {
      ip ? pick(refine_kernel<T, true, true>) : pick(refine_kernel<T, false, true>);
      IVF_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  ip ? pick(refine_kernel<T, true, false>) : pick(refine_kernel<T, false, false>);
  IVF_CUDA_CHECK_LAUNCH();
}

}  // namespace ivfgpu::cuda::scan_detail
