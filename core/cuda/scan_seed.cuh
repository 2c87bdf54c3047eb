// The int8 seed of the pruned pass (scan_tensor.hpp, launch_int8_seed): integer queries on
// uint8 / int8 rows, k <= kSeedMaxK; included only by scan_tiles_u8.cu and scan_tiles_i8.cu.
// docs/tensor-scan.md, "The integer pass", gives the argument; in short:
//
// The pruned pass starts from each query's exact k best rows of its first probes: its first
// entries, and their k-th cost its first bound. The int8 pass with its bounds empty found them
// in 0.68 ms of a ~2 ms batch (1M x 128 uint8, nprobe 16, k 10, H100): a 64-query tile costs its
// rows, and first probes average ~10 queries a list. Here a block of four warps takes a
// 16-query tile (m16n8k32 IMMA: queries as A, rows as B) and kSeedUnitRows rows of a list. A
// warp reads its rows straight from global memory into B fragments, with no shared memory and
// no barrier: the k order within an mma step of 32 dimensions is free (a dot product does not
// depend on it), so lane (g, t) takes the eight bytes 8t .. 8t + 7 of row g (one load) as the k
// indices 4t .. 4t + 3 and 4t + 16 .. 4t + 19 that its two B registers hold, and the query
// fragments (staged once a unit in shared memory, from the bytes and squared norms the search
// packed once: TileArgs::query_bytes) use the same assignment. The costs are exact
// integers (|q|^2 + |x|^2 - 2 q.x, or -q.x), rounded once to float as the SIMT scan rounds them.
//
// Each lane keeps the kSeedKeep best (cost, candidate position) it sees for each of its two
// query rows, and the best cost it dropped. seed_entries_kernel then takes each query's k best
// of all kept by (cost, position), the SIMT seed's order: they are its exact k best, unless a
// lane dropped a row no worse than the k-th (a lane saw more than kSeedKeep of them); such a
// query is flagged and seed_flagged_kernel scans its seed probes exactly (in chunks over the device).
#pragma once

#include <cstddef>
#include <cstdint>

#include "launch.cuh"
#include "scan_imma.cuh"
#include "scan_mma.cuh"
#include "scan_seed_common.cuh"
#include "scan_tensor.hpp"
#include "scan_tiles.cuh"
#include "warp_sort.cuh"

namespace ivfgpu::cuda::scan_detail {

constexpr int kSeedStep = 32;       // dimensions (bytes) a k step
constexpr int kSeedChunkSteps = 4;  // k steps a lane loads together (a step of its loop)

// The query fragments of a unit: a k step is 32 lanes x 16 bytes, over dim rounded up to a chunk.
__host__ __device__ inline int64_t seed_steps(int64_t dim) {
  const int64_t chunk = int64_t{kSeedStep} * kSeedChunkSteps;
  return (dim + chunk - 1) / chunk * kSeedChunkSteps;
}

template <class T, bool IP>
__global__ void __launch_bounds__(kSeedThreads) seed_int8_kernel(TileArgs<T> a, SeedValues sv) {
  extern __shared__ uint4 qfrag[];  // [steps][32]: A's four registers for each lane
  __shared__ int64_t q_row[kSeedQueries];
  __shared__ int64_t q_base[kSeedQueries];  // the candidate position of the list's row 0
  __shared__ int q_sq[kSeedQueries];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4;
  const int steps = static_cast<int>(seed_steps(a.dim));
  const int64_t total = a.tile_off[a.nlist];
  __shared__ int64_t claimed;  // next_block_unit's
  for (int64_t u = blockIdx.x; u < total; u = next_block_unit(a, u, &claimed)) {
    const SeedUnit su = seed_unit(a, u);
    const int64_t l = su.list, r0 = su.first_row;
    const int pcount = su.queries, rcount = su.rows;
    __syncthreads();  // the previous unit is done with the shared arrays
    seed_unit_queries(a, su, q_row, q_base);
    __syncthreads();
    // Entry (step s, lane L): queries L / 4 and L / 4 + 8, bytes 32 s + 8 (L % 4) .. + 7 (dim is a
    // multiple of 16, so a lane's eight are all in the row or all past it).
    for (int e = tid; e < steps * 32; e += kSeedThreads) {
      const int64_t d = int64_t{e / 32} * kSeedStep + 8 * (e % 4);
      const auto bytes = [&](int r, int64_t at) -> uint32_t {
        const int64_t q = q_row[r];
        if (q < 0 || d >= a.dim) return 0u;
        return *reinterpret_cast<const uint32_t*>(a.query_bytes + q * a.dim + at);
      };
      const int r = (e % 32) / 4;
      qfrag[e] = make_uint4(bytes(r, d), bytes(r + 8, d), bytes(r, d + 4), bytes(r + 8, d + 4));
    }
    // The queries' squared norms, packed with their bytes (exact integers; none for IP).
    if (tid < kSeedQueries) q_sq[tid] = !IP && q_row[tid] >= 0 ? a.query_sq[q_row[tid]] : 0;
    __syncthreads();
    SeedKept best[2];  // query rows g and g + 8
    best[0].clear();
    best[1].clear();
    const int qsq[2] = {q_sq[g], q_sq[g + 8]};
    const int64_t qbase[2] = {g < pcount ? q_base[g] : 0, g + 8 < pcount ? q_base[g + 8] : 0};
    const T* rows = a.vectors + (a.list_start[l] + r0) * a.dim;
    // This warp's (16-row group, chunk of kSeedChunkSteps k steps) steps, in order: the loads of
    // step i + 1 are in flight while step i multiplies.
    const int per_group = steps / kSeedChunkSteps;
    const int nsteps = seed_warp_groups(su, warp) * per_group;
    const int judged_rows = pcount > 8 ? 2 : 1;  // query rows g + 8 exist only past 8 queries
    const auto load_step = [&](SeedStep at, uint2 (&va)[kSeedChunkSteps], uint2 (&vb)[kSeedChunkSteps]) {
      const int gi = warp + at.group * kSeedWarps, s0 = at.chunk * kSeedChunkSteps;
      seed_load_step<kSeedChunkSteps, kSeedStep, 8>(rows, a.dim, rcount, gi, s0, va, vb, make_uint2(0u, 0u),
                                                    [](const T* x) { return *reinterpret_cast<const uint2*>(x); });
    };
    int acc[2][4], xsq[2];
    const auto multiply = [&](SeedStep at, uint2 (&va)[kSeedChunkSteps], uint2 (&vb)[kSeedChunkSteps]) {
      const int gi = warp + at.group * kSeedWarps, s0 = at.chunk * kSeedChunkSteps;
      if (s0 == 0) seed_clear_group(acc, xsq);
#pragma unroll
      for (int c = 0; c < kSeedChunkSteps; ++c) {
        const uint4 f = qfrag[(s0 + c) * 32 + lane];
        const uint32_t af[4] = {f.x, f.y, f.z, f.w};
        ImmaOps<T>::mma(acc[0], af, va[c].x, va[c].y);
        ImmaOps<T>::mma(acc[1], af, vb[c].x, vb[c].y);
        if constexpr (!IP) {
          xsq[0] = ImmaOps<T>::dot4(va[c].y, va[c].y, ImmaOps<T>::dot4(va[c].x, va[c].x, xsq[0]));
          xsq[1] = ImmaOps<T>::dot4(vb[c].y, vb[c].y, ImmaOps<T>::dot4(vb[c].x, vb[c].x, xsq[1]));
        }
      }
      if (s0 + kSeedChunkSteps < steps) return;  // the group's products go on
      seed_for_judged_columns(a, su, gi, xsq, [&](int n, int c, int row, int xs) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if (i >= judged_rows) break;
          const int dot = acc[n][2 * i + c];
          const float cost = __int2float_rn(IP ? -dot : qsq[i] + xs - 2 * dot);
          best[i].offer(cost, static_cast<int32_t>(qbase[i] + r0 + row));
        }
      });
    };
    seed_pipelined_steps<kSeedChunkSteps, uint2>(nsteps, per_group, load_step, multiply);
    // The kept values and the best dropped cost join the query's (seed_keep_values).
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = g + 8 * i;
      seed_keep_values(sv, best[i], r < pcount ? q_row[r] : -1);
    }
  }
}

// A warp per query: the k best of the (exact cost, position) entries its lanes kept, in that
// order (a warp's running list, WarpBest: most entries lose to its k-th at one comparison),
// become its first entries (exact: seeded) and their k-th cost its bound; fewer than k (fewer
// rows) are all entries, with no bound. That is its exact top-k of the seed's probes unless a
// lane dropped a row no worse than the k-th: then the query is flagged (incomplete) for
// seed_flagged_kernel. (A template only so that each type's file has its own copy.)
template <class T>
__global__ void seed_entries_kernel(int64_t nq, SeedValues sv, PruneState pr) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; q < nq; q += warps) {
    const int32_t* pos = sv.pos + q * sv.stride;
    const WarpBest best = seed_kept_best(sv, q, seed_kept_count(sv, q), pr.k, [&](int i) { return pos[i]; });
    seed_finish_entries(sv, pr, q, best.mine);
  }
}

// The exact cost of a row for seed_flagged_kernel: its bytes against the query's (the search's
// packed bytes, copied into shared memory) by __dp4a, |x|^2 and q.x as exact integers, the same
// integer cost as the SIMT scan's, rounded once. (1M x 128 uint8, k 10: the flagged queries' kernel took 11 us with
// the settle's int64 arithmetic; this __dp4a form was not profiled.)
template <class T, bool IP>
struct Int8RowCost {
  uint32_t qwords[kImmaMaxDim / 4];
  int qsq;
  // The search's packed query (launch_pack_integer_queries): its bytes and exact squared norm.
  __device__ void stage(const TileArgs<T>& a, int64_t q) {
    const uint32_t* words = reinterpret_cast<const uint32_t*>(a.query_bytes + q * a.dim);
    for (int w = threadIdx.x; w < a.dim / 4; w += blockDim.x) qwords[w] = words[w];
    if (threadIdx.x == 0) qsq = a.query_sq[q];
  }
  __device__ float of(const TileArgs<T>& a, int64_t, int64_t slot) const {
    const uint4* x = reinterpret_cast<const uint4*>(a.vectors + slot * a.dim);
    int xx = 0, qx = 0;
    for (int w = 0; w < a.dim / 4; w += 4) {  // dim % 16 == 0
      const uint4 v = x[w / 4];
      qx = ImmaOps<T>::dot4(qwords[w], v.x, qx);
      qx = ImmaOps<T>::dot4(qwords[w + 1], v.y, qx);
      qx = ImmaOps<T>::dot4(qwords[w + 2], v.z, qx);
      qx = ImmaOps<T>::dot4(qwords[w + 3], v.w, qx);
      if (!IP) xx = squares16<T>(v, xx);
    }
    return __int2float_rn(IP ? -qx : qsq + xx - 2 * qx);
  }
};

template <class T>
void launch_int8_seed(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args, int64_t nq,
                      const int32_t* probes, int64_t seed, const SeedValues& values, const PruneState& prune) {
  require_packed_queries(args, "the int8 seed");
  const std::size_t dynamic = static_cast<std::size_t>(seed_steps(args.dim)) * 32 * sizeof(uint4);
  const auto kernel = ip ? seed_int8_kernel<T, true> : seed_int8_kernel<T, false>;
  if (dynamic > kDefaultDynamicSmem) ctx.opt_in_shared_memory(reinterpret_cast<const void*>(kernel), dynamic);
  kernel<<<resident_grid(ctx, reinterpret_cast<const void*>(kernel), kSeedThreads, dynamic), kSeedThreads, dynamic,
           stream>>>(args, values);
  IVF_CUDA_CHECK_LAUNCH();
  seed_entries_kernel<T><<<grid_for(nq * 32, kThreads), kThreads, 0, stream>>>(nq, values, prune);
  IVF_CUDA_CHECK_LAUNCH();
  if (ip)
    launch_seed_flagged<T, Int8RowCost<T, true>>(ctx, stream, args, nq, probes, seed, values, prune);
  else
    launch_seed_flagged<T, Int8RowCost<T, false>>(ctx, stream, args, nq, probes, seed, values, prune);
}

}  // namespace ivfgpu::cuda::scan_detail
