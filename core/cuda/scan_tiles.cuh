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

// Where the units of the list at place `at` of tile_off come from: a.unit_list's entry, or list
// `at` itself.
template <class A>
__device__ __forceinline__ int64_t unit_list_at(const A& a, int64_t at) {
  return a.unit_list != nullptr ? a.unit_list[at] : at;
}
// The unit a block of a tensor kernel takes after t, the same for all its threads: the next one
// nobody has claimed (a.next_unit; the first wave is unit blockIdx.x) or, without the queue,
// t + gridDim.x. With the queue, units come largest list first (a.unit_list), so the long ones
// start early and a block that drew several long ones does not finish last alone: at 1M x 960
// fp32, nprobe 16, a 2,048-row unit of the f16 seed took ~0.65 ms of its 2.8 ms and with every
// gridDim-th unit the SMs were active 80% of the kernel (ncu, H200, session 58). Blocks that
// claim one after another also take a list's query tiles of the same rows together, so the
// rows' later reads find them in L2. claimed: a shared slot. Every thread calls it.
template <class A>
__device__ __forceinline__ int64_t next_block_unit(const A& a, int64_t t, int64_t* claimed) {
  __syncthreads();  // every thread is past the unit and past reading the previous claim
  if (threadIdx.x == 0)
    *claimed = a.next_unit != nullptr ? gridDim.x + static_cast<int64_t>(atomicAdd(a.next_unit, 1ull))
                                      : t + gridDim.x;
  __syncthreads();
  return *claimed;
}

// Work unit t of a SIMT scan: query tile qt of a resident list or of a segment of one (the host
// tier), against kUnitTiles x kTileV of its rows from r0. The tiling is the same for both
// kernels (scan.cu's UnitsOfList and scan_segment_tiles count it).
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
// out_base[i], where that query's distance to row row0 of the list goes. Tiles are `stride`
// queries apart (TQ, or the unit's a.unit_queries where TQ is only the arrays' size).
template <int TQ, class T>
__device__ __forceinline__ void load_query_tile(const TileArgs<T>& a, int64_t l, int64_t qt, int pcount, int64_t row0,
                                                int64_t* q_row, int64_t* out_base, int stride = TQ) {
  const int tid = threadIdx.x;
  if (tid >= TQ) return;
  if (tid < pcount) {
    const int64_t pr = a.grouped[a.pair_begin[l] + qt * stride + tid];
    const int64_t q = pr / a.nprobe, p = pr % a.nprobe;
    q_row[tid] = q;
    out_base[tid] = a.cand.slot(q, p, row0);
  } else {
    q_row[tid] = -1;
  }
}

// The storage slot of row `row` of list l (row_step slots apart), for the removed bits: read
// only where there are some. Segments (the host tier) have none, and their list_start is the
// host store's: a load of it faulted once the compiler no longer sank it under the removed test.
template <class T>
__device__ __forceinline__ int64_t removed_slot(const TileArgs<T>& a, int64_t l, int64_t row) {
  return a.removed != nullptr ? a.list_start[l] + row * a.row_step : 0;
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

// A step's kTileV rows x kTileD dimensions of a row tile in registers (list_tile_kernel): loaded
// during the previous step's products, stored transposed after them. Thread tid holds elements
// e = tid + m * kThreads: with four-element loads, row e / 8, dimensions 4 (e % 8) .. + 3; else
// four elements e = tid + (4 m + c) * kThreads, row e / 32, dimension e % 32 (component c). Rows
// are pitch elements apart (dim, or dim x row_step: the wide pass's strided sample).
struct RowSliceRegs {
  static constexpr int kVecs = kTileV * kTileD / 4 / kThreads;
  float4 v[kVecs];

  template <class T>
  __device__ __forceinline__ void load(const T* x, int vcount, int d0, int dim, int pitch, bool vec4) {
    using E = DeviceElement<T>;
    const int tid = threadIdx.x;
#pragma unroll
    for (int m = 0; m < kVecs; ++m) {
      if (vec4) {
        const int e = tid + m * kThreads, r = e / (kTileD / 4), j = (e % (kTileD / 4)) * 4;
        v[m] = r < vcount && d0 + j < dim ? E::load4(x + r * pitch + d0 + j) : make_float4(0.f, 0.f, 0.f, 0.f);
      } else {
        float f[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int e = tid + (4 * m + c) * kThreads, r = e / kTileD, j = e % kTileD;
          f[c] = r < vcount && d0 + j < dim ? E::load1(x + r * pitch + d0 + j) : 0.0f;
        }
        v[m] = make_float4(f[0], f[1], f[2], f[3]);
      }
    }
  }
  template <int PITCH>
  __device__ __forceinline__ void store(float (*t)[PITCH], bool vec4) const {
    const int tid = threadIdx.x;
#pragma unroll
    for (int m = 0; m < kVecs; ++m) {
      if (vec4) {
        const int e = tid + m * kThreads, r = e / (kTileD / 4), j = (e % (kTileD / 4)) * 4;
        t[j][r] = v[m].x;
        t[j + 1][r] = v[m].y;
        t[j + 2][r] = v[m].z;
        t[j + 3][r] = v[m].w;
      } else {
        const float f[4] = {v[m].x, v[m].y, v[m].z, v[m].w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int e = tid + (4 * m + c) * kThreads;
          t[e % kTileD][e / kTileD] = f[c];
        }
      }
    }
  }
};

// The query tile of list_tile_kernel, transposed ([dimension][query], kTileQP floats a
// dimension): the whole tile for the unit (a.simt_resident: staged once, read by its kUnitTiles
// row tiles) or two alternating kTileD-dimension slices staged step by step.
constexpr int kTileQ = 64;
constexpr int kTileQP = kTileQ + 4;  // padded rows, 16-byte aligned
constexpr std::size_t kDefaultDynamicSmem = 48 * 1024;  // more needs an opt-in per kernel
inline std::size_t list_tile_query_bytes(int64_t dim, bool resident) {
  const int64_t dims = resident ? (dim + kTileD - 1) / kTileD * kTileD : 2 * kTileD;
  return static_cast<std::size_t>(dims) * kTileQP * sizeof(float);
}

// 64-query tiles: one (list, query tile, kUnitTiles vector tiles) per iteration of a persistent
// grid. Thread (ty, tx) owns queries ty*RQ.. and vectors tx*4..: a 64 x 64 register tile, fp32,
// accumulated in dimension order so each distance is the plain sequential sum. INT (integer
// rows and integer-valued queries): exact fp32 sums per staged block of kTileD dimensions
// (above), added into int64, so the distance is the exact integer rounded once to float.
// Each step's rows load into registers during the previous step's products and go to one of two
// shared buffers after them: one barrier a step. Where the query tile fits (a.simt_resident,
// chosen by launch_list_tile) it is staged once a unit. ncu (H200, 1M x 128, nprobe 16, k 1000)
// had found the kernel at 70% issue with a third of its stall samples in the staging, which
// restaged the queries for every row tile and waited on every step's loads; this schedule took
// k 1000 at d 128 from 844-847K to 860-873K QPS, at d 96 from 1.26-1.28M to 1.37-1.38M, and
// left d 200 (queries staged) as it was (bench/RESULTS.md, session 40).
// Four blocks an SM for fp32 sums (64 registers; ptxas spills ~200 bytes, three blocks at 80
// registers measured 1-2% slower), two for the int64 totals of INT (128 registers, as before).
constexpr int kSimtTileBlocks = 4;
constexpr int kSimtTileIntBlocks = 2;
template <class T, bool IP, bool INT>
__global__ void __launch_bounds__(kThreads, INT ? kSimtTileIntBlocks : kSimtTileBlocks)
    list_tile_kernel(TileArgs<T> a) {
  constexpr int TQ = kTileQ, RQ = TQ / 16;
  constexpr int RV = kTileV / 16;
  constexpr int QP = kTileQP, VP = kTileV + 4;  // padded rows, 16-byte aligned
  extern __shared__ __align__(16) float list_tile_queries[];  // list_tile_query_bytes
  __shared__ __align__(16) float xs[2][kTileD][VP];
  __shared__ int64_t out_base[TQ];
  __shared__ int64_t q_row[TQ];
  __shared__ bool keep[2][kTileV];  // by row tile parity: a tile writes it before its first barrier
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const bool resident = a.simt_resident;
  // The query slice of step d0 in buffer b: the resident tile's rows from d0, or buffer b.
  const auto query_slice_at = [&](int d0, int b) { return list_tile_queries + (resident ? d0 : b * kTileD) * QP; };
  const auto query_slice = [&](int d0, int b) { return reinterpret_cast<float(*)[QP]>(query_slice_at(d0, b)); };
  const int64_t units = a.segments != nullptr ? a.nseg : a.nlist;
  const int64_t total = a.tile_off[units];
  int b = 0;  // the shared buffer of the next step
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const ScanUnit<T> u = scan_unit(a, units, t);
    const int64_t l = u.list, row0 = u.row0, size = u.size, qt = u.qt;
    const T* rows = u.rows;
    const int64_t* row_ids = u.ids;
    const int64_t nvt = (size + kTileV - 1) / kTileV;
    const int64_t prem = a.pair_count[l] - qt * TQ;
    const int pcount = static_cast<int>(prem < TQ ? prem : TQ);
    const int64_t vt_begin = u.r0 / kTileV;
    const int64_t vt_end = vt_begin + kUnitTiles < nvt ? vt_begin + kUnitTiles : nvt;
    const auto tile_rows = [&](int64_t vt) {
      return static_cast<int>(size - vt * kTileV < kTileV ? size - vt * kTileV : kTileV);
    };
    const int dim = static_cast<int>(a.dim);  // below 2^24 (kMaxDim): a tile's offsets fit an int
    const int pitch = static_cast<int>(a.dim * a.row_step);  // so does a strided tile's (tile_args)
    const T* xt = rows + vt_begin * kTileV * pitch;  // the row tile's first row
    RowSliceRegs xr;
    xr.load(xt, tile_rows(vt_begin), 0, dim, pitch, a.vec4);
    __syncthreads();  // the previous unit is done with out_base, q_row and the query tile
    load_query_tile<TQ>(a, l, qt, pcount, row0, q_row, out_base);
    __syncthreads();
    const auto q_ptr = [&](int r) -> const float* {
      const int64_t q = q_row[r];
      return q >= 0 ? a.queries + q * a.dim : nullptr;
    };
    if (resident)  // read after the first step's barrier
      for (int d0 = 0; d0 < dim; d0 += kTileD) stage_tile<TQ, QP, float>(query_slice(d0, 0), q_ptr, d0, a.dim, a.vec4);
    for (int64_t vt = vt_begin; vt < vt_end; ++vt, xt += kTileV * pitch) {
      const int64_t v0 = vt * kTileV;
      const int vcount = tile_rows(vt);
      bool* const kept = keep[vt & 1];  // last read by row tile vt - 2, before vt - 1's barriers
      if (a.check_rows && tid < kTileV) {
        kept[tid] = tid < vcount && row_allowed(a.removed, a.filter, a.filter_set, removed_slot(a, l, row0 + v0 + tid),
                                                [&] { return row_ids[(v0 + tid) * a.row_step]; });
      }
      // fp32 sums, or (INT) the exact integer sums of the finished blocks.
      using Total = std::conditional_t<INT, long long, float>;
      Total acc[RQ][RV];
#pragma unroll
      for (int r = 0; r < RQ; ++r)
#pragma unroll
        for (int c = 0; c < RV; ++c) acc[r][c] = 0;
      for (int d0 = 0; d0 < dim; d0 += kTileD, b ^= 1) {
        // Buffer b was last read two steps ago, before the previous step's barrier.
        xr.store<VP>(xs[b], a.vec4);
        if (!resident) stage_tile<TQ, QP, float>(query_slice(d0, b), q_ptr, d0, a.dim, a.vec4);
        if (d0 + kTileD < dim)
          xr.load(xt, vcount, d0 + kTileD, dim, pitch, a.vec4);
        else if (vt + 1 < vt_end)  // the next row tile's first step travels over the write-out
          xr.load(xt + kTileV * pitch, tile_rows(vt + 1), 0, dim, pitch, a.vec4);
        __syncthreads();
        // A warp holds query rows 8w..8w+7: skip it when they are all past the tile's last query
        // (its results are never written).
        if ((tid / 32) * 2 * RQ < pcount) {
          // Offsets into the shared arrays themselves, so that the loads stay shared-memory loads.
          const float* qs = query_slice_at(d0, b) + ty * 4;
          const float* xsb = &xs[b][0][tx * 4];
          float part[RQ][RV];  // INT: this block's exact sums
#pragma unroll
          for (int r = 0; r < RQ; ++r)
#pragma unroll
            for (int c = 0; c < RV; ++c) part[r][c] = INT ? 0.0f : static_cast<float>(acc[r][c]);
#pragma unroll 8
          for (int j = 0; j < kTileD; ++j) {
            float qa[RQ], xb[RV];
            const float4 v = *reinterpret_cast<const float4*>(qs + j * QP);
            qa[0] = v.x; qa[1] = v.y; qa[2] = v.z; qa[3] = v.w;
            const float4 w = *reinterpret_cast<const float4*>(xsb + j * VP);
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
          if (vi < vcount) a.cand.dist[base + vi] = (!a.check_rows || kept[vi]) ? d : a.excluded;
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
                                                            [&] { return row_ids[(r0 + tid) * a.row_step]; }));
    const int64_t pitch = a.dim * a.row_step;  // rows apart: dim, or a strided sample's
    const T* x = rows + r0 * pitch;
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
          if (r < rcount && d0 + j < a.dim) v[m] = E::load4(x + r * pitch + d0 + j);
        }
#pragma unroll
        for (int m = 0; m < kLoads; ++m) {
          const int e = tid + m * kThreads, r = e / (kStep / 4), j = (e % (kStep / 4)) * 4;
          *reinterpret_cast<float4*>(&xs[r][j]) = v[m];
        }
      } else {
        for (int e = tid; e < kRows * kStep; e += kThreads) {
          const int r = e / kStep, j = e % kStep;
          xs[r][j] = (r < rcount && d0 + j < a.dim) ? E::load1(x + r * pitch + d0 + j) : 0.0f;
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

// A persistent grid: as many blocks of `kernel` as can be resident (asked once per context).
inline unsigned resident_grid(const DeviceContext& ctx, const void* kernel, int threads, std::size_t smem) {
  return static_cast<unsigned>(std::max(1, ctx.blocks_per_sm(kernel, threads, smem)) * ctx.limits().sm_count);
}
// A persistent grid of a SIMT kernel.
template <class T>
void launch_persistent(const DeviceContext& ctx, cudaStream_t stream, void (*kernel)(TileArgs<T>),
                       const TileArgs<T>& args, std::size_t smem = 0) {
  const unsigned grid = resident_grid(ctx, reinterpret_cast<const void*>(kernel), kThreads, smem);
  kernel<<<grid, kThreads, smem, stream>>>(args);
  IVF_CUDA_CHECK_LAUNCH();
}

// list_tile_kernel keeps the unit's query tile in shared memory where that leaves as many blocks
// an SM as two staged slices do (to 128 dimensions on an H100 or H200: four blocks), so a
// resident tile never costs occupancy; past that it stages the queries step by step.
template <class T>
void launch_list_tile(const DeviceContext& ctx, cudaStream_t stream, void (*kernel)(TileArgs<T>), TileArgs<T> args) {
  const std::size_t staged = list_tile_query_bytes(args.dim, false), resident = list_tile_query_bytes(args.dim, true);
  args.simt_resident = resident <= kDefaultDynamicSmem &&
                       ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, resident) >=
                           ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, staged);
  launch_persistent<T>(ctx, stream, kernel, args, args.simt_resident ? resident : staged);
}

template <class T, bool INT>
void launch_metric(const DeviceContext& ctx, cudaStream_t stream, int tile_q, bool ip, const TileArgs<T>& args) {
  if (tile_q == 64)
    launch_list_tile<T>(ctx, stream, ip ? list_tile_kernel<T, true, INT> : list_tile_kernel<T, false, INT>, args);
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
