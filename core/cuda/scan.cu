#include "scan.hpp"

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>

#include "../element_type.hpp"
#include "../errors.hpp"
#include "check.hpp"
#include "device_buffer.hpp"
#include "element_traits.cuh"
#include "launch.cuh"

namespace ivfgpu::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kTileV = 64;  // vectors per tile
constexpr int kTileD = 32;  // dimensions staged per step
constexpr int kUnitTiles = 4;  // vector tiles per work unit (amortises the unit's set-up)

// Per query: exclusive prefix of its probed list sizes (its candidate row layout).
__global__ void candidate_offsets_kernel(const int32_t* probes, int64_t nq, int64_t nprobe, const int64_t* list_size,
                                         CandidateRows cand) {
  int64_t* cand_off = cand.offsets;
  int64_t* cand_len = cand.lengths;
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  for (int64_t q = blockIdx.x; q < nq; q += gridDim.x) {
    int64_t base = 0;
    for (int64_t p0 = 0; p0 < nprobe; p0 += kThreads) {
      const int64_t p = p0 + threadIdx.x;
      const int64_t v = p < nprobe ? list_size[probes[q * nprobe + p]] : 0;
      int64_t excl, total;
      Scan(tmp).ExclusiveSum(v, excl, total);
      if (p < nprobe) cand_off[q * (nprobe + 1) + p] = base + excl;
      base += total;
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      cand_off[q * (nprobe + 1) + nprobe] = base;
      cand_len[q] = base;
    }
  }
}

__global__ void count_pairs_kernel(const int32_t* probes, int64_t npairs, int32_t* count) {
  for (int64_t i = global_thread(); i < npairs; i += thread_stride()) atomicAdd(&count[probes[i]], 1);
}

// Pair i goes into its list's group. The order inside a group does not matter: every pair
// writes to its own place in the candidate rows.
__global__ void group_pairs_kernel(const int32_t* probes, int64_t npairs, int32_t* cursor, int32_t* grouped) {
  for (int64_t i = global_thread(); i < npairs; i += thread_stride())
    grouped[atomicAdd(&cursor[probes[i]], 1)] = static_cast<int32_t>(i);
}

__global__ void tiles_per_list_kernel(const int32_t* pair_count, const int64_t* list_size, int64_t nlist, int tile_q,
                                      int64_t* tiles) {
  for (int64_t l = global_thread(); l <= nlist; l += thread_stride()) {
    if (l == nlist) {
      tiles[l] = 0;
      continue;
    }
    const int64_t qt = (pair_count[l] + tile_q - 1) / tile_q;
    const int64_t vt = (list_size[l] + kTileV - 1) / kTileV;
    tiles[l] = qt * ((vt + kUnitTiles - 1) / kUnitTiles);
  }
}

template <class T>
struct TileArgs {
  const ScanSegment* segments;  // null: one unit per list, rows at vectors + list_start
  int64_t nseg;
  const float* queries;
  int64_t dim, nlist, nprobe;
  const T* vectors;
  const int64_t* list_start;
  const int64_t* list_size;
  const int32_t* grouped;     // pair ids grouped by list
  const int32_t* pair_begin;  // nlist: first grouped entry of each list
  const int32_t* pair_count;  // nlist
  const int64_t* tile_off;    // nlist + 1
  CandidateRows cand;
  bool vec4;  // dim % 4 == 0 and aligned bases: 16-byte loads
  // Exclusion of rows inside the scan: removed bits by slot, and a filter on ids.
  bool check_rows;            // removed != nullptr || filter != 0
  const uint64_t* removed;
  const int64_t* ids;
  int filter;                 // 0 none, 1 allow, 2 deny
  IdSetView filter_set;
  float excluded;
};

// Stages rows [0, rows) x dims [d0, d0 + kTileD) of a row-major matrix into t[j][r]
// (transposed), zero outside. row_ptr(r) gives the row's start or nullptr for a missing row.
template <int ROWS, int PITCH, class T, class RowPtr>
__device__ __forceinline__ void stage_tile(float (*t)[PITCH], RowPtr row_ptr, int64_t d0, int64_t dim, bool vec4) {
  using E = DeviceElement<T>;
  static_assert(E::kPerLoad == 4, "stage_tile stages four elements per wide load");
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

// One (list, query tile, vector tile) per iteration of a persistent grid. Thread (ty, tx) owns
// queries ty*RQ.. and vectors tx*4..: a TQ x 64 register tile, fp32, accumulated in dimension
// order so each distance is the plain sequential sum.
template <class T, int TQ, bool IP>
__global__ void __launch_bounds__(kThreads) list_tile_kernel(TileArgs<T> a) {
  constexpr int RQ = TQ / 16;
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
    // The unit (list or segment) whose tile range holds t: the last u with tile_off[u] <= t.
    int64_t lo = 0, hi = units;  // invariant: tile_off[lo] <= t < tile_off[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (a.tile_off[mid] <= t) lo = mid; else hi = mid;
    }
    int64_t l, row0, size;
    const T* rows;
    const int64_t* row_ids;
    if (a.segments != nullptr) {
      const ScanSegment& sg = a.segments[lo];
      l = sg.list;
      row0 = sg.row0;
      size = sg.count;
      rows = static_cast<const T*>(sg.rows);
      row_ids = sg.ids;
    } else {
      l = lo;
      row0 = 0;
      size = a.list_size[l];
      rows = a.vectors + a.list_start[l] * a.dim;
      row_ids = a.ids + a.list_start[l];
    }
    const int64_t nvt = (size + kTileV - 1) / kTileV;
    const int64_t nunits = (nvt + kUnitTiles - 1) / kUnitTiles;
    const int64_t local = t - a.tile_off[lo];
    const int64_t qt = local / nunits, unit = local % nunits;
    const int64_t prem = a.pair_count[l] - qt * TQ;
    const int pcount = static_cast<int>(prem < TQ ? prem : TQ);
    __syncthreads();  // the previous unit is done with out_base / q_row
    if (tid < TQ) {
      if (tid < pcount) {
        const int64_t pr = a.grouped[a.pair_begin[l] + qt * TQ + tid];
        const int64_t q = pr / a.nprobe, p = pr % a.nprobe;
        q_row[tid] = q;
        out_base[tid] = a.cand.slot(q, p, row0);
      } else {
        q_row[tid] = -1;
      }
    }
    __syncthreads();
    const int64_t vt_end = (unit + 1) * kUnitTiles < nvt ? (unit + 1) * kUnitTiles : nvt;
    for (int64_t vt = unit * kUnitTiles; vt < vt_end; ++vt) {
      const int64_t v0 = vt * kTileV;
      const int vcount = static_cast<int>(size - v0 < kTileV ? size - v0 : kTileV);
      const T* x = rows + v0 * a.dim;
      if (a.check_rows) {
        __syncthreads();  // the previous tile's results are written: keep[] may change
        if (tid < kTileV) {
          bool ok = tid < vcount;
          if (ok && a.removed != nullptr) {
            const int64_t slot = a.list_start[l] + row0 + v0 + tid;
            if ((a.removed[slot >> 6] >> (slot & 63)) & 1u) ok = false;
          }
          if (ok && a.filter != 0) ok = a.filter_set.contains(row_ids[v0 + tid]) == (a.filter == 1);
          keep[tid] = ok;
        }
      }
      float acc[RQ][RV];
#pragma unroll
      for (int r = 0; r < RQ; ++r)
#pragma unroll
        for (int c = 0; c < RV; ++c) acc[r][c] = 0.0f;
      for (int64_t d0 = 0; d0 < a.dim; d0 += kTileD) {
        stage_tile<TQ, QP, float>(qs, [&](int r) -> const float* {
          const int64_t q = q_row[r];
          return q >= 0 ? a.queries + q * a.dim : nullptr;
        }, d0, a.dim, a.vec4);
        stage_tile<kTileV, VP, T>(xs, [&](int r) -> const T* { return r < vcount ? x + r * a.dim : nullptr; },
                               d0, a.dim, a.vec4);
        __syncthreads();
        // A warp holds query rows 8w..8w+7 (RQ = 4) or 2w, 2w+1 (RQ = 1): skip it when they are
        // all past the tile's last query (its results are never written).
        if ((tid / 32) * 2 * RQ < pcount) {
#pragma unroll 8
        for (int j = 0; j < kTileD; ++j) {
          float qa[RQ], xb[RV];
          if constexpr (RQ == 4) {
            const float4 v = *reinterpret_cast<const float4*>(&qs[j][ty * 4]);
            qa[0] = v.x; qa[1] = v.y; qa[2] = v.z; qa[3] = v.w;
          } else {
#pragma unroll
            for (int r = 0; r < RQ; ++r) qa[r] = qs[j][ty * RQ + r];
          }
          const float4 w = *reinterpret_cast<const float4*>(&xs[j][tx * 4]);
          xb[0] = w.x; xb[1] = w.y; xb[2] = w.z; xb[3] = w.w;
#pragma unroll
          for (int r = 0; r < RQ; ++r)
#pragma unroll
            for (int c = 0; c < RV; ++c) {
              if constexpr (IP) {
                acc[r][c] = fmaf(qa[r], xb[c], acc[r][c]);
              } else {
                const float diff = qa[r] - xb[c];
                acc[r][c] = fmaf(diff, diff, acc[r][c]);
              }
            }
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
          if (vi < vcount) a.cand.dist[base + vi] = (!a.check_rows || keep[vi]) ? acc[r][c] : a.excluded;
        }
      }
    }
  }
}

template <class T, int TQ, bool IP>
void launch_tiles(const DeviceContext& ctx, cudaStream_t stream, const TileArgs<T>& args) {
  // A persistent grid: as many blocks as can be resident (asked once per context).
  const auto kernel = list_tile_kernel<T, TQ, IP>;
  const int per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, 0);
  const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * ctx.limits().sm_count);
  kernel<<<grid, kThreads, 0, stream>>>(args);
  IVF_CUDA_CHECK_LAUNCH();
}

// The one dispatch of the scan: query tile by queries per list, metric, element type.
template <class T>
void launch_scan(const DeviceContext& ctx, cudaStream_t stream, int tile_q, bool ip, const TileArgs<T>& args) {
  if (tile_q == 64)
    ip ? launch_tiles<T, 64, true>(ctx, stream, args) : launch_tiles<T, 64, false>(ctx, stream, args);
  else
    ip ? launch_tiles<T, 16, true>(ctx, stream, args) : launch_tiles<T, 16, false>(ctx, stream, args);
}

}  // namespace

ScanGroups group_scan_pairs(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p) {
  const int64_t npairs = p.nq * p.nprobe;
  const int64_t nlist = p.lists.nlist;
  candidate_offsets_kernel<<<static_cast<unsigned>(std::min<int64_t>(p.nq, kMaxGridBlocks)), kThreads, 0, stream>>>(
      p.probes, p.nq, p.nprobe, p.lists.size, p.cand);
  IVF_CUDA_CHECK_LAUNCH();

  ScanGroups g;
  // Dispatch: the query tile follows the expected number of queries per probed list.
  const double per_list = static_cast<double>(npairs) / static_cast<double>(nlist);
  g.tile_q = per_list >= 24.0 ? 64 : 16;
  g.pair_count = DeviceBuffer<int32_t>(ctx, nlist, stream);
  g.pair_begin = DeviceBuffer<int32_t>(ctx, nlist, stream);
  g.grouped = DeviceBuffer<int32_t>(ctx, npairs, stream);
  DeviceBuffer<int32_t> cursor(ctx, nlist, stream);
  std::size_t bytes = 0;
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, g.pair_count.data(), g.pair_begin.data(),
                                               static_cast<int>(nlist), stream));
  DeviceBuffer<unsigned char> tmp(ctx, bytes, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(g.pair_count.data(), 0, g.pair_count.bytes(), stream));
  count_pairs_kernel<<<grid_for(npairs), kThreads, 0, stream>>>(p.probes, npairs, g.pair_count.data());
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp.data(), bytes, g.pair_count.data(), g.pair_begin.data(),
                                               static_cast<int>(nlist), stream));
  IVF_CUDA_CHECK(
      cudaMemcpyAsync(cursor.data(), g.pair_begin.data(), g.pair_begin.bytes(), cudaMemcpyDeviceToDevice, stream));
  group_pairs_kernel<<<grid_for(npairs), kThreads, 0, stream>>>(p.probes, npairs, cursor.data(), g.grouped.data());
  IVF_CUDA_CHECK_LAUNCH();
  return g;
}

int64_t scan_segment_tiles(int64_t pairs, int64_t rows, int tile_q) {
  const int64_t qt = (pairs + tile_q - 1) / tile_q;
  const int64_t vt = (rows + kTileV - 1) / kTileV;
  return qt * ((vt + kUnitTiles - 1) / kUnitTiles);
}

namespace {

// Builds the kernel arguments for one pass and launches it.
void scan_pass(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& g,
               const ScanSegment* segments, int64_t nseg, const int64_t* tile_off) {
  const bool ip = p.metric != Metric::L2;
  // The device stores f32 only so far (compact types are CPU-only: the CUDA backends refuse
  // them at creation), so only the f32 kernels are instantiated.
  if (p.lists.type != ElementType::F32)
    fail(Errc::Unsupported, std::string("the CUDA scan has no ") + element_name(p.lists.type) + " kernel");
  [&](auto tag) {
    using T = typename decltype(tag)::type;
    // 16-byte loads need whole loads per row and 16-byte aligned bases (pool allocations are;
    // segments are placed on 256-byte boundaries).
    const bool vec4 = p.lists.dim % DeviceElement<T>::kPerLoad == 0 && p.lists.dim % 4 == 0 &&
                      reinterpret_cast<uintptr_t>(p.queries) % 16 == 0 &&
                      (segments != nullptr || reinterpret_cast<uintptr_t>(p.lists.vectors) % 16 == 0);
    const int filter = p.filter == ScanProblem::Filter::None ? 0 : p.filter == ScanProblem::Filter::Allow ? 1 : 2;
    const uint64_t* removed = segments != nullptr ? nullptr : p.lists.removed;
    TileArgs<T> args{segments, nseg, p.queries, p.lists.dim, p.lists.nlist, p.nprobe, p.lists.rows<T>(),
                     p.lists.start, p.lists.size, g.grouped.data(), g.pair_begin.data(), g.pair_count.data(),
                     tile_off, p.cand, vec4, removed != nullptr || filter != 0, removed, p.lists.ids, filter,
                     p.filter_set, p.excluded};
    launch_scan<T>(ctx, stream, g.tile_q, ip, args);
  }(ElementTag<float>{});
}

}  // namespace

void scan_segments(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& groups,
                   const ScanSegment* segments, const int64_t* tile_off, int64_t nseg) {
  if (nseg > 0) scan_pass(ctx, stream, p, groups, segments, nseg, tile_off);
}

void scan_lists(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p) {
  const int64_t nlist = p.lists.nlist;
  ScanGroups g = group_scan_pairs(ctx, stream, p);
  DeviceBuffer<int64_t> tiles(ctx, nlist + 1, stream), tile_off(ctx, nlist + 1, stream);
  std::size_t bytes = 0;
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, tiles.data(), tile_off.data(),
                                               static_cast<int>(nlist + 1), stream));
  DeviceBuffer<unsigned char> tmp(ctx, bytes, stream);
  tiles_per_list_kernel<<<grid_for(nlist + 1), kThreads, 0, stream>>>(g.pair_count.data(), p.lists.size, nlist,
                                                                      g.tile_q, tiles.data());
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp.data(), bytes, tiles.data(), tile_off.data(),
                                               static_cast<int>(nlist + 1), stream));
  scan_pass(ctx, stream, p, g, nullptr, 0, tile_off.data());
}

}  // namespace ivfgpu::cuda
