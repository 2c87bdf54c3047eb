// The pruned bf16 pass with its query tile resident in shared memory for the whole work unit
// (dim <= kResidentMaxDim, four-element loads: pruned_kernel_for chooses it); included only by
// scan_tensor.cuh. The arithmetic, the margin and the pruning protocol are list_mma_kernel's
// (scan_mma.cuh, scan_prune.cuh): operands centred on the list's centroid (L2) and rounded to
// bf16, m16n8k16 with fp32 accumulation (on Hopper wgmma m64n32k16: the WG build, wgmma.cuh),
// bf16_tile_epilogue, lower_counted_bounds. What differs is the schedule, after the int8 pass's
// (scan_imma.cuh):
//
// - the unit's query tile is staged once, centred and rounded, before its first row tile;
// - a row tile is staged 64 dimensions a slice into two alternating buffers, one barrier each;
//   the next slice (or the next row tile's first) loads into registers during the products;
// - the tile's largest row norm is reduced while its last slice is stored, and the per-row
//   thresholds are computed right after that slice's barrier, so the epilogue needs one barrier
//   before it and one after (four a tile at d <= 128, against list_mma_kernel's six);
// - up to kResidentGroupedMaxDim dimensions a unit holds two or four query tiles (a.unit_queries
//   128 or 256: resident_query_tiles): each after the first is multiplied against the row tile's
//   slices, still staged, after the previous tile's epilogue, so a list's queries cost its rows'
//   loads, centring, rounding and norms once per unit. ncu (session 46, f32 1M x 128, nprobe 16)
//   gave that row staging ~42% of the kernel's instructions and ~32% of its stall samples,
//   besides the barriers that wait on it.
//
// ncu on list_mma_kernel (bench/RESULTS.md, session 37) counted ~690 instructions per warp per
// 64 x 64 row tile at d = 128, of which 32 HMMA: most of the rest was control and addressing
// around runtime choices (element-wise staging, the query tile staged or not, partial slices),
// which this kernel does not have.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "../errors.hpp"
#include "scan_mma.cuh"
#include "scan_prune.cuh"
#include "scan_tensor.hpp"

namespace ivfgpu::cuda::scan_detail {

constexpr int kResidentSlabDims = 32;  // bf16 dimensions of a 64-byte slab row
static_assert(kResidentGroupedMaxDim <= kGroupedMaxSlabs * kResidentSlabDims, "staged_tile_products' slabs");
static_assert(grouped_slices_hold([](int64_t d) { return resident_query_tiles(d, false); }, kMmaSlice<true>,
                                  kResidentMaxDim),
              "the resident pass's grouped units hold the slices their wgmma batches assume");

// The bf16 query tile in whole slices (two slabs each): the query staging writes a slice's both
// slabs. The wide pass's fp32 query rows follow it.
__host__ __device__ constexpr std::size_t resident_tile_bytes(int dim) {
  return static_cast<std::size_t>((dim + kMmaSlice<true> - 1) / kMmaSlice<true>) * 2 * kBf16SlabBytes;
}

// The wide pass's fp32 query rows in shared memory (after the bf16 tile): four floats past dim
// apart, so that lanes reading different rows at one offset spread over the banks.
__host__ __device__ constexpr int wide_query_stride(int64_t dim) { return static_cast<int>(dim) + 4; }
__host__ __device__ constexpr std::size_t wide_query_bytes(int64_t dim) {
  return static_cast<std::size_t>(kMmaTile) * static_cast<std::size_t>(wide_query_stride(dim)) * sizeof(float);
}
// Up to kWideRawMaxDim dimensions the wide pass also keeps the row tile's values in fp32 (after
// the query rows, the same stride), as its staging loads them: a mark is re-scored from shared
// memory instead of reading its row again through L2 (~1,100 marks a query at k 1000: ~5.6 GB of
// rows a batch of 10,000). H100, 1M x 128, nprobe 16, k 1000 (session 61): the pass 4.14 -> 3.88
// ms at base clocks, 1,013K -> 1,046K QPS. Past 128 dimensions two blocks an SM would not hold it.
constexpr int64_t kWideRawMaxDim = 128;
__host__ __device__ constexpr bool wide_rows_in_shared(int64_t dim) { return dim <= kWideRawMaxDim; }
__host__ __device__ constexpr std::size_t wide_shared_bytes(int64_t dim) {
  return wide_query_bytes(dim) * (wide_rows_in_shared(dim) ? 2 : 1);
}

// BLOCKS: the blocks an SM its register budget allows (launch_resident_budget picks the build).
// QTILES: the query tiles a unit holds at most (a.unit_queries / kMmaTile: 1, or up to
// kResidentGroupedMaxDim dimensions 2 at three blocks an SM and 4 at two). The grouped builds are
// builds of their own: in the three-block build the second tile's products and per-query arrays
// took the spills from 24 to 52 bytes, which cost the one-tile shapes (d 256) 2-5%.
// WIDE: the wide pass that re-scores in place (pr.exact, k past kPruneNarrowMaxK, dim up to
// kWideExactMaxDim): the unit's query rows are also kept in fp32 (and up to kWideRawMaxDim the row
// tile's), a tile marks the pairs that reach their bounds (list_marked_pairs), and
// rescore_listed_pairs appends them with exact costs: a unit's pairs together once its tiles are
// scanned (PruneState::defer_rescore), or each tile's after its marks. A build of its own: in the
// three-block build its registers (live across the epilogue with the next tile's first slice)
// took the k <= 128 pass's spills from 24 to 52-76 bytes.
// NATIVE: f16 or bf16 rows (T) with queries of the same type (resident_native): the operands are
// staged as they are, uncentred, in their own type (f16 slabs on f16 tensor cores), so the tensor
// cores read them exactly and the margin is margin_terms_exact_operands' (only the sums' roundings)
// instead of bf16's 2^-8 an operand: fewer rows pass the epilogue's first test. The staging moves
// a row's bytes as they are (coalesced_load_tile_raw, coalesced_store_raw16), decoding them only
// for the squared norms: no centring, and no conversion to fp32 and back.
template <class T, bool IP, int BLOCKS, bool WIDE = false, int QTILES = 1, bool WG = false, bool NATIVE = false>
__global__ void __launch_bounds__(kThreads, BLOCKS) list_resident_kernel(TileArgs<T> a, MarginTerms mg, PruneState pr) {
  // A tile's whole slices of bf16 for each of the unit's query tiles (WIDE: one, then fp32 query
  // rows and, wide_rows_in_shared, fp32 tile rows).
  // 1,024-byte aligned, as the row slices: wgmma's swizzle assumes slabs on 512-byte boundaries.
  extern __shared__ __align__(1024) unsigned char resident_query_tile[];
  static_assert(!(WIDE && QTILES > 1), "the wide pass keeps one query tile's fp32 rows");
  static_assert(!NATIVE || (!WIDE && WG && (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)),
                "the native pass: the narrow form's wgmma builds for 16-bit rows");
  constexpr bool kF16 = NATIVE && std::is_same_v<T, Half>;  // f16 slabs and products (else bf16)
  constexpr bool kCentred = !IP && !NATIVE;
  constexpr int kQueries = QTILES * kMmaTile;  // the unit's queries at most
  static_assert(kQueries <= kThreads, "a thread per query of the unit reads its bound and sets its thresholds");
  __shared__ __align__(1024) unsigned char xs[2][2 * kBf16SlabBytes];  // row slices, double-buffered
  // Counted rows' pessimistic costs, where written[r] says. In the wide pass nothing counts (a
  // row's worth of each stands in, never read or written), and pairs lists a tile's marks for
  // list_marked_pairs: 8 KiB instead of 16, which lets its fp32 row tile fit two blocks an SM.
  __shared__ float costs[WIDE ? 1 : kMmaTile][kMmaTile];
  __shared__ unsigned long long written[WIDE ? 1 : kMmaTile];
  __shared__ unsigned long long pair_rows[WIDE ? kMmaTile : 1];  // the wide pass's marks, by tile row
  __shared__ unsigned short pairs[WIDE ? kMmaTile * kMmaTile : 1];
  __shared__ PruneRows<kQueries> rows_pr;
  __shared__ float qn2[kQueries];    // the centred queries' squared norms (fp32, before rounding)
  __shared__ float xhalf[kMmaTile];  // half each row's squared norm (L2; 0 for IP), +inf if excluded
  __shared__ float xnorm_s[WIDE ? kMmaTile : 1];  // the wide pass's: each row's norm, rounded up (0 if excluded)
  __shared__ float xmax_part[kThreads / 32];
  // Zero past dim; the grouped builds size it for their own dimensions.
  __shared__ __align__(16) float centre_s[!kCentred ? 4
                                         : QTILES > 1 ? kResidentGroupedMaxDim
                                         : WIDE       ? kWideExactMaxDim
                                                      : kResidentMaxDim];
  __shared__ uint32_t qbound[kQueries];
  __shared__ int64_t q_row[kQueries], out_base[kQueries];
  __shared__ bool keep[kMmaTile];

  if (wgmma_build_missing<WG>()) return;  // code without wgmma never launches this build
  const int tid = threadIdx.x, warp = uniform_warp_index(), lane = tid % 32;
  // WG (wgmma.cuh): warpgroup w multiplies all 64 query rows by tile rows 32 w .. + 32, warp
  // w % 4 of it holding query rows 16 (w % 4) .. + 16; b_off is then the warpgroup's rows' offset
  // in a slab. Otherwise warps of 32 query rows by 16 tile rows on mma.sync.
  const int wq = WG ? (warp % 4) * 16 : (warp / 4) * 32, wv = WG ? (warp / 4) * 32 : (warp % 4) * 16;
  constexpr int kMI = WG ? 1 : 2, kNI = WG ? 4 : 2;
  using Products = std::conditional_t<WG, Wgmma16<kF16>, Bf16Mma>;  // the slices' (WG) and the later query tiles'
  const int dim = static_cast<int>(a.dim);
  const int nslab = (dim + kResidentSlabDims - 1) / kResidentSlabDims;
  constexpr int kSlice = kMmaSlice<true>;  // 64 dimensions: two slabs
  uint32_t a_off[2], b_off;
  mma_slab_offsets(wq, wv, a_off, b_off);
  if constexpr (WG) b_off = static_cast<uint32_t>(wv * 64);
  const uint32_t q_at = static_cast<uint32_t>(__cvta_generic_to_shared(resident_query_tile));
  if (WG && (q_at % 1024) != 0) __trap();  // the swizzle would read other bytes than the staging wrote
  const uint32_t x_at = static_cast<uint32_t>(__cvta_generic_to_shared(&xs[0][0]));
  const float* centre = kCentred ? centre_s : nullptr;
  for (int i = tid; i < kQueries; i += kThreads) {
    rows_pr.below[i] = 0;
    if (i >= kMmaTile) continue;
    if (!WIDE) written[i] = 0;  // cleared again by each reader
    if (WIDE) pair_rows[i] = 0;  // cleared again as they are listed
  }
  const int qstride = wide_query_stride(dim);
  const uint32_t tile_bytes = static_cast<uint32_t>(resident_tile_bytes(dim));  // a query tile's
  float* const qtile = reinterpret_cast<float*>(resident_query_tile + tile_bytes);
  // The row tile (not allocated where the pass defers its re-scoring: launch_resident_scan).
  float* const xraw = WIDE && wide_rows_in_shared(dim) && !pr.defer_rescore ? qtile + kMmaTile * qstride : nullptr;

  const int64_t total = a.tile_off[a.nlist];
  __shared__ int64_t claimed;  // next_block_unit's
  for (int64_t t = blockIdx.x; t < total; t = next_block_unit(a, t, &claimed)) {
    const MmaUnit<T> u = mma_unit(a, t);
    const int64_t l = u.list;
    const int pcount = u.pcount;
    __syncthreads();  // the previous unit is done with the query tile, the centroid, the per-query arrays
    load_query_tile<kQueries>(a, l, u.qt, pcount, 0, q_row, out_base, a.unit_queries);
    // Through L2, where other blocks lower the bounds; a bound read early is only higher: safe.
    if (tid < pcount) qbound[tid] = __ldcg(pr.bound + q_row[tid]);
    if constexpr (kCentred)  // zero past dim up to whole slices: mma_centre reads a slice's every column
      for (int j = tid; j < (dim + kSlice - 1) / kSlice * kSlice; j += kThreads)
        centre_s[j] = j < dim ? a.centroids[l * a.dim + j] : 0.0f;
    __syncthreads();  // q_row, the centroid
    // The query tiles, as the rows are staged (thread tid: row tid / 4 of each, a copy of the
    // unit's first query past pcount, never read), a slice at a time; the four lanes of a row sum
    // its squared norm.
    const int qtiles = QTILES > 1 ? (pcount + kMmaTile - 1) / kMmaTile : 1;
    for (int s = 0; s < qtiles; ++s) {
      const int i = s * kMmaTile + tid / 4;
      const int64_t qr = q_row[i] >= 0 ? q_row[i] : q_row[0];
      const float* my_q = a.queries + qr * a.dim + mma_thread_col<true>();
      unsigned char* const tile = resident_query_tile + s * tile_bytes;
      float qnorm = 0.0f;
      for (int d0 = 0; d0 < dim; d0 += kSlice) {
        float4 qv[kMmaVecs<true>];
        mma_load_slice<true>(qv, my_q, d0, dim);
        if constexpr (WIDE) {  // the fp32 rows as they are (dim is a multiple of 4)
          const int c = mma_thread_col<true>();
#pragma unroll
          for (int i = 0; i < kMmaVecs<true>; ++i) {
            const int j = d0 + mma_vec_offset<true>(i) + c;
            if (j < dim) *reinterpret_cast<float4*>(qtile + (tid / 4) * qstride + j) = qv[i];
          }
        }
        if constexpr (kCentred) mma_centre<true>(qv, centre, d0);
        mma_store_slice_bf16<kF16>(tile + (d0 / kResidentSlabDims) * kBf16SlabBytes, qv, qnorm, true);
      }
      qnorm += __shfl_xor_sync(kFullMask, qnorm, 1);
      qnorm += __shfl_xor_sync(kFullMask, qnorm, 2);
      if (tid % 4 == 0) qn2[i] = qnorm;
    }
    // The rows are staged row-coalesced (coalesced_load_tile: a copy of the tile's first row past
    // its end, whose products are never read and which xhalf excludes).
    // NATIVE: the rows' bytes as they are (coalesced_load_tile_raw), else their values in fp32.
    std::conditional_t<NATIVE, uint2, float4> xv[kMmaVecs<true>];
    const auto load_rows = [&](const T* first, int count, int d0) {
      if constexpr (NATIVE)
        coalesced_load_tile_raw(xv, first, count, a.dim, d0);
      else
        coalesced_load_tile(xv, first, count, a.dim, d0);
    };
    load_rows(u.rows + u.vt_begin * kMmaTile * a.dim, u.rows_in(u.vt_begin), 0);
    int buf = 0;
    // WIDE: the marked pairs waiting in pairs (defer: re-scored when the unit's tiles are done).
    const bool defer = WIDE && pr.defer_rescore;
    int listed = 0;
    const auto rows_distance = [&](int r, int tile, int c) {  // a pair's row from L2
      const T* const x = u.rows + ((u.vt_begin + tile) * kMmaTile + c) * a.dim;
      return exact_row_distance_ahead<T, IP>(qtile + r * qstride, x, a.dim);
    };
    const auto rows_distances2 = [&](int r0, int t0, int c0, int r1, int t1, int c1, float& d0, float& d1) {
      const T* const x0 = u.rows + ((u.vt_begin + t0) * kMmaTile + c0) * a.dim;
      const T* const x1 = u.rows + ((u.vt_begin + t1) * kMmaTile + c1) * a.dim;
      exact_row_distances_ahead2<T, IP>(qtile + r0 * qstride, x0, qtile + r1 * qstride, x1, a.dim, d0, d1);
    };
    const auto flush = [&](int n) {
      rescore_listed_pairs<IP>(pr, rows_distance, rows_distances2, true, n, pairs, u.vt_begin * kMmaTile, q_row,
                               out_base, qbound);
    };
    for (int64_t vt = u.vt_begin; vt < u.vt_end; ++vt) {
      const int64_t v0 = vt * kMmaTile;
      const int vcount = u.rows_in(vt);
      const T* const tile_rows = u.rows + v0 * a.dim;
      const int buf0 = buf;  // the tile's first slice's buffer (the later query tiles' products read it)
      mark_kept_rows(a, l, v0, vcount, keep);  // read after the last slice's barrier
      float acc[kMI][kNI][4];
      zero_accumulators(acc);
      float xnorm[kCoalescedRows] = {};  // the thread's parts of its two rows' squared norms
      for (int d0 = 0; d0 < dim; d0 += kSlice, buf ^= 1) {
        const bool last = d0 + kSlice >= dim;
        // Buffer buf was last read two slices ago, before the previous slice's barrier; xraw, by
        // the previous tile's re-scoring, before its last barrier.
        if constexpr (NATIVE) {
          coalesced_store_raw16<T>(xs[buf], xv, xnorm);
        } else {
          if (WIDE && xraw != nullptr) coalesced_store_fp32(xraw, qstride, xv, d0, dim);
          if constexpr (kCentred) coalesced_centre(xv, centre, d0);
          coalesced_store_bf16<kF16>(xs[buf], xv, xnorm, true);
        }
        // WG: this slice's stores, and on a unit's first slice its query tiles', before the barrier
        // that lets the tensor cores read them.
        if constexpr (WG) wgmma_stores_visible();
        if (!last) {
          load_rows(tile_rows, vcount, d0 + kSlice);
        } else {
          if (vt + 1 < u.vt_end)  // the next tile's first slice travels over the epilogue
            load_rows(tile_rows + kMmaTile * a.dim, u.rows_in(vt + 1), 0);
          // The tile's largest squared norm (rows past its end copy its first row: they cannot
          // raise it): each lane's two rows, then the warp's other rows.
          coalesced_row_sums(xnorm);
          float xsq = fmaxf(xnorm[0], xnorm[1]);
          for (int o = 8; o < 32; o *= 2) xsq = fmaxf(xsq, __shfl_xor_sync(kFullMask, xsq, o));
          if (lane == 0) xmax_part[warp] = xsq;
        }
        if constexpr (WG) wgmma_wait_all();  // the previous slice's products: its buffer is staged next
        __syncthreads();  // the slice is staged (the last: and the tile's norms)
        if (last) {
          if (lane % 8 == 0)
#pragma unroll
            for (int h = 0; h < kCoalescedRows; ++h) {
              const int v = coalesced_row(h);
              xhalf[v] = keep[v] ? (IP ? 0.0f : 0.5f * xnorm[h]) : __int_as_float(0x7f800000);
              if constexpr (WIDE) xnorm_s[v] = keep[v] ? __fsqrt_ru(xnorm[h]) : 0.0f;
            }
          if (tid < pcount) {  // the previous tile's lowering (before this barrier) is in qbound
            float xmax = xmax_part[0];
#pragma unroll
            for (int w = 1; w < kThreads / 32; ++w) xmax = fmaxf(xmax, xmax_part[w]);
            if constexpr (WIDE)
              wide_row_thresholds<IP>(mg, qn2[tid], sqrtf(xmax), qbound[tid], pr.row_margins, rows_pr, tid);
            else
              prune_row_thresholds<IP>(mg, qn2[tid], sqrtf(xmax), qbound[tid], rows_pr, tid);
          } else if (tid < kQueries) {
            exclude_row_thresholds(rows_pr, tid);
          }
        }
        if constexpr (WG) {  // issued here, waited for before the next slice's barrier
          wgmma_slice_products<Products>(acc, q_at, x_at + buf * 2 * kBf16SlabBytes, d0 / kResidentSlabDims, nslab,
                                         b_off);
        } else if (wq < pcount) {
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int slab = d0 / kResidentSlabDims + j;
            if (slab >= nslab) break;
            mma_slab<Bf16Mma>(acc, q_at + slab * kBf16SlabBytes, x_at + (buf * 2 + j) * kBf16SlabBytes, a_off, b_off);
          }
        }
      }
      if constexpr (WG) wgmma_wait_all();
      __syncthreads();  // xhalf, the thresholds
      const auto epilogue = [&](int r0, int pc) {  // the wide pass has one query tile (r0 0)
        if constexpr (WIDE) return wide_tile_marks(acc, xhalf, xnorm_s, rows_pr, wq, wv, pc, pair_rows);
        return bf16_tile_epilogue<IP>(acc, xhalf, rows_pr, r0, qn2, q_row, out_base, pr, v0, wq, wv, pc, costs,
                                      written);
      };
      finish_row_tile<QTILES, Products>(acc, pcount, wq, epilogue, pr, rows_pr.below, written, costs, q_row, qbound,
                                        q_at + tile_bytes, tile_bytes, x_at, nslab, buf0, a_off, b_off);
      // The marks are complete (the barrier above). The next tile marks, and lists into pairs,
      // only after its slices' barriers.
      if constexpr (WIDE) {
        if (defer) {
          listed = list_marked_pairs(pair_rows, pairs, static_cast<int>(vt - u.vt_begin), listed, flush);
        } else {
          const int n = list_marked_pairs(pair_rows, pairs, 0, 0, flush);  // a tile's marks always fit
          __syncthreads();
          const auto distance = [&](int r, int, int c) {  // the same bits from either copy of the row
            const float* const q = qtile + r * qstride;
            return xraw != nullptr ? exact_row_distance_ahead<float, IP>(q, xraw + c * qstride, a.dim)
                                   : exact_row_distance_ahead<T, IP>(q, tile_rows + c * a.dim, a.dim);
          };
          rescore_listed_pairs<IP>(pr, distance, rows_distances2, false, n, pairs, v0, q_row, out_base, qbound);
          if (xraw != nullptr) __syncthreads();  // the next tile's first slice overwrites xraw
        }
      }
    }
    if (defer) {  // the unit's pairs; the next unit's first barrier follows their reads
      __syncthreads();
      flush(listed);
    }
  }
}

// The build of list_resident_kernel on wgmma or on mma.sync (wgmma_usable); native: its NATIVE
// build (resident_native), which exists for the narrow form of f16 and bf16 rows on wgmma only
// (else Errc::Internal).
template <class T, bool IP, int BLOCKS, bool WIDE = false, int QTILES = 1>
auto resident_kernel(bool wg, bool native) {
  if constexpr (!WIDE && (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>))
    if (native && wg) return list_resident_kernel<T, IP, BLOCKS, WIDE, QTILES, true, true>;
  if (native) fail(Errc::Internal, "the native pass is the narrow form's, on wgmma, for f16 or bf16 rows");
  return wg ? list_resident_kernel<T, IP, BLOCKS, WIDE, QTILES, true>
            : list_resident_kernel<T, IP, BLOCKS, WIDE, QTILES, false>;
}

template <class T>
void launch_resident_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                          const PruneState& prune, bool native) {
  const bool wg = wgmma_usable(ctx);
  const MarginTerms mg = native ? margin_terms_exact_operands(!ip, args.dim, std::is_same_v<T, Half>)
                                : margin_terms(!ip, args.dim, !ip, true);
  // The units' query tiles, as scan.cu tiled them (resident_query_tiles).
  const int qtiles = args.unit_queries / kMmaTile;
  if (qtiles != resident_query_tiles(args.dim, prune.exact) || args.unit_queries % kMmaTile != 0)
    fail(Errc::Internal, "the resident pass's units were tiled for another shape");
  const std::size_t dynamic = qtiles * resident_tile_bytes(static_cast<int>(args.dim));  // dim <= kResidentMaxDim
  const std::size_t largest = std::max(resident_tile_bytes(kResidentMaxDim),
                                       4 * resident_tile_bytes(static_cast<int>(kResidentGroupedMaxDim)));
  if (prune.exact) {  // the wide pass: one build, two blocks an SM (128 registers), its fp32 queries too
    const auto wide = ip ? resident_kernel<T, true, kResidentFallbackBlocks, true>(wg, native)
                         : resident_kernel<T, false, kResidentFallbackBlocks, true>(wg, native);
    // Deferring its re-scoring (PruneState::defer_rescore), the pass reads the rows from L2 and
    // leaves the fp32 row tile unwritten: it goes, and with it 33 KiB a block at 128 dimensions that
    // the SM can give L1, where the re-scored rows may still be.
    const std::size_t wide_bytes = prune.defer_rescore ? wide_query_bytes(args.dim) : wide_shared_bytes(args.dim);
    launch_resident_budget(ctx, stream, wide, wide, dynamic + wide_bytes,
                           std::max(resident_tile_bytes(static_cast<int>(kWideExactMaxDim)) +
                                        wide_shared_bytes(kWideExactMaxDim),
                                    resident_tile_bytes(static_cast<int>(kWideRawMaxDim)) +
                                        wide_shared_bytes(kWideRawMaxDim)),
                           args, mg, prune);
    return;
  }
  if (qtiles == 2) {  // at most 16 KiB of query tiles: three blocks fit
    const auto pair = ip ? resident_kernel<T, true, kResidentBlocks, false, 2>(wg, native)
                         : resident_kernel<T, false, kResidentBlocks, false, 2>(wg, native);
    launch_resident_budget(ctx, stream, pair, pair, dynamic, largest, args, mg, prune);
    return;
  }
  if (qtiles == 4) {  // up to 64 KiB of query tiles: two blocks an SM, 128 registers
    const auto four = ip ? resident_kernel<T, true, kResidentFallbackBlocks, false, 4>(wg, native)
                         : resident_kernel<T, false, kResidentFallbackBlocks, false, 4>(wg, native);
    launch_resident_budget(ctx, stream, four, four, dynamic, largest, args, mg, prune);
    return;
  }
  if (ip)
    launch_resident_budget(ctx, stream, resident_kernel<T, true, kResidentBlocks>(wg, native),
                           resident_kernel<T, true, kResidentFallbackBlocks>(wg, native), dynamic, largest, args, mg,
                           prune);
  else
    launch_resident_budget(ctx, stream, resident_kernel<T, false, kResidentBlocks>(wg, native),
                           resident_kernel<T, false, kResidentFallbackBlocks>(wg, native), dynamic, largest, args, mg,
                           prune);
}

}  // namespace ivfgpu::cuda::scan_detail
