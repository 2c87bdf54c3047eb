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
// fragments (staged once a unit in shared memory) use the same assignment. The costs are exact
// integers (|q|^2 + |x|^2 - 2 q.x, or -q.x), rounded once to float as the SIMT scan rounds them.
//
// Each lane keeps the kSeedKeep best (cost, candidate position) it sees for each of its two
// query rows, and the best cost it dropped. seed_entries_kernel then takes each query's k best
// of all kept by (cost, position), the SIMT seed's order: they are its exact k best, unless a
// lane dropped a row no worse than the k-th (a lane saw more than kSeedKeep of them); such a
// query is flagged and seed_flagged_kernel scans its seed probes exactly, a block per query.
#pragma once

#include <cstddef>
#include <cstdint>

#include "scan_imma.cuh"
#include "launch.cuh"
#include "scan_mma.cuh"
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

template <class T, bool IP>
__global__ void __launch_bounds__(kSeedThreads) seed_int8_kernel(TileArgs<T> a, SeedValues sv) {
  extern __shared__ uint4 qfrag[];  // [steps][32]: A's four registers for each lane
  __shared__ int64_t q_row[kSeedQueries];
  __shared__ int64_t q_base[kSeedQueries];  // the candidate position of the list's row 0
  __shared__ int q_sq[kSeedQueries];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int steps = static_cast<int>(seed_steps(a.dim));
  const int64_t total = a.tile_off[a.nlist];
  for (int64_t u = blockIdx.x; u < total; u += gridDim.x) {
    const int64_t l = block_unit_of(a.tile_off, a.nlist, u);
    const int64_t size = a.list_size[l];
    const int64_t chunks = (size + kSeedUnitRows - 1) / kSeedUnitRows, local = u - a.tile_off[l];
    const int64_t qt = local / chunks, r0 = (local % chunks) * kSeedUnitRows;
    const int64_t prem = a.pair_count[l] - qt * kSeedQueries;
    const int pcount = static_cast<int>(prem < kSeedQueries ? prem : kSeedQueries);
    const int rcount = static_cast<int>(size - r0 < kSeedUnitRows ? size - r0 : kSeedUnitRows);
    __syncthreads();  // the previous unit is done with the shared arrays
    if (tid < kSeedQueries) {
      q_row[tid] = -1;
      if (tid < pcount) {
        const int64_t pr = a.grouped[a.pair_begin[l] + qt * kSeedQueries + tid];
        q_row[tid] = pr / a.nprobe;
        q_base[tid] = a.cand.offsets[(pr / a.nprobe) * (a.nprobe + 1) + pr % a.nprobe];
      }
    }
    __syncthreads();
    // Entry (step s, lane L): queries L / 4 and L / 4 + 8, bytes 32 s + 8 (L % 4) .. + 7 (dim is a
    // multiple of 16, so a lane's eight are all in the row or all past it).
    for (int e = tid; e < steps * 32; e += kSeedThreads) {
      const int64_t d = int64_t{e / 32} * kSeedStep + 8 * (e % 4);
      const auto bytes = [&](int r, int64_t at) -> uint32_t {
        const int64_t q = q_row[r];
        if (q < 0 || d >= a.dim) return 0u;
        return pack_bytes(*reinterpret_cast<const float4*>(a.queries + q * a.dim + at));
      };
      const int r = (e % 32) / 4;
      qfrag[e] = make_uint4(bytes(r, d), bytes(r + 8, d), bytes(r, d + 4), bytes(r + 8, d + 4));
    }
    // The queries' squared norms (exact integers), a warp per four queries.
    for (int r = warp; r < kSeedQueries; r += kSeedWarps) {
      const int64_t q = q_row[r];
      int sum = 0;
      if (q >= 0 && !IP)
        for (int64_t j = lane; j < a.dim; j += 32) {
          const int v = __float2int_rn(a.queries[q * a.dim + j]);
          sum += v * v;
        }
      for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(kFullMask, sum, o);
      if (lane == 0) q_sq[r] = sum;
    }
    __syncthreads();
    SeedKept best[2];  // query rows g and g + 8
    best[0].clear();
    best[1].clear();
    const int qsq[2] = {q_sq[g], q_sq[g + 8]};
    const int64_t qbase[2] = {g < pcount ? q_base[g] : 0, g + 8 < pcount ? q_base[g + 8] : 0};
    const T* rows = a.vectors + (a.list_start[l] + r0) * a.dim;
    // This warp's (16-row group, chunk of kSeedChunkSteps k steps) steps, in order: the loads of
    // step i + 1 are in flight while step i multiplies.
    const int groups = (rcount + 15) / 16, per_group = steps / kSeedChunkSteps;
    const int mine = groups > warp ? (groups - warp + kSeedWarps - 1) / kSeedWarps : 0;
    const int nsteps = mine * per_group;
    const auto load_step = [&](int i, uint2 (&va)[kSeedChunkSteps], uint2 (&vb)[kSeedChunkSteps]) {
      const int gi = warp + (i / per_group) * kSeedWarps, s0 = (i % per_group) * kSeedChunkSteps;
      // This lane loads row g of both n tiles (group rows g and 8 + g).
      const int ra = gi * 16 + g, rb = ra + 8;
      const T* xa = rows + static_cast<int64_t>(ra < rcount ? ra : 0) * a.dim + 8 * t;
      const T* xb = rows + static_cast<int64_t>(rb < rcount ? rb : 0) * a.dim + 8 * t;
#pragma unroll
      for (int c = 0; c < kSeedChunkSteps; ++c) {
        const int64_t d = int64_t{s0 + c} * kSeedStep;
        const bool in = d + 8 * t < a.dim;
        va[c] = in ? *reinterpret_cast<const uint2*>(xa + d) : make_uint2(0u, 0u);
        vb[c] = in ? *reinterpret_cast<const uint2*>(xb + d) : make_uint2(0u, 0u);
      }
    };
    uint2 na[kSeedChunkSteps], nb[kSeedChunkSteps];
    if (nsteps > 0) load_step(0, na, nb);
    int acc[2][4], xsq[2];
    for (int i = 0; i < nsteps; ++i) {
      uint2 va[kSeedChunkSteps], vb[kSeedChunkSteps];
#pragma unroll
      for (int c = 0; c < kSeedChunkSteps; ++c) {
        va[c] = na[c];
        vb[c] = nb[c];
      }
      if (i + 1 < nsteps) load_step(i + 1, na, nb);
      const int gi = warp + (i / per_group) * kSeedWarps, s0 = (i % per_group) * kSeedChunkSteps;
      if (s0 == 0) {
#pragma unroll
        for (int n = 0; n < 2; ++n) {
          xsq[n] = 0;
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[n][j] = 0;
        }
      }
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
      if (s0 + kSeedChunkSteps < steps) continue;  // the group's products go on
      // Row g's squared norm is split over its four lanes; the accumulators' columns are rows
      // 2t and 2t + 1 of each n tile.
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        xsq[n] += __shfl_xor_sync(kFullMask, xsq[n], 1);
        xsq[n] += __shfl_xor_sync(kFullMask, xsq[n], 2);
      }
#pragma unroll
      for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int xs = __shfl_sync(kFullMask, xsq[n], 4 * (2 * t + c));
          const int row = gi * 16 + 8 * n + 2 * t + c;
          bool keep = row < rcount;
          if (keep && a.check_rows) {
            const int64_t slot = a.list_start[l] + r0 + row;
            keep = row_allowed(a.removed, a.filter, a.filter_set, slot, [&] { return a.ids[slot]; });
          }
          if (!keep) continue;
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int dot = acc[n][2 * i + c];
            const float cost = __int2float_rn(IP ? -dot : qsq[i] + xs - 2 * dot);
            best[i].offer(cost, static_cast<int32_t>(qbase[i] + r0 + row));
          }
        }
      }
    }
    // The query's four lanes take their places with one atomic (slots past the query's share,
    // never by its size, would be lost: counted as a dropped row, they flag the query), and the
    // warp's best dropped cost joins the query's.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = g + 8 * i;
      const int64_t q = r < pcount ? q_row[r] : -1;
      float dropped = best[i].dropped;
      for (int o = 1; o < 4; o *= 2) dropped = fminf(dropped, __shfl_xor_sync(kFullMask, dropped, o));
      int base = 0;
      if (q >= 0 && t == 0) base = atomicAdd(sv.count + q, 4 * kSeedKeep);
      base = __shfl_sync(kFullMask, base, lane & ~3);
      if (q < 0) continue;
      const bool fits = base + 4 * kSeedKeep <= sv.stride;
      if (t == 0) atomicMin(sv.dropped + q, to_ordered(fits ? dropped : -__int_as_float(0x7f800000)));
      if (!fits) continue;
      const int64_t at = q * sv.stride + base + t * kSeedKeep;
#pragma unroll
      for (int j = 0; j < kSeedKeep; ++j) {
        sv.cost[at + j] = best[i].cost[j];
        sv.pos[at + j] = best[i].pos[j];
      }
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
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const float inf = __int_as_float(0x7f800000);
  for (int64_t q = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; q < nq; q += warps) {
    const float* cost = sv.cost + q * sv.stride;
    const int32_t* pos = sv.pos + q * sv.stride;
    const int n = static_cast<int>(min(static_cast<int64_t>(sv.count[q]), sv.stride));
    WarpBest best;
    for (int i0 = 0; i0 < n; i0 += 32) {
      const int i = i0 + lane;
      const float c = i < n ? cost[i] : inf;
      best.offer(c < inf ? static_cast<unsigned long long>(to_ordered(c)) << 32 | static_cast<uint32_t>(pos[i]) : ~0ull,
                 pr.k);
    }
    const int found = __popc(__ballot_sync(kFullMask, lane < pr.k && best.mine != ~0ull));
    const float e = found == pr.k ? from_ordered(static_cast<uint32_t>(best.kth >> 32)) : inf;
    const float dropped = from_ordered(sv.dropped[q]);
    const bool complete = dropped == inf || (e < inf && dropped > e);
    if (complete && lane < found) {  // k <= 32: entry i is lane i's
      pr.pos[q * pr.cap + lane] = static_cast<int32_t>(best.mine & 0xffffffffu);
      pr.opt[q * pr.cap + lane] = from_ordered(static_cast<uint32_t>(best.mine >> 32));
    }
    if (lane == 0) {
      pr.found[q] = complete ? found : 0;
      pr.seeded[q] = complete ? found : 0;
      pr.bound[q] = complete && found == pr.k ? to_ordered(e) : kNoBound;
      sv.incomplete[q] = complete ? 0 : 1;
    }
  }
}

// A block per flagged query (the rest return at once: a lane's few could not hold its k best):
// its seed probes scanned exactly, its k best by (cost, position) kept by each warp's running
// list and merged, then set as seed_entries_kernel sets them. A lane takes a row: its bytes
// against the query's (packed once into shared memory) by __dp4a, |x|^2 and q.x as exact
// integers, the same integer cost as the SIMT scan's, rounded once. Flagged queries are few (1M
// x 128 uint8, k 10: this kernel took 11 us with the settle's int64 arithmetic, the __dp4a form
// was not profiled), so a block per query needs no buffer of distances.
template <class T, bool IP>
__global__ void seed_flagged_kernel(TileArgs<T> a, int64_t nq, const int32_t* probes, int64_t seed, SeedValues sv,
                                    PruneState pr) {
  __shared__ unsigned long long scratch[kThreads];
  __shared__ uint32_t qwords[kImmaMaxDim / 4];
  __shared__ int qsq;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int words = static_cast<int>(a.dim / 4);
  for (int64_t q = blockIdx.x; q < nq; q += gridDim.x) {
    if (sv.incomplete[q] == 0) continue;  // the same for the whole block
    __syncthreads();  // the previous query is done with qwords, qsq and scratch
    if (threadIdx.x == 0) qsq = 0;
    __syncthreads();
    for (int w = threadIdx.x; w < words; w += kThreads) {
      const uint32_t v = pack_bytes(*reinterpret_cast<const float4*>(a.queries + q * a.dim + 4 * w));
      qwords[w] = v;
      if (!IP) atomicAdd(&qsq, ImmaOps<T>::dot4(v, v, 0));
    }
    __syncthreads();
    WarpBest best;
    for (int64_t p = 0; p < seed; ++p) {
      const int64_t l = probes[q * a.nprobe + p], size = a.list_size[l];
      const int64_t base = a.cand.offsets[q * (a.nprobe + 1) + p];
      for (int64_t r0 = int64_t{warp} * 32; r0 < size; r0 += kThreads) {
        const int64_t r = r0 + lane, slot = a.list_start[l] + r;
        unsigned long long key = ~0ull;
        if (r < size && (!a.check_rows || row_allowed(a.removed, a.filter, a.filter_set, slot,
                                                      [&] { return a.ids[slot]; }))) {
          const uint4* x = reinterpret_cast<const uint4*>(a.vectors + slot * a.dim);
          int xx = 0, qx = 0;
          for (int w = 0; w < words; w += 4) {  // dim % 16 == 0
            const uint4 v = x[w / 4];
            qx = ImmaOps<T>::dot4(qwords[w], v.x, qx);
            qx = ImmaOps<T>::dot4(qwords[w + 1], v.y, qx);
            qx = ImmaOps<T>::dot4(qwords[w + 2], v.z, qx);
            qx = ImmaOps<T>::dot4(qwords[w + 3], v.w, qx);
            if (!IP) xx = squares16<T>(v, xx);
          }
          const float cost = __int2float_rn(IP ? -qx : qsq + xx - 2 * qx);
          key = static_cast<unsigned long long>(to_ordered(cost)) << 32 | static_cast<uint32_t>(base + r);
        }
        best.offer(key, pr.k);
      }
    }
    // A warp list's entries past k are dropped first: they are not among its k best.
    const unsigned long long top = block_merge_sorted32(lane < pr.k ? best.mine : ~0ull, scratch);
    if (warp == 0) {
      const int found = __popc(__ballot_sync(kFullMask, lane < pr.k && top != ~0ull));
      if (lane < found) {
        pr.pos[q * pr.cap + lane] = static_cast<int32_t>(top & 0xffffffffu);
        pr.opt[q * pr.cap + lane] = from_ordered(static_cast<uint32_t>(top >> 32));
      }
      const unsigned long long kth = __shfl_sync(kFullMask, top, (pr.k - 1) & 31);
      if (lane == 0) {
        pr.found[q] = found;
        pr.seeded[q] = found;
        pr.bound[q] = found == pr.k ? static_cast<uint32_t>(kth >> 32) : kNoBound;
      }
    }
  }
}

template <class T>
void launch_int8_seed(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args, int64_t nq,
                      const int32_t* probes, int64_t seed, const SeedValues& values, const PruneState& prune) {
  const std::size_t dynamic = static_cast<std::size_t>(seed_steps(args.dim)) * 32 * sizeof(uint4);
  const auto kernel = ip ? seed_int8_kernel<T, true> : seed_int8_kernel<T, false>;
  if (dynamic > kDefaultDynamicSmem) ctx.opt_in_shared_memory(reinterpret_cast<const void*>(kernel), dynamic);
  const int per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kSeedThreads, dynamic);
  const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * ctx.limits().sm_count);
  kernel<<<grid, kSeedThreads, dynamic, stream>>>(args, values);
  IVF_CUDA_CHECK_LAUNCH();
  const int64_t warps_grid = std::min<int64_t>((nq + kThreads / 32 - 1) / (kThreads / 32), kMaxGridBlocks);
  seed_entries_kernel<T><<<static_cast<unsigned>(std::max<int64_t>(1, warps_grid)), kThreads, 0, stream>>>(
      nq, values, prune);
  IVF_CUDA_CHECK_LAUNCH();
  const auto flagged = ip ? seed_flagged_kernel<T, true> : seed_flagged_kernel<T, false>;
  const int64_t resident =
      int64_t{std::max(1, ctx.blocks_per_sm(reinterpret_cast<const void*>(flagged), kThreads, 0))} *
      ctx.limits().sm_count;
  flagged<<<static_cast<unsigned>(std::max<int64_t>(1, std::min(nq, resident))), kThreads, 0, stream>>>(
      args, nq, probes, seed, values, prune);
  IVF_CUDA_CHECK_LAUNCH();
}

}  // namespace ivfgpu::cuda::scan_detail
