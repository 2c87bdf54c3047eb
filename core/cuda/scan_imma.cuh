// The pruned pass on int8 tensor cores (IMMA), for integer queries against uint8 or int8 rows;
// included only by scan_tiles_u8.cu and scan_tiles_i8.cu. docs/tensor-scan.md, "The integer
// pass", says when it runs.
//
// With both operands integers, mma.sync m16n8k32 (on Hopper wgmma m64n32k32: the WG build,
// wgmma.cuh; u8 x u8 or s8 x s8, int32 accumulation either way) gives every dot product exactly,
// and so every cost: |q|^2 + |x|^2 - 2 q.x (L2) or -q.x (inner product) as an integer, at most
// 2 * 1024 * 255^2 < 2^28 in magnitude, rounded once to float.
// That is the SIMT scan's distance bit for bit (its integer sums, rounded once), so the pass
// runs the pruned pass's protocol (scan_prune.cuh) with no margin: a row is appended when its
// cost reaches the query's bound, counts when it beats it, and its appended cost is already the
// exact one, so the settle re-scores nothing (PruneState::exact). For k <= kSeedMaxK its seed is
// the int8 seed (scan_seed.cuh: 16-query tiles, where this pass's 64-query tiles cost their rows
// for ~10 queries a first probe).
//
// Shared layout: the bf16 pass's bytes (scan_mma.cuh). A slab is [64 rows][64 bytes], chunk c
// of row r at chunk c ^ ((r / 2) % 4); here a byte is a dimension, so a slab holds 64 of them
// and an m16n8k32 k step is half a slab row. An m16n8k32 int8 fragment takes from an 8 x 8 .b16
// ldmatrix matrix exactly what an m16n8k16 bf16 fragment takes from the same bytes, so the lanes'
// ldmatrix addresses are the bf16 pass's. The query tile stays in shared memory for the whole
// unit (up to kImmaMaxDim dimensions: 64 KiB); the rows come two slabs at a time, double-buffered.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../errors.hpp"
#include "launch.cuh"
#include "scan_mma.cuh"
#include "scan_prune.cuh"
#include "scan_tensor.hpp"

namespace ivfgpu::cuda::scan_detail {

constexpr int kImmaSlabDims = 64;                    // dimensions (bytes) of a slab row
constexpr int kImmaSliceDims = 2 * kImmaSlabDims;    // staged per step: two slabs
constexpr int kImmaSlabBytes = kMmaTile * kImmaSlabDims;
static_assert(kImmaGroupedMaxDim <= kGroupedMaxSlabs * kImmaSlabDims, "staged_tile_products' slabs");
static_assert(grouped_slices_hold([](int64_t d) { return integer_query_tiles(d); }, kImmaSliceDims, kImmaMaxDim),
              "the int8 pass's grouped units hold the slices their wgmma batches assume");
// An excluded row's cost term carries this much more: past kImmaCostCap, which is past every real
// cost (|cost| < 2^28 up to kImmaMaxDim dimensions) and past every append threshold.
constexpr int kImmaExcluded = 1 << 30;
constexpr int kImmaCostCap = 1 << 29;
static_assert(int64_t{2} * kImmaMaxDim * 255 * 255 < (int64_t{1} << 28), "integer costs stay below 2^28");

// The tensor-core multiply and the dot product of four packed bytes, for each row type. The
// queries are integers of the row type (ScanProblem::integer_queries), so both operands share it.
template <class T>
struct ImmaOps;
template <>
struct ImmaOps<uint8_t> {
  __device__ static __forceinline__ void mma(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ static __forceinline__ int dot4(uint32_t x, uint32_t y, int acc) {
    return static_cast<int>(__dp4a(x, y, static_cast<unsigned>(acc)));
  }
};
template <>
struct ImmaOps<int8_t> {
  __device__ static __forceinline__ void mma(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ static __forceinline__ int dot4(uint32_t x, uint32_t y, int acc) {
    return __dp4a(static_cast<int>(x), static_cast<int>(y), acc);
  }
};

// The sum of squares of 16 packed bytes, added to acc.
template <class T>
__device__ __forceinline__ int squares16(const uint4& v, int acc) {
  acc = ImmaOps<T>::dot4(v.x, v.x, acc);
  acc = ImmaOps<T>::dot4(v.y, v.y, acc);
  acc = ImmaOps<T>::dot4(v.z, v.z, acc);
  return ImmaOps<T>::dot4(v.w, v.w, acc);
}

// Four integer-valued floats (integers of the row type) as four packed bytes, lowest first.
__device__ __forceinline__ uint32_t pack_bytes(const float4& v) {
  const auto b = [](float f) { return static_cast<uint32_t>(__float2int_rn(f)) & 0xffu; };
  return b(v.x) | (b(v.y) << 8) | (b(v.z) << 16) | (b(v.w) << 24);
}

// The largest integer cost that can still round to a float no worse than the bound u (append
// test), or an integer past it: every n with rn(n) <= u is at most floor(u) plus half the
// spacing of floats above u (zero below 2^24). Capped at kImmaCostCap (no bound: every real cost).
__device__ __forceinline__ int imma_append_limit(uint32_t bound) {
  if (bound == kNoBound) return kImmaCostCap;
  const float u = from_ordered(bound);
  if (!(u < static_cast<float>(kImmaCostCap))) return kImmaCostCap;
  const float up = nextafterf(u, __int_as_float(0x7f800000));
  return static_cast<int>(floorf(u)) + static_cast<int>((up - u) * 0.5f);
}

// Eight warps; warp w multiplies query rows 32 * (w / 4) .. + 32 by tile rows 16 * (w % 4) .. + 16
// (2 x 2 mma tiles of 16 x 8), as list_mma_kernel does. Requires dim % 16 == 0, dim <=
// kImmaMaxDim, 16-byte aligned queries and rows (scan.cu checks), and the unit tiling of
// tensor_tiles.
// BLOCKS: the blocks an SM its register budget allows (launch_resident_budget picks the build).
// QTILES: the query tiles a unit holds at most (a.unit_queries / kMmaTile: 1, or up to
// kImmaGroupedMaxDim dimensions 2 or 4: integer_query_tiles), where a row tile's slices (one or
// two) all stay staged, so each later tile is multiplied against them after the previous one's
// epilogue (the resident bf16 pass's grouping, scan_resident.cuh): a list's queries cost one
// unit's set-up and one staging of its rows per unit. Builds of their own: two tiles at three
// blocks an SM, four at two.
// WG: on wgmma (wgmma.cuh), with the resident bf16 pass's warpgroup layout (scan_resident.cuh).
template <class T, bool IP, int BLOCKS, int QTILES = 1, bool WG = false>
__global__ void __launch_bounds__(kThreads, BLOCKS) list_imma_kernel(TileArgs<T> a, PruneState pr) {
  // nslab slabs for each of the unit's query tiles; 1,024-byte aligned, as the row slices (wgmma)
  extern __shared__ __align__(1024) unsigned char imma_query_tile[];
  constexpr int kQueries = QTILES * kMmaTile;  // the unit's queries at most
  static_assert(kQueries <= kThreads, "a thread per query of the unit reads its bound and sets its thresholds");
  __shared__ __align__(1024) unsigned char xs[2][2 * kImmaSlabBytes];  // row slices, double-buffered
  __shared__ float costs[kMmaTile][kMmaTile];  // counted rows' costs, read where written[r] says
  __shared__ unsigned long long written[kMmaTile];
  __shared__ int below[kQueries];
  __shared__ int qsq[kQueries];     // the queries' squared norms (L2; 0 for inner product)
  __shared__ int xterm[kMmaTile];   // per row: |x|^2 (L2), 0 (inner product), + kImmaExcluded if excluded
  __shared__ int limit[kQueries];   // per query row: imma_append_limit(bound) - qsq
  __shared__ uint32_t qbound[kQueries];
  __shared__ int64_t q_row[kQueries], out_base[kQueries];
  __shared__ bool keep[kMmaTile];

  if (wgmma_build_missing<WG>()) return;  // code without wgmma never launches this build
  constexpr int kMul = IP ? -1 : -2;  // cost = qsq + xterm + kMul * dot
  const int tid = threadIdx.x, warp = uniform_warp_index(), lane = tid % 32;
  const int g = lane / 4;
  const int wq = WG ? (warp % 4) * 16 : (warp / 4) * 32, wv = WG ? (warp / 4) * 32 : (warp % 4) * 16;
  constexpr int kMI = WG ? 1 : 2, kNI = WG ? 4 : 2;
  using Products = std::conditional_t<WG, WgmmaInt8<T>, ImmaOps<T>>;
  const int dim = static_cast<int>(a.dim);
  const int nslab = (dim + kImmaSlabDims - 1) / kImmaSlabDims;
  uint32_t a_off[2], b_off;  // the bf16 pass's lane offsets (scan_mma.cuh); WG: the warpgroup's rows
  mma_slab_offsets(wq, wv, a_off, b_off);
  if constexpr (WG) b_off = static_cast<uint32_t>(wv * 64);
  const uint32_t q_at = static_cast<uint32_t>(__cvta_generic_to_shared(imma_query_tile));
  if (WG && (q_at % 1024) != 0) __trap();  // the swizzle would read other bytes than the staging wrote
  const uint32_t x_at = static_cast<uint32_t>(__cvta_generic_to_shared(&xs[0][0]));
  for (int i = tid; i < kQueries; i += kThreads) {
    below[i] = 0;
    if (i < kMmaTile) written[i] = 0;  // cleared again by each reader
  }
  const uint32_t tile_bytes = static_cast<uint32_t>(nslab * kImmaSlabBytes);  // a query tile's

  const int64_t total = a.tile_off[a.nlist];
  __shared__ int64_t claimed;  // next_block_unit's
  for (int64_t t = blockIdx.x; t < total; t = next_block_unit(a, t, &claimed)) {
    const MmaUnit<T> u = mma_unit(a, t);
    const int64_t l = u.list, vt_begin = u.vt_begin, vt_end = u.vt_end;
    const int pcount = u.pcount;
    const T* rows = u.rows;
    __syncthreads();  // the previous unit is done with the query tile and the per-query arrays
    load_query_tile<kQueries>(a, l, u.qt, pcount, 0, q_row, out_base, a.unit_queries);
    if (tid < kQueries) {
      // Through L2, where other blocks lower the bounds; a bound read early is only higher: safe.
      qbound[tid] = tid < pcount ? __ldcg(pr.bound + q_row[tid]) : kNoBound;
      qsq[tid] = !IP && tid < pcount ? a.query_sq[q_row[tid]] : 0;
    }
    __syncthreads();  // q_row, qsq
    // The query tiles from the packed bytes (a.query_bytes), every slab whole (zeros past dim
    // and past pcount): a thread per 16-dimension chunk.
    const int qtiles = QTILES > 1 ? (pcount + kMmaTile - 1) / kMmaTile : 1;
    for (int e = tid; e < qtiles * kMmaTile * nslab * 4; e += kThreads) {
      const int r = e / (nslab * 4), c = e % (nslab * 4);  // query row r of the unit
      const int64_t q = q_row[r];
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if (q >= 0 && c * 16 < dim) w = *reinterpret_cast<const uint4*>(a.query_bytes + q * a.dim + c * 16);
      *reinterpret_cast<uint4*>(imma_query_tile + (r / kMmaTile) * tile_bytes + (c / 4) * kImmaSlabBytes +
                                bf16_chunk_at(r % kMmaTile, c % 4)) = w;
    }
    // Thread tid stages chunk tid % 4 of each slab of row tid / 4 (a copy of row 0 past the
    // tile's end: its products are never read, xterm excludes it).
    const int my_row = tid / 4, my_col = (tid % 4) * 16;
    const auto row_ptr = [&](int64_t v0, int count) -> const T* {
      return rows + (v0 + (my_row < count ? my_row : 0)) * a.dim + my_col;
    };
    const auto load_slice = [&](uint4 (&v)[2], const T* p, int d0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int col = d0 + j * kImmaSlabDims;
        v[j] = col + my_col < dim ? *reinterpret_cast<const uint4*>(p + col) : make_uint4(0u, 0u, 0u, 0u);
      }
    };
    uint4 xv[2];
    load_slice(xv, row_ptr(vt_begin * kMmaTile, u.rows_in(vt_begin)), 0);
    int buf = 0;
    for (int64_t vt = vt_begin; vt < vt_end; ++vt) {
      const int64_t v0 = vt * kMmaTile;
      const int vcount = u.rows_in(vt);
      const T* my_x = row_ptr(v0, vcount);
      const int buf0 = buf;  // the tile's first slice's buffer (the later query tiles' products read it)
      // Read after this tile's products (barriers between); the previous tile's readers are past
      // its last barrier.
      mark_kept_rows(a, l, v0, vcount, keep);
      int acc[kMI][kNI][4];
      zero_accumulators(acc);
      int xsq = 0;
      for (int d0 = 0; d0 < dim; d0 += kImmaSliceDims, buf ^= 1) {
        // Buffer buf was last read two slices ago, before the previous slice's barrier.
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          *reinterpret_cast<uint4*>(&xs[buf][j * kImmaSlabBytes + bf16_chunk_at(my_row, tid % 4)]) = xv[j];
          if (!IP) xsq = squares16<T>(xv[j], xsq);
        }
        if constexpr (WG) wgmma_stores_visible();  // and on a unit's first slice its query tiles'
        if (d0 + kImmaSliceDims < dim) {
          load_slice(xv, my_x, d0 + kImmaSliceDims);
        } else if (vt + 1 < vt_end) {  // the next tile's first slice travels over the epilogue
          load_slice(xv, row_ptr(v0 + kMmaTile, u.rows_in(vt + 1)), 0);
        }
        if constexpr (WG) wgmma_wait_all();  // the previous slice's products: its buffer is staged next
        __syncthreads();  // the slice is staged
        if (d0 == 0 && tid < pcount) {
          // The previous tile's lowering (before this barrier) is in qbound.
          limit[tid] = imma_append_limit(qbound[tid]) - qsq[tid];
        } else if (d0 == 0 && tid < kQueries) {
          // Past the unit's queries: no term reaches it (|kMul * dot| <= 2 * 1,024 * 255^2 at
          // most), so the epilogue's first test reads every row the warp holds, without a branch.
          limit[tid] = INT_MIN;
        }
        if constexpr (WG) {  // issued here, waited for before the next slice's barrier
          wgmma_slice_products<Products>(acc, q_at, x_at + buf * 2 * kImmaSlabBytes, d0 / kImmaSlabDims, nslab, b_off);
        } else if (wq < pcount) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int slab = d0 / kImmaSlabDims + j;
            if (slab >= nslab) break;
            mma_slab<ImmaOps<T>>(acc, q_at + slab * kImmaSlabBytes, x_at + (buf * 2 + j) * kImmaSlabBytes, a_off, b_off);
          }
        }
      }
      if constexpr (WG) wgmma_wait_all();
      // Each row's cost term: the four lanes of a row hold parts of its squared norm.
      xsq += __shfl_xor_sync(kFullMask, xsq, 1);
      xsq += __shfl_xor_sync(kFullMask, xsq, 2);
      if (tid % 4 == 0) xterm[my_row] = (IP ? 0 : xsq) + (keep[my_row] ? 0 : kImmaExcluded);
      __syncthreads();  // xterm, limit, keep
      // The epilogue of the accumulators for query rows r0 .. r0 + 63 (pc of them): whether this
      // thread counted a cost (rare). costs and written hold the tile's own rows.
      const auto epilogue = [&](int r0, int pc) {
        bool counted_here = false;
        const int c0 = wv + 2 * (lane % 4);  // the lane's tile columns c0 + 8 ni + e
        int xt[kNI][2];
#pragma unroll
        for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
          for (int e = 0; e < 2; ++e) xt[ni][e] = xterm[c0 + 8 * ni + e];
        const auto term = [&](int mi, int h, int ni, int e) { return xt[ni][e] + kMul * acc[mi][ni][2 * h + e]; };
        bool any_take = false;
        for_every_accumulator_row<kMI>(wq, g, [&](int mi, int h, int r) {  // past pc limit is INT_MIN
          int lo = min(term(mi, h, 0, 0), term(mi, h, 0, 1));
#pragma unroll
          for (int ni = 1; ni < kNI; ++ni) lo = min(lo, min(term(mi, h, ni, 0), term(mi, h, ni, 1)));
          any_take |= lo <= limit[r0 + r];
        });
        if (!any_take) return false;  // the common case once a bound holds
        for_each_accumulator_row<kMI>(wq, g, pc, [&](int mi, int h, int r) {
          const uint32_t ub = qbound[r0 + r];
          const float u = ub == kNoBound ? __int_as_float(0x7f800000) : from_ordered(ub);
          const int64_t q = q_row[r0 + r], pos0 = out_base[r0 + r] + v0 - q * pr.stride;
          CountedCosts counts;
#pragma unroll
          for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int tv = term(mi, h, ni, e);
              if (tv >= kImmaCostCap) continue;  // excluded
              const int c = c0 + 8 * ni + e;
              const float cost = __int2float_rn(qsq[r0 + r] + tv);  // exact, rounded once
              if (cost <= u) append_row(pr, q, pos0 + c, cost);
              if (cost < u) counts.add(costs, r, c, cost);
            }
          if (counts.n > 0) {
            counted_here = true;
            counts.publish(below + r0, written, r);
          }
        });
        return counted_here;
      };
      static_assert(kImmaSlabBytes == kMmaTile * 64, "staged_tile_products' slabs");
      finish_row_tile<QTILES, Products>(acc, pcount, wq, epilogue, pr, below, written, costs, q_row, qbound,
                                          q_at + tile_bytes, tile_bytes, x_at, nslab, buf0, a_off, b_off);
    }
  }
}

// A thread per 16-dimension chunk of a query: its bytes, and its squares into the query's norm.
template <class T>
__global__ void pack_integer_queries_kernel(const float* queries, int64_t nq, int64_t dim, uint8_t* bytes,
                                            int32_t* sq) {
  const int64_t chunks = dim / 16;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < nq * chunks;
       e += int64_t{gridDim.x} * blockDim.x) {
    const float4* src = reinterpret_cast<const float4*>(queries + e * 16);
    const uint4 w = make_uint4(pack_bytes(src[0]), pack_bytes(src[1]), pack_bytes(src[2]), pack_bytes(src[3]));
    *reinterpret_cast<uint4*>(bytes + e * 16) = w;
    atomicAdd(sq + e / chunks, squares16<T>(w, 0));
  }
}
template <class T>
void launch_pack_integer_queries(cudaStream_t stream, const float* queries, int64_t nq, int64_t dim, uint8_t* bytes,
                                 int32_t* sq) {
  if (nq <= 0) return;
  pack_integer_queries_kernel<T><<<grid_for(nq * (dim / 16), kThreads), kThreads, 0, stream>>>(queries, nq, dim,
                                                                                              bytes, sq);
  IVF_CUDA_CHECK_LAUNCH();
}

// The int8 seed's and pass's launches: their kernels read the queries only as packed.
template <class T>
void require_packed_queries(const TileArgs<T>& args, const char* what) {
  if (args.query_bytes == nullptr || args.query_sq == nullptr)
    fail(Errc::Internal, std::string(what) + " needs its queries packed (launch_pack_integer_queries)");
}

// The build of list_imma_kernel on wgmma or on mma.sync (wgmma_usable).
template <class T, bool IP, int BLOCKS, int QTILES = 1>
auto imma_kernel(bool wg) {
  return wg ? list_imma_kernel<T, IP, BLOCKS, QTILES, true> : list_imma_kernel<T, IP, BLOCKS, QTILES>;
}

template <class T>
void launch_integer_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                         const PruneState& prune) {
  require_packed_queries(args, "the int8 pass");
  const bool wg = wgmma_usable(ctx);
  const auto tile_bytes = [](int64_t dim) {
    return static_cast<std::size_t>((dim + kImmaSlabDims - 1) / kImmaSlabDims) * kImmaSlabBytes;
  };
  // The units' query tiles, as scan.cu tiled them (integer_query_tiles).
  const int qtiles = args.unit_queries / kMmaTile;
  if (qtiles != integer_query_tiles(args.dim) || args.unit_queries % kMmaTile != 0)
    fail(Errc::Internal, "the int8 pass's units were tiled for another shape");
  const std::size_t dynamic = qtiles * tile_bytes(args.dim);
  const std::size_t largest = std::max(tile_bytes(kImmaMaxDim), 4 * tile_bytes(kImmaGroupedMaxDim));
  if (qtiles == 2) {  // at most 16 KiB of query tiles: three blocks fit
    const auto pair = ip ? imma_kernel<T, true, kResidentBlocks, 2>(wg) : imma_kernel<T, false, kResidentBlocks, 2>(wg);
    launch_resident_budget(ctx, stream, pair, pair, dynamic, largest, args, prune);
    return;
  }
  if (qtiles == 4) {  // up to 64 KiB of query tiles: two blocks an SM, 128 registers
    const auto four = ip ? imma_kernel<T, true, kResidentFallbackBlocks, 4>(wg)
                         : imma_kernel<T, false, kResidentFallbackBlocks, 4>(wg);
    launch_resident_budget(ctx, stream, four, four, dynamic, largest, args, prune);
    return;
  }
  if (ip)
    launch_resident_budget(ctx, stream, imma_kernel<T, true, kResidentBlocks>(wg),
                           imma_kernel<T, true, kResidentFallbackBlocks>(wg), dynamic, largest, args, prune);
  else
    launch_resident_budget(ctx, stream, imma_kernel<T, false, kResidentBlocks>(wg),
                           imma_kernel<T, false, kResidentFallbackBlocks>(wg), dynamic, largest, args, prune);
}

}  // namespace ivfgpu::cuda::scan_detail
