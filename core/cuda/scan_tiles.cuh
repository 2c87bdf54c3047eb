// The definition behind scan_tiles.hpp; included only by the scan_tiles_<type>.cu files.
#pragma once

#include <algorithm>
#include <type_traits>

#include "check.hpp"
#include "element_traits.cuh"
#include "scan_tiles.hpp"

namespace ivfgpu::cuda::scan_detail {

// The unit (list or segment) whose tile range holds t: the last u with tile_off[u] <= t, found
// by the whole block (every thread calls it with the same t). Each round probes up to
// blockDim - 1 evenly spaced offsets at once and counts those <= t (a prefix of them: the
// offsets never fall), so 1,024 lists take two rounds of one load and one barrier each where a
// binary search per thread took ten dependent loads (ncu: ~6% of the tensor pass's stalls).
__device__ __forceinline__ int64_t block_unit_of(const int64_t* tile_off, int64_t units, int64_t t) {
  const int64_t n = blockDim.x;
  int64_t lo = 0, hi = units;  // invariant: tile_off[lo] <= t < tile_off[hi]
  while (hi - lo > 1) {
    const int64_t step = (hi - lo + n - 1) / n, j = lo + (threadIdx.x + 1) * step;
    const int below = __syncthreads_count(threadIdx.x + 1 < n && j < hi && __ldg(tile_off + j) <= t);
    lo += below * step;
    hi = lo + step < hi ? lo + step : hi;
  }
  return lo;
}

// Work unit t of a SIMT scan: query tile qt of a resident list or of a segment of one (the host
// tier), against kUnitTiles x kTileV of its rows from r0. The tiling is the same for both
// kernels (tiles_per_list_kernel, scan_segment_tiles count it).
template <class T>
struct ScanUnit {
  int64_t list, row0, size;  // row0: the first row of the list or segment within its list
  const T* rows;             // row 0 of the list or segment
  const int64_t* ids;
  int64_t qt, r0;
};
template <class T>
// Every thread of the block calls it with the same t.
__device__ __forceinline__ ScanUnit<T> scan_unit(const TileArgs<T>& a, int64_t units, int64_t t) {
  const int64_t lo = block_unit_of(a.tile_off, units, t);
  ScanUnit<T> u;
  if (a.segments != nullptr) {
    const ScanSegment& sg = a.segments[lo];
    u = ScanUnit<T>{sg.list, sg.row0, sg.count, static_cast<const T*>(sg.rows), sg.ids, 0, 0};
  } else {
    u = ScanUnit<T>{lo, 0, a.list_size[lo], a.vectors + a.list_start[lo] * a.dim, a.ids + a.list_start[lo], 0, 0};
  }
  constexpr int64_t kUnitRows = int64_t{kTileV} * kUnitTiles;
  const int64_t per_tile = (u.size + kUnitRows - 1) / kUnitRows, local = t - a.tile_off[lo];
  u.qt = local / per_tile;
  u.r0 = (local % per_tile) * kUnitRows;
  return u;
}

// Threads < TQ: query q_row[i] of query tile qt of list l (-1 past its pcount queries), and
// out_base[i], where that query's distance to row row0 of the list goes.
template <int TQ, class T>
__device__ __forceinline__ void load_query_tile(const TileArgs<T>& a, int64_t l, int64_t qt, int pcount, int64_t row0,
                                                int64_t* q_row, int64_t* out_base) {
  const int tid = threadIdx.x;
  if (tid >= TQ) return;
  if (tid < pcount) {
    const int64_t pr = a.grouped[a.pair_begin[l] + qt * TQ + tid];
    const int64_t q = pr / a.nprobe, p = pr % a.nprobe;
    q_row[tid] = q;
    out_base[tid] = a.cand.slot(q, p, row0);
  } else {
    q_row[tid] = -1;
  }
}

// The storage slot of row `row` of list l, for the removed bits: read only where there are
// some. Segments (the host tier) have none, and their list_start is the host store's: a load
// of it faulted once the compiler no longer sank it under the removed test.
template <class T>
__device__ __forceinline__ int64_t removed_slot(const TileArgs<T>& a, int64_t l, int64_t row) {
  return a.removed != nullptr ? a.list_start[l] + row : 0;
}

// Integer rows against integer queries (INT) are summed in fp32 within each staged block of
// kTileD dimensions: every term and partial sum is an integer below 2^24 there, so exact, and
// the fp32 pipe issues twice the integer multiply-add's rate. The blocks' sums add up in int64.
static_assert(kTileD * 255 * 255 < (1 << 24), "a block's integer sum is exact in fp32");

// Stages rows [0, rows) x dims [d0, d0 + kTileD) of a row-major matrix into t[j][r]
// (transposed), zero outside. row_ptr(r) gives the row's start or nullptr for a missing row.
template <int ROWS, int PITCH, class T, class RowPtr>
__device__ __forceinline__ void stage_tile(float (*t)[PITCH], RowPtr row_ptr, int64_t d0, int64_t dim, bool vec4) {
  using E = DeviceElement<T>;
  const int tid = threadIdx.x;
  if (vec4) {
    for (int e = tid; e < ROWS * (kTileD / 4); e += kThreads) {
      const int r = e / (kTileD / 4), j = (e % (kTileD / 4)) * 4;
      const T* p = row_ptr(r);
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (p != nullptr && d0 + j < dim) v = E::load4(p + d0 + j);
      t[j][r] = v.x;
      t[j + 1][r] = v.y;
      t[j + 2][r] = v.z;
      t[j + 3][r] = v.w;
    }
  } else {
    for (int e = tid; e < ROWS * kTileD; e += kThreads) {
      const int r = e / kTileD, j = e % kTileD;
      const T* p = row_ptr(r);
      t[j][r] = (p != nullptr && d0 + j < dim) ? E::load1(p + d0 + j) : 0.0f;
    }
  }
}

// 64-query tiles: one (list, query tile, vector tile) per iteration of a persistent grid.
// Thread (ty, tx) owns queries ty*RQ.. and vectors tx*4..: a 64 x 64 register tile, fp32,
// accumulated in dimension order so each distance is the plain sequential sum. INT (integer
// rows and integer-valued queries): exact fp32 sums per staged block of kTileD dimensions
// (above), added into int64, so the distance is the exact integer rounded once to float.
template <class T, bool IP, bool INT>
__global__ void __launch_bounds__(kThreads) list_tile_kernel(TileArgs<T> a) {
  constexpr int TQ = 64, RQ = TQ / 16;
  constexpr int RV = kTileV / 16;
  constexpr int QP = TQ + 4, VP = kTileV + 4;  // padded rows, 16-byte aligned
  __shared__ __align__(16) float qs[kTileD][QP];
  __shared__ __align__(16) float xs[kTileD][VP];
  __shared__ int64_t out_base[TQ];
  __shared__ int64_t q_row[TQ];
  __shared__ bool keep[kTileV];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t units = a.segments != nullptr ? a.nseg : a.nlist;
  const int64_t total = a.tile_off[units];
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const ScanUnit<T> u = scan_unit(a, units, t);
    const int64_t l = u.list, row0 = u.row0, size = u.size, qt = u.qt;
    const T* rows = u.rows;
    const int64_t* row_ids = u.ids;
    const int64_t nvt = (size + kTileV - 1) / kTileV;
    const int64_t prem = a.pair_count[l] - qt * TQ;
    const int pcount = static_cast<int>(prem < TQ ? prem : TQ);
    __syncthreads();  // the previous unit is done with out_base / q_row
    load_query_tile<TQ>(a, l, qt, pcount, row0, q_row, out_base);
    __syncthreads();
    const int64_t vt_begin = u.r0 / kTileV;
    const int64_t vt_end = vt_begin + kUnitTiles < nvt ? vt_begin + kUnitTiles : nvt;
    for (int64_t vt = vt_begin; vt < vt_end; ++vt) {
      const int64_t v0 = vt * kTileV;
      const int vcount = static_cast<int>(size - v0 < kTileV ? size - v0 : kTileV);
      const T* x = rows + v0 * a.dim;
      if (a.check_rows) {
        __syncthreads();  // the previous tile's results are written: keep[] may change
        if (tid < kTileV) {
          keep[tid] = tid < vcount && row_allowed(a.removed, a.filter, a.filter_set, removed_slot(a, l, row0 + v0 + tid),
                                                  [&] { return row_ids[v0 + tid]; });
        }
      }
      // fp32 sums, or (INT) the exact integer sums of the finished blocks.
      using Total = std::conditional_t<INT, long long, float>;
      Total acc[RQ][RV];
#pragma unroll
      for (int r = 0; r < RQ; ++r)
#pragma unroll
        for (int c = 0; c < RV; ++c) acc[r][c] = 0;
      for (int64_t d0 = 0; d0 < a.dim; d0 += kTileD) {
        stage_tile<TQ, QP, float>(qs, [&](int r) -> const float* {
          const int64_t q = q_row[r];
          return q >= 0 ? a.queries + q * a.dim : nullptr;
        }, d0, a.dim, a.vec4);
        stage_tile<kTileV, VP, T>(xs, [&](int r) -> const T* { return r < vcount ? x + r * a.dim : nullptr; },
                                       d0, a.dim, a.vec4);
        __syncthreads();
        // A warp holds query rows 8w..8w+7: skip it when they are all past the tile's last query
        // (its results are never written).
        if ((tid / 32) * 2 * RQ < pcount) {
          float part[RQ][RV];  // INT: this block's exact sums (above)
#pragma unroll
          for (int r = 0; r < RQ; ++r)
#pragma unroll
            for (int c = 0; c < RV; ++c) part[r][c] = INT ? 0.0f : static_cast<float>(acc[r][c]);
#pragma unroll 8
          for (int j = 0; j < kTileD; ++j) {
            float qa[RQ], xb[RV];
            const float4 v = *reinterpret_cast<const float4*>(&qs[j][ty * 4]);
            qa[0] = v.x; qa[1] = v.y; qa[2] = v.z; qa[3] = v.w;
            const float4 w = *reinterpret_cast<const float4*>(&xs[j][tx * 4]);
            xb[0] = w.x; xb[1] = w.y; xb[2] = w.z; xb[3] = w.w;
#pragma unroll
            for (int r = 0; r < RQ; ++r)
#pragma unroll
              for (int c = 0; c < RV; ++c) {
                if constexpr (IP) {
                  part[r][c] = fmaf(qa[r], xb[c], part[r][c]);
                } else {
                  const float diff = qa[r] - xb[c];
                  part[r][c] = fmaf(diff, diff, part[r][c]);
                }
              }
          }
#pragma unroll
          for (int r = 0; r < RQ; ++r)
#pragma unroll
            for (int c = 0; c < RV; ++c) {
              if constexpr (INT) acc[r][c] += __float2ll_rn(part[r][c]);
              else acc[r][c] = part[r][c];
            }
        }
        __syncthreads();
      }
#pragma unroll
      for (int r = 0; r < RQ; ++r) {
        const int qi = ty * RQ + r;
        if (qi >= pcount) continue;
        const int64_t base = out_base[qi] + v0;
#pragma unroll
        for (int c = 0; c < RV; ++c) {
          const int vi = tx * 4 + c;
          const float d = INT ? __ll2float_rn(static_cast<long long>(acc[r][c])) : static_cast<float>(acc[r][c]);
          if (vi < vcount) a.cand.dist[base + vi] = (!a.check_rows || keep[vi]) ? d : a.excluded;
        }
      }
    }
  }
}

// 16-query tiles, a thread per row: the scan for batches with few queries a list. Unit t of
// the same tiling as list_tile_kernel (kUnitTiles x kTileV = kThreads rows a unit) is staged 32
// dimensions at a time, rows kept row-major (16-byte stores and loads, no bank conflicts), and
// thread r sums row r against each of the tile's queries in dimension order: the same chain of
// operations as list_tile_kernel, so the same bits. The register tile of list_tile_kernel spent
// most of a block on staging when a list had one or two of its 16 queries (7 of 8 warps only
// staged; ncu at batch 64, nprobe 16 on the H200: 292 us, L1 70% busy, DRAM 24%).
// Four blocks an SM (64 registers; ptxas spills 104 bytes): as the pruned pass's seed it waited
// on short and long scoreboards and barriers at three (ncu, H200, session 39: 8.6 cycles per
// issued instruction, 37.5% occupancy); at four 1M x 128 went +1.5-2% at nq 10,000 and +2-10%
// at batches of 100 (H200, A/B against 2dd7fc6).
template <class T, bool IP, bool INT>
__global__ void __launch_bounds__(kThreads, 4) list_rows_kernel(TileArgs<T> a) {
  constexpr int TQ = 16, kRows = kTileV * kUnitTiles, kStep = 32, XP = kStep + 4;
  static_assert(kRows == kThreads, "a thread per row of a unit");
  static_assert(kStep <= kTileD, "INT: a step's integer sum is exact in fp32");
  using E = DeviceElement<T>;
  __shared__ __align__(16) float xs[kRows][XP];
  __shared__ __align__(16) float qs[TQ][kStep];
  __shared__ int64_t out_base[TQ];
  __shared__ int64_t q_row[TQ];
  const int tid = threadIdx.x;
  const int64_t units = a.segments != nullptr ? a.nseg : a.nlist;
  const int64_t total = a.tile_off[units];
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const ScanUnit<T> u = scan_unit(a, units, t);
    const int64_t l = u.list, row0 = u.row0, size = u.size, qt = u.qt, r0 = u.r0;
    const T* rows = u.rows;
    const int64_t* row_ids = u.ids;
    const int64_t prem = a.pair_count[l] - qt * TQ;
    const int pcount = static_cast<int>(prem < TQ ? prem : TQ);
    const int rcount = static_cast<int>(size - r0 < kRows ? size - r0 : kRows);
    __syncthreads();  // the previous unit is done with out_base / q_row
    load_query_tile<TQ>(a, l, qt, pcount, row0, q_row, out_base);
    const bool mine = tid < rcount;
    const bool keep = mine && (!a.check_rows || row_allowed(a.removed, a.filter, a.filter_set,
                                                            removed_slot(a, l, row0 + r0 + tid),
                                                            [&] { return row_ids[r0 + tid]; }));
    const T* x = rows + r0 * a.dim;
    using Total = std::conditional_t<INT, long long, float>;
    Total acc[TQ];
#pragma unroll
    for (int q = 0; q < TQ; ++q) acc[q] = 0;
    __syncthreads();  // q_row is visible
    for (int64_t d0 = 0; d0 < a.dim; d0 += kStep) {
      if (a.vec4) {
        // Lane i of a warp reads dimensions 4 (i % 8) .. + 3 of row i / 8: four rows' 128-byte
        // runs a load, all issued before the stores.
        constexpr int kLoads = kRows * (kStep / 4) / kThreads;
        float4 v[kLoads];
#pragma unroll
        for (int m = 0; m < kLoads; ++m) {
          const int e = tid + m * kThreads, r = e / (kStep / 4), j = (e % (kStep / 4)) * 4;
          v[m] = make_float4(0.f, 0.f, 0.f, 0.f);
          if (r < rcount && d0 + j < a.dim) v[m] = E::load4(x + r * a.dim + d0 + j);
        }
#pragma unroll
        for (int m = 0; m < kLoads; ++m) {
          const int e = tid + m * kThreads, r = e / (kStep / 4), j = (e % (kStep / 4)) * 4;
          *reinterpret_cast<float4*>(&xs[r][j]) = v[m];
        }
      } else {
        for (int e = tid; e < kRows * kStep; e += kThreads) {
          const int r = e / kStep, j = e % kStep;
          xs[r][j] = (r < rcount && d0 + j < a.dim) ? E::load1(x + r * a.dim + d0 + j) : 0.0f;
        }
      }
      for (int e = tid; e < TQ * kStep; e += kThreads) {
        const int q = e / kStep, j = e % kStep;
        const int64_t qr = q_row[q];
        qs[q][j] = (qr >= 0 && d0 + j < a.dim) ? a.queries[qr * a.dim + d0 + j] : 0.0f;
      }
      __syncthreads();
      if (mine) {
        float part[TQ];  // INT: this block's exact sums
#pragma unroll
        for (int q = 0; q < TQ; ++q) part[q] = INT ? 0.0f : static_cast<float>(acc[q]);
#pragma unroll
        for (int j = 0; j < kStep; j += 4) {
          const float4 xv = *reinterpret_cast<const float4*>(&xs[tid][j]);
          const float xe[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
          for (int q = 0; q < TQ; ++q) {
            if (q >= pcount) break;  // uniform in the block
            const float4 qv = *reinterpret_cast<const float4*>(&qs[q][j]);
            const float qe[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              if constexpr (IP) {
                part[q] = fmaf(qe[c], xe[c], part[q]);
              } else {
                const float diff = qe[c] - xe[c];
                part[q] = fmaf(diff, diff, part[q]);
              }
            }
          }
        }
#pragma unroll
        for (int q = 0; q < TQ; ++q) {
          if constexpr (INT) acc[q] += __float2ll_rn(part[q]);
          else acc[q] = part[q];
        }
      }
      __syncthreads();  // the step's rows and queries are read
    }
    if (mine) {
#pragma unroll
      for (int q = 0; q < TQ; ++q) {
        if (q >= pcount) break;
        const float d = INT ? __ll2float_rn(static_cast<long long>(acc[q])) : static_cast<float>(acc[q]);
        a.cand.dist[out_base[q] + r0 + tid] = keep ? d : a.excluded;
      }
    }
  }
}

// A persistent grid of a SIMT kernel: as many blocks as can be resident (asked once per context).
template <class T>
void launch_persistent(const DeviceContext& ctx, cudaStream_t stream, void (*kernel)(TileArgs<T>),
                       const TileArgs<T>& args) {
  const int per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, 0);
  const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * ctx.limits().sm_count);
  kernel<<<grid, kThreads, 0, stream>>>(args);
  IVF_CUDA_CHECK_LAUNCH();
}

template <class T, bool INT>
void launch_metric(const DeviceContext& ctx, cudaStream_t stream, int tile_q, bool ip, const TileArgs<T>& args) {
  if (tile_q == 64)
    launch_persistent<T>(ctx, stream, ip ? list_tile_kernel<T, true, INT> : list_tile_kernel<T, false, INT>, args);
  else
    launch_persistent<T>(ctx, stream, ip ? list_rows_kernel<T, true, INT> : list_rows_kernel<T, false, INT>, args);
}

template <class T>
void launch_scan(const DeviceContext& ctx, cudaStream_t stream, int tile_q, bool ip, bool integer,
                 const TileArgs<T>& args) {
  if constexpr (DeviceElement<T>::kInteger) {
    if (integer) return launch_metric<T, true>(ctx, stream, tile_q, ip, args);
  }
  launch_metric<T, false>(ctx, stream, tile_q, ip, args);
}

}  // namespace ivfgpu::cuda::scan_detail
