// The tensor-core form of stage C and the exact refinement behind it (scan_tensor.hpp); included
// only by the scan_tiles_<type>.cu files, which instantiate both for their type.
//
// First pass: each block takes one (list, 64-query tile, 64-vector tile) of the list-major
// schedule, stages both tiles in shared memory as fp32 (rows decoded), and multiplies them on
// tensor cores in TF32 with fp32 accumulation (mma.sync m16n8k8, scan_mma.cuh; the WMMA 16x16x8
// form below is kept for A/B runs, IVFGPU_SCAN=wmma), while SIMT threads sum the exact
// fp32 squared norms of the same staged rows. The epilogue turns each dot product into a
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

#include <mma.h>

#include <cmath>

#include "scan_mma.cuh"
#include "scan_tensor.hpp"
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {

constexpr int kTcTileQ = 64;
constexpr int kTcTileV = 64;
constexpr int kTcTileD = 32;
constexpr int kTcPitch = kTcTileD + 4;  // 36 floats: rows stay 16-byte aligned, fragments 32-byte
constexpr int kTcOutPitch = kTcTileV + 4;

// Four-element staging of one 64-row tile slice: thread tid holds slots tid and tid + 256 of
// the 64 x 8 float4 grid, i.e. rows tid / 8 and tid / 8 + 32, columns (tid % 8) * 4 .. + 3.
template <class R, class RowPtr>
__device__ __forceinline__ void load_slice4(float4 (&v)[2], RowPtr row_ptr, int64_t d0, int64_t dim) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int r = e / (kTcTileD / 4), j = (e % (kTcTileD / 4)) * 4;
    const R* p = row_ptr(r);
    v[i] = (p != nullptr && d0 + j < dim) ? DeviceElement<R>::load4(p + d0 + j) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
__device__ __forceinline__ void store_slice4(float (*s)[kTcPitch], const float4 (&v)[2], float (&norm)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = threadIdx.x + i * kThreads;
    const int r = e / (kTcTileD / 4), j = (e % (kTcTileD / 4)) * 4;
    *reinterpret_cast<float4*>(&s[r][j]) = v[i];
    norm[i] = fmaf(v[i].x, v[i].x, fmaf(v[i].y, v[i].y, fmaf(v[i].z, v[i].z, fmaf(v[i].w, v[i].w, norm[i]))));
  }
}
// The eight lanes of a row hold its partial norms: sum them, lane 0 of the eight writes.
__device__ __forceinline__ void write_norms4(float* out, float (&norm)[2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float v = norm[i];
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    v += __shfl_xor_sync(0xffffffffu, v, 2);
    v += __shfl_xor_sync(0xffffffffu, v, 4);
    if (threadIdx.x % 8 == 0) out[(threadIdx.x + i * kThreads) / 8] = v;
  }
}

// Element-wise staging (dimensions not a multiple of four, or unaligned rows).
template <class R, class RowPtr>
__device__ __forceinline__ void stage_slice1(float (*s)[kTcPitch], RowPtr row_ptr, int64_t d0, int64_t dim) {
  for (int e = threadIdx.x; e < 64 * kTcTileD; e += kThreads) {
    const int r = e / kTcTileD, j = e % kTcTileD;
    const R* p = row_ptr(r);
    s[r][j] = (p != nullptr && d0 + j < dim) ? DeviceElement<R>::load1(p + d0 + j) : 0.0f;
  }
}

// 64 x 64 tiles of (query, row) pairs: warp w multiplies rows 16 * (w / 2) .. + 16 of the query
// tile by rows 32 * (w % 2) .. + 32 of the vector tile. Staging is pipelined: the next slice of
// 32 dimensions is loaded into registers while the tensor cores work on the current one. Two
// blocks per SM (registers capped at 128).
template <class T, bool IP>
__global__ void __launch_bounds__(kThreads, 2) list_tensor_kernel(TileArgs<T> a, MarginTerms mg, float* list_norm) {
  using namespace nvcuda;
  __shared__ __align__(32) float qs[kTcTileQ][kTcPitch];
  __shared__ __align__(32) float xs[kTcTileV][kTcPitch];
  __shared__ __align__(32) float dots[kTcTileQ][kTcOutPitch];
  __shared__ float qn2[kTcTileQ], xn2[kTcTileV], qlen[kTcTileQ];
  __shared__ int64_t out_base[kTcTileQ];
  __shared__ int64_t q_row[kTcTileQ];
  __shared__ bool keep[kTcTileV];
  const int tid = threadIdx.x, warp = tid / 32;
  const int wr = (warp / 2) * 16, wc = (warp % 2) * 32;
  const int64_t total = a.tile_off[a.nlist];
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t l = unit_of(a.tile_off, a.nlist, t), size = a.list_size[l];
    const int64_t nvt = (size + kTcTileV - 1) / kTcTileV;
    const int64_t local = t - a.tile_off[l];
    const int64_t qt = local / nvt, v0 = (local % nvt) * kTcTileV;
    const int64_t prem = a.pair_count[l] - qt * kTcTileQ;
    const int pcount = static_cast<int>(prem < kTcTileQ ? prem : kTcTileQ);
    const int vcount = static_cast<int>(size - v0 < kTcTileV ? size - v0 : kTcTileV);
    const T* x = a.vectors + (a.list_start[l] + v0) * a.dim;
    __syncthreads();  // the previous tile is done with the shared arrays
    load_query_tile<kTcTileQ>(a, l, qt, pcount, v0, q_row, out_base);
    if (tid >= kTcTileQ && tid < kTcTileQ + kTcTileV) {
      const int v = tid - kTcTileQ;
      bool ok = v < vcount;
      if (ok && a.removed != nullptr) {
        const int64_t slot = a.list_start[l] + v0 + v;
        if ((a.removed[slot >> 6] >> (slot & 63)) & 1u) ok = false;
      }
      if (ok && a.filter != 0) ok = a.filter_set.contains(a.ids[a.list_start[l] + v0 + v]) == (a.filter == 1);
      keep[v] = ok;
    }
    __syncthreads();
    const auto q_ptr = [&](int r) -> const float* {
      const int64_t q = q_row[r];
      return q >= 0 ? a.queries + q * a.dim : nullptr;
    };
    const auto x_ptr = [&](int r) -> const T* { return r < vcount ? x + r * a.dim : nullptr; };
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2];
    wmma::fill_fragment(acc[0], 0.0f);
    wmma::fill_fragment(acc[1], 0.0f);
    float qnorm[2] = {0.0f, 0.0f}, xnorm[2] = {0.0f, 0.0f};
    float4 qv[2], xv[2];
    if (a.vec4) {
      load_slice4<float>(qv, q_ptr, 0, a.dim);
      load_slice4<T>(xv, x_ptr, 0, a.dim);
    }
    for (int64_t d0 = 0; d0 < a.dim; d0 += kTcTileD) {
      if (a.vec4) {
        store_slice4(qs, qv, qnorm);
        store_slice4(xs, xv, xnorm);
      } else {
        stage_slice1<float>(qs, q_ptr, d0, a.dim);
        stage_slice1<T>(xs, x_ptr, d0, a.dim);
      }
      __syncthreads();
      if (a.vec4 && d0 + kTcTileD < a.dim) {  // the next slice travels while this one is multiplied
        load_slice4<float>(qv, q_ptr, d0 + kTcTileD, a.dim);
        load_slice4<T>(xv, x_ptr, d0 + kTcTileD, a.dim);
      }
      if (!a.vec4 && tid < kTcTileQ + kTcTileV) {
        const float* row = tid < kTcTileQ ? qs[tid] : xs[tid - kTcTileQ];
        float sum = 0.0f;
        for (int j = 0; j < kTcTileD; ++j) sum = fmaf(row[(j + tid) % kTcTileD], row[(j + tid) % kTcTileD], sum);
        qnorm[0] += sum;  // thread tid's row (query row tid, or vector row tid - 64)
      }
      if (wr < pcount) {
#pragma unroll
        for (int k0 = 0; k0 < kTcTileD; k0 += 8) {
          wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
          // No explicit rounding to TF32: the tensor cores read the top 19 bits (truncation),
          // which candidate_margin already bounds, and the conversions cost more ALU issue
          // slots than the multiplies (ncu: the ALU pipe busiest, IPC 2.1).
          wmma::load_matrix_sync(fa, &qs[wr][k0], kTcPitch);
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
            wmma::load_matrix_sync(fb, &xs[wc + 16 * c][k0], kTcPitch);
            wmma::mma_sync(acc[c], fa, fb, acc[c]);
          }
        }
      }
      __syncthreads();
    }
    if (wr < pcount) {
      wmma::store_matrix_sync(&dots[wr][wc], acc[0], kTcOutPitch, wmma::mem_row_major);
      wmma::store_matrix_sync(&dots[wr][wc + 16], acc[1], kTcOutPitch, wmma::mem_row_major);
    }
    if (a.vec4) {
      write_norms4(qn2, qnorm);
      write_norms4(xn2, xnorm);
    } else if (tid < kTcTileQ) {
      qn2[tid] = qnorm[0];
    } else if (tid < kTcTileQ + kTcTileV) {
      xn2[tid - kTcTileQ] = qnorm[0];
    }
    __syncthreads();
    if (tid < kTcTileQ) {
      qlen[tid] = sqrtf(qn2[tid]);
    } else if (tid < kTcTileQ + kTcTileV && tid - kTcTileQ < vcount) {
      atomic_max_nonneg(list_norm + l, sqrtf(xn2[tid - kTcTileQ]));
    }
    __syncthreads();
    // Thread tid writes column c of rows tid / 64, + 4, ...: consecutive threads, consecutive
    // columns of one row.
    const int c = tid % kTcTileV;
    const float xsq = xn2[c], xl = sqrtf(xsq);
    const bool kept = c < vcount && keep[c];
    for (int r = tid / kTcTileV; r < pcount; r += kThreads / kTcTileV) {
      if (c >= vcount) break;
      const float dot = dots[r][c];
      const float qsq = qn2[r];
      const float m = candidate_margin(mg, qlen[r], xl);
      // The pessimistic key: a distance no smaller, a similarity no larger, than the exact one.
      const float key = IP ? dot - m : (qsq + xsq - 2.0f * dot) + m;
      a.cand.dist[out_base[r] + c] = kept ? key : a.excluded;
    }
  }
}

template <class T>
void launch_tensor_scan(const DeviceContext& ctx, cudaStream_t stream, bool ip, bool wmma, const TileArgs<T>& args,
                        float* list_norm) {
  const auto kernel = wmma ? (ip ? list_tensor_kernel<T, true> : list_tensor_kernel<T, false>)
                           : (ip ? list_mma_kernel<T, true> : list_mma_kernel<T, false>);
  const int per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(kernel), kThreads, 0);
  const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * ctx.limits().sm_count);
  kernel<<<grid, kThreads, 0, stream>>>(args, margin_terms(!ip, args.dim), list_norm);
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
      const T* xr = a.vectors + (a.list_start[l] + row) * a.dim;
      if constexpr (INT) {
        long long total = 0;
        for (int64_t j = 0; j < a.dim; ++j) {
          const long long qi = __float2ll_rn(query[j]);
          const long long xi = __float2ll_rn(DeviceElement<T>::load1(xr + j));
          total += IP ? qi * xi : (qi - xi) * (qi - xi);
        }
        keys[pos] = __ll2float_rn(total);
      } else {
        float acc = 0.0f;
        for (int64_t j = 0; j < a.dim; ++j) {
          const float xv = DeviceElement<T>::load1(xr + j);
          if constexpr (IP) {
            acc = fmaf(query[j], xv, acc);
          } else {
            const float diff = query[j] - xv;
            acc = fmaf(diff, diff, acc);
          }
        }
        keys[pos] = acc;
      }
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
