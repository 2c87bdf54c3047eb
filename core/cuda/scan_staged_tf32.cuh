// The staged pruned pass for fp32 rows on tf32 wgmma, its operands copied by cp.async straight
// from global memory into the swizzled layout the tensor cores read (list_tf32_ring_kernel). It
// serves the shapes list_mma_kernel's pruned build would (scan_mma.cuh: past the resident tile's
// 512 dimensions, or L2 without centroids) where the rows and queries load four elements at a
// time and the device has wgmma. Included only by scan_tensor.cuh, which chooses it.
//
// Why: list_mma_kernel and list_pair_tile_kernel pass every element through registers (load,
// centre on the list's centroid, round to bf16, store): at d 960 with fp32 rows ncu found
// list_mma_kernel bound by that staging's latency and barriers (0.58 instructions issued a cycle,
// bench/RESULTS.md, session 54), with the tensor cores nearly idle. tf32 reads fp32 as it lies,
// so nothing needs converting: a ring of four stages keeps two slabs' copies in flight while a
// third is multiplied, and the threads only issue copies, products and the squared norms (read
// back from shared memory).
//
// The arithmetic: neither operand is centred; the tensor cores keep each operand's top 19 bits
// (an error below 2^-10 relatively, against bf16's 2^-8 on centred values) and accumulate in
// fp32: margin_terms(l2, dim) uncentred, the keys pass's. On the bench's mixture, where the
// centroid moves a row by less than it shortens it, this margin is about a quarter of the bf16
// pass's. The protocol is list_pair_tile_kernel's: 128-row steps of two 64-row sub-tiles, each
// warpgroup multiplying the 64 query rows by its own sub-tile (m64n64k8), bf16_tile_epilogue and
// lower_counted_bounds per sub-tile, one margin from the step's largest row norm.
//
// H200 (bench/RESULTS.md, session 55), 1M rows, k 10, against list_mma_kernel: d 960 316K ->
// 428K QPS at nprobe 16 and 130K -> 179K at 64, d 768 250K -> 354K. ncu at d 960, nprobe 16: the
// pass 20.1 ms (list_mma_kernel 29.7), issue slots 47% busy, 149 GB through L2 (7.4 TB/s), 6.6 G
// warp instructions; its first form (copies with per-row selects, no copies over the epilogue)
// took 25.7 ms and 8.7 G, with one warp in four eligible a cycle. Session 57 (ncu, natural
// clocks): L2 the busiest unit at 77% of peak; units of two query tiles took it to 55% (147 ->
// 104 GB) and descriptors stepped by one add the warp instructions from 6.7 G to 5.8 G, the pass
// 16.8 -> 15.4 ms; d 960 438-440K -> 453-467K QPS at nprobe 16, 172-176K -> 196-198K at 64.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "async_copy.cuh"
#include "scan_mma.cuh"
#include "scan_prune.cuh"
#include "scan_staged_pair.cuh"
#include "scan_tensor.hpp"
#include "wgmma.cuh"

namespace ivfgpu::cuda::scan_detail {

constexpr int kTf32Slab = 32;                                  // fp32 dimensions a slab: 128-byte rows
constexpr int kTf32RowBytes = kTf32Slab * 4;                   // a slab row
constexpr int kTf32QuerySlab = kMmaTile * kTf32RowBytes;       // 8 KiB: a query tile's 64 rows
constexpr int kTf32RowSlab = kPairRows * kTf32RowBytes;        // 16 KiB: the step's 128 rows
// A stage of the ring: the unit's QT query tiles' slab, then the step's rows' slab.
template <int QT>
constexpr int tf32_stage_bytes() { return QT * kTf32QuerySlab + kTf32RowSlab; }
// Four stages: slab g is multiplied while g + 1 and g + 2 copy and g - 1's products may still run,
// so the stage refilled (g + 2's, g - 2's before) was last read by products already waited for.
// Six stages (four slabs in flight) for the two-tile ring measured within noise of four (H200,
// session 57: d 960 461-471K against 453-467K QPS at nprobe 16, 196-197K either way at 64).
constexpr int kTf32Stages = 4;
constexpr int kTf32Ahead = kTf32Stages - 2;
template <int QT>
constexpr std::size_t tf32_ring_bytes() { return std::size_t{kTf32Stages} * tf32_stage_bytes<QT>(); }  // 96 / 128 KiB
// The sub-tiles' counted costs (2 QT of them) share the ring's first stages. A step's slab g goes
// to stage (g + 2) % 4, so that the next step's first two slabs, copied during this step's
// epilogue, land in the last two stages, clear of the costs; its third slab is copied into the
// first stage only after its first barrier, by when the costs have been read.
__host__ __device__ constexpr int tf32_stage_of(int g) { return (g + kTf32Ahead) % kTf32Stages; }
static_assert(2 * kPairCostBytes <= kTf32Ahead * tf32_stage_bytes<1>(), "the counted costs fit before the first slabs");
static_assert(4 * kPairCostBytes <= kTf32Ahead * tf32_stage_bytes<2>(), "the counted costs fit before the first slabs");
static_assert(tf32_stage_of(0) == kTf32Stages - kTf32Ahead, "a step's first slabs go to the last stages");

// QT: the query tiles a unit holds (a.unit_queries / kMmaTile). One: two warpgroups, warpgroup
// w multiplying the 64 query rows by the step's sub-tile w (two blocks an SM). Two: four
// warpgroups (512 threads, one block an SM), warpgroup w multiplying query tile w / 2 by sub-tile
// w % 2; each row slab copied then serves 128 queries and each query slab 128 rows (a third less
// traffic from L2 a product; pruned_kernel.hpp, tf32_ring_query_tiles, says when). A unit whose
// second tile is empty copies no query rows for it and its warpgroups multiply nothing.
//
// Copies: thread tid takes chunk tid % 8 of slab rows tid / 8 + 32 QT m (m < 2 for the query
// slab, m < 4 / QT for the row slab): a warp copies four whole 128-byte row slabs. The chunk's
// place in each of those rows is the same (the rows differ by multiples of eight): `chunk_at`.
template <bool IP, int QT>
__global__ void __launch_bounds__(kThreads * QT, QT == 1 ? 2 : 1)
    list_tf32_ring_kernel(TileArgs<float> a, MarginTerms mg, PruneState pr) {
  static_assert(QT == 1 || QT == 2, "a unit holds one or two query tiles");
  constexpr int kBlockThreads = kThreads * QT, kQueries = kMmaTile * QT;
  constexpr int kStageBytes = tf32_stage_bytes<QT>(), kQuerySlab = QT * kTf32QuerySlab;
  constexpr int kCopyStride = 32 * QT, kRowCopies = 4 / QT;  // a thread's copied rows' spacing; its row copies
  constexpr int kNormThreads = 2 * QT, kNormChunks = 4 / QT;  // threads summing a row's squared norm; their chunks
  // 1,024-byte aligned: the 128-byte swizzle assumes operands on 1,024-byte boundaries.
  extern __shared__ __align__(1024) unsigned char tf32_ring[];
  __shared__ unsigned long long written[2 * QT][kMmaTile];  // per (query tile, sub-tile), as list_pair_tile_kernel's
  __shared__ PruneRows<kQueries> rows_pr[2];
  __shared__ float qn2[kQueries];     // the queries' squared norms (fp32)
  __shared__ float xhalf[kPairRows];  // half each row's squared norm (L2; 0 for IP), +inf if excluded
  __shared__ bool keep[kPairRows];
  __shared__ int64_t q_row[kQueries], out_base[kQueries];
  __shared__ uint32_t qbound[kQueries];
  __shared__ float xmax_part[kBlockThreads / 32];
  if (wgmma_build_missing<true>()) return;  // code without wgmma never launches this kernel

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // The warpgroup, broadcast from lane 0 so that the compiler knows it is the same across the
  // warp and keeps what derives from it (the wgmma descriptors) in uniform registers: 4-8 fewer
  // registers, and d 960 471K -> 481-485K QPS at nprobe 16, 201-204K -> 209-211K at 64 (H200,
  // session 57; the descriptors had been moved to uniform registers before every wgmma).
  const int wg = __shfl_sync(kFullMask, warp / 4, 0);
  const int sub = wg % 2, qh = wg / 2, wq = (warp % 4) * 16;
  const int dim = static_cast<int>(a.dim);
  const int nslab = (dim + kTf32Slab - 1) / kTf32Slab;
  const uint32_t ring = static_cast<uint32_t>(__cvta_generic_to_shared(tf32_ring));
  if ((ring % 1024) != 0) __trap();  // the swizzle would read other bytes than the copies wrote
  const int copy_row = tid / 8, copy_chunk = tid % 8;
  const uint32_t chunk_at = static_cast<uint32_t>(copy_row * kTf32RowBytes + ((copy_chunk ^ (copy_row % 8)) << 4));
  // This warpgroup's operands' descriptors in stage 0 (wgmma_sw128_lo), stepped by stage and k step.
  const uint32_t q_lo0 = wgmma_sw128_lo(ring + qh * kTf32QuerySlab);
  const uint32_t x_lo0 = wgmma_sw128_lo(ring + kQuerySlab + sub * kMmaTile * kTf32RowBytes);
  constexpr uint32_t kStageLo = kStageBytes / 16;
  for (int i = tid; i < kMmaTile; i += kBlockThreads)
#pragma unroll
    for (int s = 0; s < 2 * QT; ++s) written[s][i] = 0;  // cleared by each reader

  const int64_t total = a.tile_off[a.nlist];
  __shared__ int64_t claimed;  // next_block_unit's
  for (int64_t t = blockIdx.x; t < total; t = next_block_unit(a, t, &claimed)) {
    const MmaUnit<float> u = mma_unit(a, t, true);  // a list's query tiles first (scan_mma.cuh)
    const int pcount = u.pcount;
    // Whether this warp's query tile holds queries, and (QT 2) whether the second tile does.
    const bool active = qh * kMmaTile < pcount, second = QT > 1 && pcount > kMmaTile;
    __syncthreads();  // the previous unit is done with the per-query arrays
    load_query_tile<kQueries>(a, u.list, u.qt, pcount, 0, q_row, out_base, a.unit_queries);
    if (tid < pcount) qbound[tid] = __ldcg(pr.bound + q_row[tid]);  // a bound read early is only higher
    __syncthreads();  // q_row
    // The thread's chunk of its two query rows (past pcount a copy of the unit's first query, whose
    // products no threshold reads).
    const float* my_q[2];
#pragma unroll
    for (int m = 0; m < 2; ++m) {
      const int r = copy_row + kCopyStride * m;
      my_q[m] = a.queries + q_row[r < pcount ? r : 0] * a.dim;
    }
    // The thread's rows of the step whose copies are being issued (past the list's end a copy of
    // the step's first row: xhalf excludes it, and it cannot raise the step's largest norm).
    const float* my_x[kRowCopies];
    const auto aim = [&](int64_t v0) {
      const int vtotal = u.rows_at(v0, kPairRows);
#pragma unroll
      for (int m = 0; m < kRowCopies; ++m) {
        const int r = copy_row + kCopyStride * m;
        my_x[m] = u.rows + (v0 + (r < vtotal ? r : 0)) * a.dim;
      }
    };
    // Slab g's copies into its stage, as one group: 16-byte copies; past dim zeros (from the row's
    // start, a valid address that is not read). QT 2: the second tile's only where it holds queries.
    const auto issue = [&](int g) {
      const int j = g * kTf32Slab + 4 * copy_chunk;
      const int bytes = j < dim ? 16 : 0, at = j < dim ? j : 0;
      const uint32_t q_at = ring + tf32_stage_of(g) * kStageBytes + chunk_at, x_at = q_at + kQuerySlab;
      copy16_async(q_at, my_q[0] + at, bytes);
      if (QT == 1 || second) copy16_async(q_at + kCopyStride * kTf32RowBytes, my_q[1] + at, bytes);
#pragma unroll
      for (int m = 0; m < kRowCopies; ++m) copy16_async(x_at + m * kCopyStride * kTf32RowBytes, my_x[m] + at, bytes);
    };
    // A step's first slabs, into stages the counted costs do not share (tf32_stage_of).
    const auto start_step = [&](int64_t v0) {
      aim(v0);
#pragma unroll
      for (int g = 0; g < kTf32Ahead; ++g) {
        if (g < nslab) issue(g);
        copies_commit();
      }
    };
    start_step(u.vt_begin * kMmaTile);
    for (int64_t vt = u.vt_begin; vt < u.vt_end; vt += 2) {  // chunks hold an even number of tiles
      const int64_t v0 = vt * kMmaTile;
      const int vtotal = u.rows_at(v0, kPairRows);
      const bool first_step = vt == u.vt_begin;
      __syncthreads();  // the previous step is done with its costs, keep and xhalf
      mark_step_rows<kBlockThreads>(a, u.list, v0, vtotal, keep);
      float acc[1][8][4];
      zero_accumulators(acc);
      // Squared norms read back from the stages: row tid / kNormThreads, kNormChunks chunks from
      // kNormChunks (tid % kNormThreads); the first step's query tid / 4, chunks 2 (tid % 4) .. + 1
      // (a warp's reads conflict-free).
      float xsum = 0.0f, qsum = 0.0f;
      const int nrow = tid / kNormThreads, nq_row = tid / 4;
      for (int g = 0; g < nslab; ++g) {
        const int st = tf32_stage_of(g);
        copies_wait<kTf32Ahead - 1>();  // slab g arrived (each iteration commits one group)
        wgmma_stores_visible();         // the copies' writes before the tensor cores' reads
        wgmma_wait<1>();                // slab g - 2's products are done: its stage is refilled below
        __syncthreads();
        if (active) {
          const uint32_t q_lo = q_lo0 + st * kStageLo, x_lo = x_lo0 + st * kStageLo;
          wgmma_fence();
#pragma unroll
          for (int s = 0; s < kTf32Slab / 8; ++s)  // k steps of 8 dimensions: 32 bytes, two descriptor units
            wgmma_m64n64k8_tf32(acc, wgmma_sw128_of_lo(q_lo + 2 * s), wgmma_sw128_of_lo(x_lo + 2 * s));
          wgmma_commit();
        }
        if (g + kTf32Ahead < nslab) issue(g + kTf32Ahead);
        copies_commit();
        const unsigned char* stage = tf32_ring + st * kStageBytes;
#pragma unroll
        for (int i = 0; i < kNormChunks; ++i) {
          const int c = kNormChunks * (tid % kNormThreads) + i;
          add_squares(xsum, *reinterpret_cast<const float4*>(stage + kQuerySlab + nrow * kTf32RowBytes +
                                                                   ((c ^ (nrow % 8)) << 4)));
        }
        if (first_step)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int c = 2 * (tid % 4) + i;
            add_squares(qsum, *reinterpret_cast<const float4*>(stage + nq_row * kTf32RowBytes +
                                                                     ((c ^ (nq_row % 8)) << 4)));
          }
      }
      wgmma_wait<0>();
#pragma unroll
      for (int o = 1; o < kNormThreads; o *= 2) xsum += __shfl_xor_sync(kFullMask, xsum, o);
      if (first_step) {
        qsum += __shfl_xor_sync(kFullMask, qsum, 1);
        qsum += __shfl_xor_sync(kFullMask, qsum, 2);
        if (tid % 4 == 0) qn2[nq_row] = qsum;  // the same queries on the unit's later steps
      }
      if (tid % kNormThreads == 0)
        xhalf[nrow] = keep[nrow] ? (IP ? 0.0f : 0.5f * xsum) : __int_as_float(0x7f800000);
      // The step's largest squared norm (rows past the list's end copy its first: no higher).
      float xsq = xsum;
      for (int o = kNormThreads; o < 32; o *= 2) xsq = fmaxf(xsq, __shfl_xor_sync(kFullMask, xsq, o));
      if (lane == 0) xmax_part[warp] = xsq;
      __syncthreads();  // the step's products and norm reads are done: the next step's first copies
      if (vt + 2 < u.vt_end) start_step(v0 + kPairRows);  // travel over the epilogue
      settle_pair_step<IP, QT>(acc, mg, xmax_part, qn2, xhalf, rows_pr, written, tf32_ring, q_row, out_base, qbound,
                               pr, v0, pcount, sub, wq, qh);
    }
  }
}

// A template so that only the fp32 scan_tiles file, which launches it, compiles the kernel. The
// unit's query tiles come from args.unit_queries (scan.cu tiled the units by them).
template <class T>
void launch_tf32_ring_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, const TileArgs<T>& args,
                           const PruneState& prune) {
  static_assert(std::is_same_v<T, float>, "the tf32 ring reads fp32 rows");
  // Uncentred tf32 operands: the keys pass's margin.
  const MarginTerms mg = margin_terms(!ip, args.dim);
  if (args.unit_queries == 2 * kMmaTile) {
    launch_step_kernel(ctx, stream, ip ? list_tf32_ring_kernel<true, 2> : list_tf32_ring_kernel<false, 2>,
                       tf32_ring_bytes<2>(), args, mg, prune, 2 * kThreads);
    return;
  }
  if (args.unit_queries != kMmaTile) fail(Errc::Internal, "the tf32 ring's units were tiled for another pass");
  launch_step_kernel(ctx, stream, ip ? list_tf32_ring_kernel<true, 1> : list_tf32_ring_kernel<false, 1>,
                     tf32_ring_bytes<1>(), args, mg, prune);
}

}  // namespace ivfgpu::cuda::scan_detail
