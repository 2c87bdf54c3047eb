// The tensor-core first pass (scan_tensor.cuh) on mma.sync: m16n8k8 TF32 for the keys pass,
// m16n8k16 bf16 for the pruned pass (below, BF16); included only by scan_tensor.cuh. Work
// unit: one list, 64-query tile, 64-row tile.
//
// Why mma.sync and not WMMA: WMMA's TF32 fragments load one float per instruction (12 shared
// loads per 4 tensor-core instructions), and ncu showed a WMMA pass bound by that issue rate,
// not by the tensor cores; on the H100 this pass replaced it at 1.15x its speed at d = 960
// (bench/RESULTS.md).
//
// Fragments come from ldmatrix: an m8n8 .b16 matrix is eight 16-byte rows, and lane i receives
// the 32-bit word (row i / 4, word i % 4). Read as fp32, that is exactly the TF32 fragment
// layout (row g = lane / 4, column t = lane % 4), so one ldmatrix.x4 fills an A fragment's four
// registers (rows g and g + 8, columns t and t + 4) and one fills a B fragment pair, with no
// register moves between the load and the mma (a 16-byte shared load per row, as before, put
// rows g and g + 8 in different register quads: four moves per mma).
//
// Shared layout: a 32-dimension slice of the tile is two slabs of 16 dimensions, each
// [64 rows][16] floats, with the four 16-byte chunks of row r stored in the order
// chunk ^ ((r / 2) % 4) (slab_col). The eight rows that one ldmatrix phase reads at one chunk
// then fall in eight different bank quads, and so do the two rows that a quarter-warp's
// 16-byte staging stores write (a padded pitch of 20 floats served ldmatrix but not the stores).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "element_traits.cuh"
#include "scan_prune.cuh"
#include "scan_tensor.hpp"
#include "scan_tiles.cuh"
#include "wgmma.cuh"

namespace ivfgpu::cuda::scan_detail {

constexpr int kMmaSlab = 16;  // TF32 dimensions per shared slab: two k steps of the mma
// Dimensions staged per step: two slabs, of 16 fp32 (TF32) or 32 bf16 dimensions (BF16, below).
template <bool BF16>
constexpr int kMmaSlice = BF16 ? 64 : 32;
template <bool BF16>
constexpr int kMmaVecs = BF16 ? 4 : 2;  // float4 a thread stages per slice

// Float keys of non-negative floats compare like their bits: atomicMax on the bits.
__device__ __forceinline__ void atomic_max_nonneg(float* at, float v) {
  atomicMax(reinterpret_cast<int*>(at), __float_as_int(v));
}

// The tensor-core multiplies, one k step each, as policies (mma_slab takes one): TF32 m16n8k8
// for the keys pass, bf16 m16n8k16 for the pruned pass, 8 or 16 dimensions from the same bytes
// (the int8 pass's, m16n8k32, is ImmaOps in scan_imma.cuh).
struct Tf32Mma {
  __device__ static __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    // The operands are fp32 bit patterns: the tensor cores read their top 19 bits (truncation),
    // which candidate_margin bounds.
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
// m16n8k16 on 16-bit operands: bf16 (F16: f16). Their products are exact in fp32; the roundings
// to the type, if any (bf16: at most 2^-8 of each operand, relatively; f16: 2^-11, and a
// subnormal the tensor cores may flush), and the sums are what candidate_margin bounds
// (margin_terms, margin_terms_f16, margin_terms_exact_operands).
template <bool F16>
struct Mma16 {
  __device__ static __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#define IVFGPU_MMA_16BIT(TYPE)                                                                                    \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
               "{%0,%1,%2,%3};\n"                                                                                  \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                   \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
    if constexpr (F16)
      IVFGPU_MMA_16BIT("f16");
    else
      IVFGPU_MMA_16BIT("bf16");
#undef IVFGPU_MMA_16BIT
  }
};
using Bf16Mma = Mma16<false>;
using F16Mma = Mma16<true>;
template <bool BF16>
using MmaOp = std::conditional_t<BF16, Bf16Mma, Tf32Mma>;

// The place of dimension j (< 16) of staged row r in its slab row (see the layout above).
__device__ __forceinline__ int slab_col(int r, int j) { return ((((j >> 2) ^ (r >> 1)) & 3) << 2) | (j & 3); }

// Four 8 x 4 fp32 matrices from shared memory (lane i gives the address of matrix i / 8's row
// i % 8): register j holds matrix j's word (lane / 4, lane % 4).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(at));
}

// Thread tid stages row tid / 4 of the slice: its float4 belong to one row, so its partial
// norm is that row's. TF32: dimensions slab * 16 + (tid % 4) * 4 .. + 3 for slab 0 and 1; BF16
// (slabs of 32 dimensions, below): slab * 32 + (tid % 4) * 8 .. + 7, which is the 16-byte chunk
// tid % 4 of the slab once converted. Its row pointer is resolved once per tile, already offset
// to its columns. A tile row past the last (no query, no row) stages a copy of the tile's first
// row instead of zeros: its products and norm are never read (the epilogue skips query rows
// past pcount and rows not kept), and the loads then need no predicate.
template <bool BF16>
__device__ __forceinline__ int mma_thread_col() {
  return (threadIdx.x % 4) * (BF16 ? 8 : 4);
}
// Where the thread's float4 number i starts, from its first column.
template <bool BF16>
__device__ __forceinline__ constexpr int mma_vec_offset(int i) {
  return BF16 ? (i / 2) * 32 + (i % 2) * 4 : i * kMmaSlab;
}
template <bool BF16, class R>
__device__ __forceinline__ const R* mma_thread_row(const R* row, const R* first) {
  return (row != nullptr ? row : first) + mma_thread_col<BF16>();
}
// The same for a tile of `count` consecutive rows of `dim` elements from `first`.
template <bool BF16, class R>
__device__ __forceinline__ const R* mma_tile_row(const R* first, int count, int64_t dim) {
  const int r = static_cast<int>(threadIdx.x / 4);
  return first + (r < count ? r : 0) * dim + mma_thread_col<BF16>();
}
template <bool BF16, class R>
__device__ __forceinline__ void mma_load_slice(float4 (&v)[kMmaVecs<BF16>], const R* p, int d0, int dim) {
  if (d0 + kMmaSlice<BF16> <= dim) {  // a whole slice: no dimension past the row's end
#pragma unroll
    for (int i = 0; i < kMmaVecs<BF16>; ++i) v[i] = DeviceElement<R>::load4(p + d0 + mma_vec_offset<BF16>(i));
    return;
  }
  const int c = mma_thread_col<BF16>();
#pragma unroll
  for (int i = 0; i < kMmaVecs<BF16>; ++i) {
    const int j = d0 + mma_vec_offset<BF16>(i);
    v[i] = j + c < dim ? DeviceElement<R>::load4(p + j) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
__device__ __forceinline__ void add_squares(float& sum, const float4& v) {
  sum = fmaf(v.x, v.x, fmaf(v.y, v.y, fmaf(v.z, v.z, fmaf(v.w, v.w, sum))));
}
// norm: whether to add the staged values' squares to `sum` (a unit's query norms are summed
// on its first row tile only).
__device__ __forceinline__ void mma_store_slice(float (*s)[kMmaTile][kMmaSlab], const float4 (&v)[2], float& sum,
                                                bool norm) {
  const int r = threadIdx.x / 4, c = (threadIdx.x % 4) * 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    *reinterpret_cast<float4*>(&s[i][r][slab_col(r, c)]) = v[i];
    if (norm) add_squares(sum, v[i]);
  }
}

// BF16 operands (the pruned pass). A slab holds 32 dimensions of bf16, 64 bytes a row, chunk c
// (dimensions 8c .. 8c + 7) of row r stored at chunk c ^ ((r / 2) % 4): the byte layout of a
// TF32 slab. An m16n8k16 bf16 fragment takes from an 8 x 8 .b16 ldmatrix matrix exactly what an
// m16n8k8 TF32 fragment takes from the same bytes read as 8 x 4 words, so the lanes' ldmatrix
// addresses are the same; each k step covers 16 dimensions instead of 8.
// Round to nearest even, two at a time: lo goes to the lower half (the lower dimension).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// The same to f16 (the f16 seed; the native pass's f16 rows and queries, exact there).
__device__ __forceinline__ uint32_t pack_f16(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// The 16-bit operands a slab holds: bf16, or f16 (F16: the native pass on f16 rows, scan_resident.cuh).
template <bool F16>
__device__ __forceinline__ uint32_t pack16(float lo, float hi) {
  return F16 ? pack_f16(lo, hi) : pack_bf16(lo, hi);
}
constexpr int kBf16SlabBytes = kMmaTile * 64;
__device__ __forceinline__ uint32_t bf16_chunk_at(int r, int chunk) { return r * 64 + (((chunk ^ (r >> 1)) & 3) << 4); }
// The squares are summed from the fp32 values, before they are rounded to bf16 (F16: to f16).
template <bool F16 = false>
__device__ __forceinline__ void mma_store_slice_bf16(unsigned char* slice, const float4 (&v)[kMmaVecs<true>],
                                                     float& sum, bool norm) {
  const int r = threadIdx.x / 4;
#pragma unroll
  for (int slab = 0; slab < 2; ++slab) {
    const float4 &lo = v[2 * slab], &hi = v[2 * slab + 1];
    *reinterpret_cast<uint4*>(slice + slab * kBf16SlabBytes + bf16_chunk_at(r, threadIdx.x % 4)) =
        make_uint4(pack16<F16>(lo.x, lo.y), pack16<F16>(lo.z, lo.w), pack16<F16>(hi.x, hi.y), pack16<F16>(hi.z, hi.w));
    if (norm) {
      add_squares(sum, lo);
      add_squares(sum, hi);
    }
  }
}
// Element-wise staging (dimensions not a multiple of four, or unaligned rows).
// centre: the list's centroid staged in shared memory (moved off every value), or nullptr.
template <class R, class RowPtr>
__device__ __forceinline__ float mma_stage_value(RowPtr row_ptr, int r, int64_t j, int64_t dim, const float* centre) {
  const R* p = row_ptr(r);
  float v = 0.0f;
  if (p != nullptr && j < dim) {
    v = DeviceElement<R>::load1(p + j);
    if (centre != nullptr) v -= centre[j];
  }
  return v;
}
template <class R, class RowPtr>
__device__ __forceinline__ void mma_stage_slice1(float (*s)[kMmaTile][kMmaSlab], RowPtr row_ptr, int64_t d0,
                                                 int64_t dim, const float* centre) {
  for (int e = threadIdx.x; e < kMmaTile * kMmaSlice<false>; e += kThreads) {
    const int r = e / kMmaSlice<false>, j = e % kMmaSlice<false>;
    s[j / kMmaSlab][r][slab_col(r, j % kMmaSlab)] = mma_stage_value<R>(row_ptr, r, d0 + j, dim, centre);
  }
}
// BF16: a warp stages whole rows (one slab per step), so it also sums each row's squares (fp32,
// before rounding) into norms[r] when norms is given: each row has one writer, lane 0 of its warp.
template <class R, class RowPtr>
__device__ __forceinline__ void mma_stage_slice1_bf16(unsigned char* slice, RowPtr row_ptr, int64_t d0, int64_t dim,
                                                      const float* centre, float* norms) {
  const int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < kMmaTile; r += kThreads / 32) {
    float sq = 0.0f;
#pragma unroll
    for (int slab = 0; slab < 2; ++slab) {
      const float v = mma_stage_value<R>(row_ptr, r, d0 + slab * 32 + lane, dim, centre);
      uint16_t h;
      asm("cvt.rn.bf16.f32 %0, %1;\n" : "=h"(h) : "f"(v));
      *reinterpret_cast<uint16_t*>(slice + slab * kBf16SlabBytes + bf16_chunk_at(r, lane / 8) + (lane % 8) * 2) = h;
      sq = fmaf(v, v, sq);
    }
    if (norms != nullptr) {
      for (int o = 16; o > 0; o /= 2) sq += __shfl_xor_sync(0xffffffffu, sq, o);
      if (lane == 0) norms[r] += sq;
    }
  }
}
// Row-coalesced bf16 staging of a 64-row tile (four-element loads): thread tid stages two rows,
// coalesced_row(h) = 32 h + 4 (tid / 32) + (tid % 32) / 8 for h = 0, 1, its float4 i (0 .. 3)
// holding dimensions 32 (i % 2) + coalesced_col() .. + 3 of row h = i / 2, so that each load of a
// warp reads four rows' 32-dimension halves of the slice whole: four full 128-byte lines of fp32
// rows (f16 and bf16: four half lines, the other halves the next load's). The thread-per-row-
// quarter layout (mma_load_slice) reads eight rows a load, half of each line it touches for fp32
// and a quarter for f16, the rest found in L1 by a later load: twice or four times the L1
// wavefronts for the same bytes. ncu had the staged pass at d 960 bound by the L1/shared pipes
// (92.8% busy, session 52). A warp's 8-byte stores write four rows' 64 bytes of one slab: two
// wavefronts, as mma_store_slice_bf16's did for the same bytes.
__device__ __forceinline__ int coalesced_row(int h) {
  return 32 * h + 4 * static_cast<int>(threadIdx.x / 32) + static_cast<int>(threadIdx.x % 32) / 8;
}
__device__ __forceinline__ int coalesced_col() { return 4 * static_cast<int>(threadIdx.x % 8); }
constexpr int kCoalescedRows = 2;  // rows a thread stages
// One slab (32 dimensions from d0) of the thread's rows: v[h] holds row coalesced_row(h)'s
// dimensions d0 + coalesced_col() .. + 3, row h at row_of(h) (never null; h a constant once
// unrolled, so an array of pointers stays in registers), zeros past dim (a multiple of four).
template <class R, class RowOf>
__device__ __forceinline__ void coalesced_load_slab(float4 (&v)[kCoalescedRows], RowOf&& row_of, int d0, int dim) {
  const int j = d0 + coalesced_col();
  const bool inside = d0 + 32 <= dim || j < dim;
#pragma unroll
  for (int h = 0; h < kCoalescedRows; ++h)
    v[h] = inside ? DeviceElement<R>::load4(row_of(h) + j) : make_float4(0.f, 0.f, 0.f, 0.f);
}
// The same for `count` consecutive rows of `dim` elements from `first`: a row past count stages a
// copy of the first (mma_tile_row's rule).
template <class R>
__device__ __forceinline__ void coalesced_load_tile_slab(float4 (&v)[kCoalescedRows], const R* first, int count,
                                                         int64_t dim, int d0) {
  const auto row_of = [&](int h) {
    const int r = coalesced_row(h);
    return first + (r < count ? r : 0) * dim;
  };
  coalesced_load_slab<R>(v, row_of, d0, static_cast<int>(dim));
}
__device__ __forceinline__ void coalesced_centre_slab(float4 (&v)[kCoalescedRows], const float* centre, int d0) {
  const float4 m = *reinterpret_cast<const float4*>(centre + d0 + coalesced_col());
#pragma unroll
  for (int h = 0; h < kCoalescedRows; ++h) v[h] = make_float4(v[h].x - m.x, v[h].y - m.y, v[h].z - m.z, v[h].w - m.w);
}
// Stores slab v at `slab` (rows of 64 bytes, from row 0); with `norm`, adds each value's square
// (fp32, before rounding) to sums[h], the thread's part of row coalesced_row(h)'s squared norm.
// F16: the slab holds f16 (pack16).
template <bool F16 = false>
__device__ __forceinline__ void coalesced_store_slab_bf16(unsigned char* slab, const float4 (&v)[kCoalescedRows],
                                                          float (&sums)[kCoalescedRows], bool norm) {
  const int c = coalesced_col();
#pragma unroll
  for (int h = 0; h < kCoalescedRows; ++h) {
    *reinterpret_cast<uint2*>(slab + bf16_chunk_at(coalesced_row(h), c / 8) + ((c % 8) / 4) * 8) =
        make_uint2(pack16<F16>(v[h].x, v[h].y), pack16<F16>(v[h].z, v[h].w));
    if (norm) add_squares(sums[h], v[h]);
  }
}
// A whole slice (two slabs) as the resident and 64-row staged passes hold it: float4 i is row
// i / 2's slab i % 2.
template <class R, class RowOf>
__device__ __forceinline__ void coalesced_load_slice(float4 (&v)[kMmaVecs<true>], RowOf&& row_of, int d0, int dim) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    float4 w[kCoalescedRows];
    coalesced_load_slab<R>(w, row_of, d0 + 32 * s, dim);
    v[s] = w[0];
    v[2 + s] = w[1];
  }
}
template <class R>
__device__ __forceinline__ void coalesced_load_tile(float4 (&v)[kMmaVecs<true>], const R* first, int count,
                                                    int64_t dim, int d0) {
  const auto row_of = [&](int h) {
    const int r = coalesced_row(h);
    return first + (r < count ? r : 0) * dim;
  };
  coalesced_load_slice<R>(v, row_of, d0, static_cast<int>(dim));
}
__device__ __forceinline__ void coalesced_centre(float4 (&v)[kMmaVecs<true>], const float* centre, int d0) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    float4 w[kCoalescedRows] = {v[s], v[2 + s]};
    coalesced_centre_slab(w, centre, d0 + 32 * s);
    v[s] = w[0];
    v[2 + s] = w[1];
  }
}
// Stores slice v at `slice` (two bf16 slabs of kBf16SlabBytes); with `norm`, adds each value's
// square (fp32, before rounding) to sums[h] (coalesced_store_slab_bf16; F16: f16 slabs).
template <bool F16 = false>
__device__ __forceinline__ void coalesced_store_bf16(unsigned char* slice, const float4 (&v)[kMmaVecs<true>],
                                                     float (&sums)[kCoalescedRows], bool norm) {
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const float4 w[kCoalescedRows] = {v[s], v[2 + s]};
    coalesced_store_slab_bf16<F16>(slice + s * kBf16SlabBytes, w, sums, norm);
  }
}
// The native pass's rows (scan_resident.cuh, NATIVE: f16 or bf16 rows multiplied as they are):
// coalesced_load_tile's threads and elements, each four kept as their 8 bytes (dim % 4 == 0: a
// thread's four are all in the row or all past it; zeros past dim), and stored as they are at
// coalesced_store_bf16's places: no decoding, centring or rounding but the squared norms' (the
// same values in the same order as coalesced_store_bf16 sums).
template <class R>
__device__ __forceinline__ void coalesced_load_tile_raw(uint2 (&v)[kMmaVecs<true>], const R* first, int count,
                                                        int64_t dim, int d0) {
  static_assert(sizeof(R) == 2, "two-byte rows");
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int j = d0 + 32 * s + coalesced_col();
#pragma unroll
    for (int h = 0; h < kCoalescedRows; ++h) {
      const int r = coalesced_row(h);
      const R* const row = first + (r < count ? r : 0) * dim;
      v[2 * h + s] = j < dim ? *reinterpret_cast<const uint2*>(row + j) : make_uint2(0u, 0u);
    }
  }
}
template <class R>
__device__ __forceinline__ void coalesced_store_raw16(unsigned char* slice, const uint2 (&v)[kMmaVecs<true>],
                                                      float (&sums)[kCoalescedRows]) {
  const int c = coalesced_col();
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int h = 0; h < kCoalescedRows; ++h) {
      const uint2 w = v[2 * h + s];
      *reinterpret_cast<uint2*>(slice + s * kBf16SlabBytes + bf16_chunk_at(coalesced_row(h), c / 8) +
                                ((c % 8) / 4) * 8) = w;
      add_squares(sums[h], DeviceElement<R>::unpack4(w));
    }
}
// Slice v (d0 on) as it was loaded, in fp32 rows of `stride` floats from `rows` (the wide pass's
// copy of its row tile): its values below dim (a multiple of four).
__device__ __forceinline__ void coalesced_store_fp32(float* rows, int stride, const float4 (&v)[kMmaVecs<true>],
                                                     int d0, int dim) {
#pragma unroll
  for (int i = 0; i < kMmaVecs<true>; ++i) {
    const int j = d0 + 32 * (i % 2) + coalesced_col();
    if (j < dim) *reinterpret_cast<float4*>(rows + coalesced_row(i / 2) * stride + j) = v[i];
  }
}
// The eight lanes of each row hold its parts: afterwards each of them holds the row's sum.
__device__ __forceinline__ void coalesced_row_sums(float (&sums)[kCoalescedRows]) {
#pragma unroll
  for (int h = 0; h < kCoalescedRows; ++h)
#pragma unroll
    for (int o = 1; o < 8; o *= 2) sums[h] += __shfl_xor_sync(0xffffffffu, sums[h], o);
}

// The centroid off this thread's two staged float4 (mma_load_slice's columns).
template <bool BF16>
__device__ __forceinline__ void mma_centre(float4 (&v)[kMmaVecs<BF16>], const float* centre, int d0) {
  const int c = mma_thread_col<BF16>();
#pragma unroll
  for (int i = 0; i < kMmaVecs<BF16>; ++i) {
    const float4 m = *reinterpret_cast<const float4*>(centre + d0 + mma_vec_offset<BF16>(i) + c);
    v[i] = make_float4(v[i].x - m.x, v[i].y - m.y, v[i].z - m.z, v[i].w - m.w);
  }
}

// Work unit t of a tensor-core pass (tensor_tiles): list `list` (`size` rows from `rows`),
// query tile qt of a.unit_queries (pcount queries), row tiles [vt_begin, vt_end). Every thread
// of the block calls it with the same t.
//
// A list's units run through its row chunks (kMmaUnitTiles row tiles each) for one query tile,
// then the next query tile, unless `tiles_fastest`: then through its query tiles for one chunk,
// then the next chunk, so that the blocks working at once on a large list read the same rows and
// most reads of a chunk after the first come from L2. list_mma_kernel takes that order: at
// d 960 it re-read the skewed mixture's large lists from DRAM once per 64-query tile (~60 GB a
// batch, ncu); this order ran 2-6% more queries a second there (H100, session 50). The resident
// and int8 passes keep the first (within noise at d 96 and 128, uint8 nprobe 16 2% slower:
// bench/RESULTS.md).
template <class T>
struct MmaUnit {
  int64_t list, size, qt, vt_begin, vt_end;
  int pcount;
  const T* rows;
  // The rows from position v0 in a step of at most `most` (the 128-row kernels' steps).
  __device__ __forceinline__ int rows_at(int64_t v0, int most) const {
    return static_cast<int>(size - v0 < most ? size - v0 : most);
  }
  // The rows of row tile vt (at most kMmaTile).
  __device__ __forceinline__ int rows_in(int64_t vt) const { return rows_at(vt * kMmaTile, kMmaTile); }
};
template <class T>
__device__ __forceinline__ MmaUnit<T> mma_unit(const TileArgs<T>& a, int64_t t, bool tiles_fastest = false) {
  MmaUnit<T> u;
  const int64_t at = block_unit_of(a.tile_off, a.nlist, t);  // the list's place in tile_off
  u.list = unit_list_at(a, at);
  u.size = a.list_size[u.list];
  const int64_t nvt = (u.size + kMmaTile - 1) / kMmaTile;
  const int64_t nchunks = (nvt + kMmaUnitTiles - 1) / kMmaUnitTiles;
  const int64_t first = a.tile_off[at], local = t - first;
  const int64_t nqt = (a.tile_off[at + 1] - first) / nchunks;  // the list's query tiles
  const int64_t chunk = tiles_fastest ? local / nqt : local % nchunks;
  u.qt = tiles_fastest ? local % nqt : local / nchunks;
  u.vt_begin = chunk * kMmaUnitTiles;
  u.vt_end = u.vt_begin + kMmaUnitTiles < nvt ? u.vt_begin + kMmaUnitTiles : nvt;
  const int64_t prem = a.pair_count[u.list] - u.qt * a.unit_queries;
  u.pcount = static_cast<int>(prem < a.unit_queries ? prem : a.unit_queries);
  u.rows = a.vectors + a.list_start[u.list] * a.dim;
  return u;
}
// Rows in the unit's row tile v0 (vcount of them) from position v0: threads 64-127 mark each
// kept (keep[v]) unless past the tile's end, removed, or left out by the filter.
template <class T>
__device__ __forceinline__ void mark_kept_rows(const TileArgs<T>& a, int64_t l, int64_t v0, int vcount, bool* keep) {
  const int v = static_cast<int>(threadIdx.x) - kMmaTile;
  if (v < 0 || v >= kMmaTile) return;
  const int64_t slot = a.list_start[l] + v0 + v;
  keep[v] = v < vcount && row_allowed(a.removed, a.filter, a.filter_set, slot, [&] { return a.ids[slot]; });
}
template <class A, int MI, int NI>
__device__ __forceinline__ void zero_accumulators(A (&acc)[MI][NI][4]) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mi][ni][i] = A(0);
}

// The end of a pruned tile, after a barrier that told whether any thread counted a cost: a query
// row with at least k costs below its bound (below[r]; written[r] marks their columns in
// costs[r]) lowers it to their k-th (+inf for the columns not written), in global memory and in
// qbound; below and written are cleared for the next tile. Warps warp0 .. + nwarps of the block
// take the rows (every warp of a kThreads block unless a kernel splits its warps between tiles).
__device__ __forceinline__ void lower_counted_bounds(const PruneState& pr, bool counted, int pcount, int* below,
                                                     unsigned long long* written, const float (*costs)[kMmaTile],
                                                     const int64_t* q_row, uint32_t* qbound,
                                                     int warp0 = static_cast<int>(threadIdx.x / 32),
                                                     int nwarps = kThreads / 32) {
  const int lane = threadIdx.x % 32;
  for (int r = warp0; counted && r < pcount; r += nwarps) {
    const int n = below[r];
    if (n >= pr.k) {
      const unsigned long long w = written[r];
      const float inf = __int_as_float(0x7f800000);
      lower_row_bound(pr, q_row[r], (w >> lane) & 1 ? costs[r][lane] : inf,
                      (w >> (lane + 32)) & 1 ? costs[r][lane + 32] : inf, qbound[r]);
    }
    __syncwarp();
    if (n > 0 && lane == 0) {
      written[r] = 0;
      below[r] = 0;
    }
  }
}

// f(mi, h, r) for each query row r < pcount that the warp's accumulators hold: accumulator i of
// mma tile (mi, ni) is query row wq + 16 mi + g (+ 8 for i >= 2, h = 1), tile row
// wv + 8 ni + 2 (lane % 4) + (i & 1). MI: the warp's mma tiles down the queries (2 for a
// 32 x 16 mma.sync warp tile, 1 for a warp's 16 rows of a 64 x 32 wgmma tile).
template <int MI = 2, class F>
__device__ __forceinline__ void for_each_accumulator_row(int wq, int g, int pcount, F&& f) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wq + 16 * mi + g + 8 * h;
      if (r < pcount) f(mi, h, r);
    }
}
// The same for all four of the lane's query rows, those past pcount too: the epilogues' common
// test, whose thresholds the kernels make unreachable past pcount (exclude_row_thresholds,
// scan_prune.cuh), so that it runs without a branch a row. ncu (session 49, f32 10M x 96,
// nprobe 64) had put 24% of the four-tile pass's instructions into that test, many of them
// around the rows' branches, which also kept the four rows' dependent chains one after another.
template <int MI = 2, class F>
__device__ __forceinline__ void for_every_accumulator_row(int wq, int g, F&& f) {
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) f(mi, h, wq + 16 * mi + g + 8 * h);
}

// One 64-byte slab of k steps for a warp's 32 x 16 tile: the query rows' fragments at q_slab
// (a resident query tile's slab), the tile rows' at x_slab, lane offsets a_off and b_off as the
// kernels compute them (the bf16 layout above; int8 fragments take the same bytes). Two k steps
// of 16 bf16 or 32 int8 dimensions; Op::mma multiplies one.
template <class Op, class Acc>
__device__ __forceinline__ void mma_slab(Acc (&acc)[2][2][4], uint32_t q_slab, uint32_t x_slab,
                                         const uint32_t (&a_off)[2], uint32_t b_off) {
  uint32_t af[2][2][4], bf[2][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int s = 0; s < 2; ++s) ldmatrix_x4(af[mi][s], q_slab + a_off[s] + mi * 16 * 64);
#pragma unroll
  for (int ni = 0; ni < 2; ++ni) ldmatrix_x4(bf[ni], x_slab + b_off + ni * 8 * 64);
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 2; ++ni) Op::mma(acc[mi][ni], af[mi][s], bf[ni][2 * s], bf[ni][2 * s + 1]);
}
// A unit's later query tile (the grouped passes: scan_resident.cuh, scan_imma.cuh) against a row
// tile whose slices are all still staged: acc from zero over nslab slabs of the query tile at
// q_tile, the row tile's slice i in buffer (buf0 + i) % 2 of the two at x_at (two slabs each).
// A row tile is two slices of two slabs at most there (kGroupedMaxSlabs: 128 bf16 or 256 int8
// dimensions), so the loop unrolls without a remainder loop.
constexpr int kGroupedMaxSlabs = 4;
template <class Op, class Acc>
__device__ __forceinline__ void staged_tile_products(Acc (&acc)[2][2][4], uint32_t q_tile, uint32_t x_at, int nslab,
                                                     int buf0, const uint32_t (&a_off)[2], uint32_t b_off) {
  constexpr uint32_t kSlab = kMmaTile * 64;  // a slab's bytes, bf16 or int8
  zero_accumulators(acc);
#pragma unroll
  for (int slab = 0; slab < kGroupedMaxSlabs; ++slab) {
    if (slab >= nslab) break;
    const int b = (buf0 + slab / 2) & 1;
    mma_slab<Op>(acc, q_tile + slab * kSlab, x_at + (b * 2 + slab % 2) * kSlab, a_off, b_off);
  }
}
// N slabs of products on wgmma, straight-line, as one batch (fenced and committed, not waited
// for): slab i of the query tile at q_tile against the row slab at row_slab(i) plus b_off, the
// warpgroup's rows' offset in a slab. A test of the slab count between the wgmmas of a batch made
// ptxas serialize them (C7520: a wait after each one; ncu, session 53: the resident pass's waits
// held 15% of its stall samples, most of them inside a batch), so the callers choose N first.
template <class Op, int N, class Acc, class RowSlab>
__device__ __forceinline__ void wgmma_slab_batch(Acc (&acc)[1][4][4], uint32_t q_tile, RowSlab&& row_slab,
                                                 uint32_t b_off) {
  constexpr uint32_t kSlab = kMmaTile * 64;  // a slab's bytes, bf16 or int8
  wgmma_fence();
#pragma unroll
  for (int i = 0; i < N; ++i) Op::slab(acc, q_tile + i * kSlab, row_slab(i) + b_off);
  wgmma_commit();
}
// A staged slice's products on wgmma (the warpgroup layout, wgmma.cuh), issued and committed but
// not waited for: slabs first_slab and first_slab + 1 (those below nslab) of the query tile at
// q_tile against the slice's two row slabs at x_slice. Every warp of the warpgroup must call it.
template <class Op, class Acc>
__device__ __forceinline__ void wgmma_slice_products(Acc (&acc)[1][4][4], uint32_t q_tile, uint32_t x_slice,
                                                     int first_slab, int nslab, uint32_t b_off) {
  constexpr uint32_t kSlab = kMmaTile * 64;
  const auto row_slab = [&](int j) { return x_slice + j * kSlab; };
  if (first_slab + 2 <= nslab)
    wgmma_slab_batch<Op, 2>(acc, q_tile + first_slab * kSlab, row_slab, b_off);
  else
    wgmma_slab_batch<Op, 1>(acc, q_tile + first_slab * kSlab, row_slab, b_off);
}
// The slices of a row tile in a grouped unit (QTILES query tiles): the grouping follows the
// dimension (resident_query_tiles, integer_query_tiles), two tiles up to one slice and four up to
// two, so the count is known where the products are compiled (grouped_slices_hold proves it).
template <int QTILES>
__host__ __device__ constexpr int grouped_slices() {
  static_assert(QTILES == 1 || QTILES == 2 || QTILES == 4, "a unit holds one, two or four query tiles");
  return QTILES == 4 ? 2 : 1;
}
// Whether every dimension up to max_dim that tiles_of(dim) groups (two or four query tiles a
// unit) is the number of slice_dims slices grouped_slices gives: checked where each pass is
// compiled, so no launch needs to.
template <class TilesOf>
constexpr bool grouped_slices_hold(TilesOf tiles_of, int64_t slice_dims, int64_t max_dim) {
  for (int64_t dim = 1; dim <= max_dim; ++dim) {
    const int tiles = tiles_of(dim), slices = static_cast<int>((dim + slice_dims - 1) / slice_dims);
    if ((tiles == 2 && slices != grouped_slices<2>()) || (tiles == 4 && slices != grouped_slices<4>())) return false;
  }
  return true;
}
// staged_tile_products on wgmma: b_off is the warpgroup's rows' offset in a slab; every warp of
// the warpgroup must call it. The row tile is SLICES slices (grouped_slices), nslab slabs: all of
// the last slice's or all but one. Waits for the products before returning.
template <class Op, int SLICES, class Acc>
__device__ __forceinline__ void staged_tile_products(Acc (&acc)[1][4][4], uint32_t q_tile, uint32_t x_at, int nslab,
                                                     int buf0, uint32_t b_off) {
  constexpr uint32_t kSlab = kMmaTile * 64;
  const auto row_slab = [&](int slab) { return x_at + (((buf0 + slab / 2) & 1) * 2 + slab % 2) * kSlab; };
  zero_accumulators(acc);
  if (nslab == 2 * SLICES)
    wgmma_slab_batch<Op, 2 * SLICES>(acc, q_tile, row_slab, b_off);
  else
    wgmma_slab_batch<Op, 2 * SLICES - 1>(acc, q_tile, row_slab, b_off);
  wgmma_wait_all();
}
// The end of a row tile in a unit of up to QTILES query tiles (pcount queries; more than one only
// where the pass groups them: scan_resident.cuh, scan_imma.cuh), after the barrier that made the
// tile's per-row terms visible. epilogue(r0, pc) runs the pass's epilogue on acc for the warp's
// query rows of r0 .. r0 + pc - 1 and returns whether this thread counted a cost. The first tile's
// acc is as the slices left it; each later one's is multiplied here (staged_tile_products: query
// tile t at q_tile1 + (t - 1) * tile_bytes). Each tile's counts lower its bounds
// (lower_counted_bounds, with below, q_row and qbound indexed by the unit's query row, costs and
// written by the tile's); costs and written pass from one tile to the next behind a barrier where
// any counted, and the last barrier keeps the next row tile's first slice out of the buffers until
// every warp's products are done.
template <int QTILES, class Op, class Acc, int MI, int NI, class Epilogue>
__device__ __forceinline__ void finish_row_tile(Acc (&acc)[MI][NI][4], int pcount, int wq, Epilogue&& epilogue,
                                                const PruneState& pr, int* below, unsigned long long* written,
                                                const float (*costs)[kMmaTile], const int64_t* q_row,
                                                uint32_t* qbound, uint32_t q_tile1, uint32_t tile_bytes, uint32_t x_at,
                                                int nslab, int buf0, const uint32_t (&a_off)[2], uint32_t b_off) {
  const int pcount0 = pcount < kMmaTile ? pcount : kMmaTile;
  // The next row tile writes no marks before two barriers more (a later query tile: one).
  bool counted = __syncthreads_or(wq < pcount0 && epilogue(0, pcount0));
  lower_counted_bounds(pr, counted, pcount0, below, written, costs, q_row, qbound);
#pragma unroll 1
  for (int t = 1; t < QTILES; ++t) {
    const int r0 = t * kMmaTile;
    if (pcount <= r0) return;
    if (counted) __syncthreads();  // lower_counted_bounds is done with costs and written
    const int pc = pcount - r0 < kMmaTile ? pcount - r0 : kMmaTile;
    bool counted_t = false;
    constexpr bool kWarpgroup = MI == 1;  // the wgmma layout: every warp of a warpgroup multiplies
    if constexpr (kWarpgroup)
      staged_tile_products<Op, grouped_slices<QTILES>()>(acc, q_tile1 + (t - 1) * tile_bytes, x_at, nslab, buf0, b_off);
    else if (wq < pc)
      staged_tile_products<Op>(acc, q_tile1 + (t - 1) * tile_bytes, x_at, nslab, buf0, a_off, b_off);
    if (wq < pc) counted_t = epilogue(r0, pc);
    counted = __syncthreads_or(counted_t);
    lower_counted_bounds(pr, counted, pc, below + r0, written, costs, q_row + r0, qbound + r0);
  }
}
// The lanes' ldmatrix offsets within a 64-byte slab for warp tile (wq, wv): A (k step s) and B.
__device__ __forceinline__ void mma_slab_offsets(int wq, int wv, uint32_t (&a_off)[2], uint32_t& b_off) {
  const int lane = threadIdx.x % 32, sw = (lane >> 1) & 3;
#pragma unroll
  for (int s = 0; s < 2; ++s)
    a_off[s] = static_cast<uint32_t>((wq + (lane & 7) + (lane & 8)) * 64 + (((2 * s + (lane >> 4)) ^ sw) * 16));
  b_off = static_cast<uint32_t>((wv + (lane & 7)) * 64 + (((lane >> 3) ^ sw) * 16));
}
// ORs bits into a 64-bit word in shared memory as 32-bit atomics on the halves that have any (the
// device is little-endian: the low half comes first). A 64-bit atomicOr on shared memory compiles
// to a compare-and-swap loop on sm_90 (ATOMS.CAST.SPIN.64), which lanes setting one word retry
// against each other: in the wide pass's marks (session 60, before wide_tile_marks) that had cost
// 4% of the QPS at k 1000 (H100, 1M x 128, nprobe 16, bench/RESULTS.md). The counted rows'
// masks (CountedCosts::publish) use it now.
__device__ __forceinline__ void shared_or64(unsigned long long* word, unsigned long long bits) {
  unsigned int* const half = reinterpret_cast<unsigned int*>(word);
  const auto lo = static_cast<unsigned int>(bits), hi = static_cast<unsigned int>(bits >> 32);
  if (lo != 0) atomicOr(half, lo);
  if (hi != 0) atomicOr(half + 1, hi);
}
// One query row's counted costs among a lane's columns of a tile (both pruned epilogues): written
// to costs as they come, then published once to the row's count and marks, which
// lower_counted_bounds reads.
struct CountedCosts {
  int n = 0;
  unsigned long long bits = 0;
  __device__ __forceinline__ void add(float (*costs)[kMmaTile], int r, int c, float cost) {
    ++n;
    bits |= 1ull << c;
    costs[r][c] = cost;
  }
  // Called only when there are some (n > 0).
  __device__ __forceinline__ void publish(int* below, unsigned long long* written, int r) const {
    atomicAdd(&below[r], n);
    shared_or64(&written[r], bits);
  }
};

// The pruned epilogue of a bf16 tile, by each warp for its accumulators (query rows wq .. +
// 16 MI, tile rows wv .. + 8 NI of the row tile at v0; mma.sync: 32 x 16, wgmma: 16 x 32): rows
// whose optimistic cost reaches a query row's bound are appended, rows whose pessimistic cost
// beats it are counted (below[r], written[r], costs[r]: lower_counted_bounds reads them).
// xhalf: half each tile row's squared norm (L2; 0 for inner product), +inf where excluded; rows:
// prune_row_thresholds' per query row, and exclude_row_thresholds' past pcount up to the tile's
// end (the first test reads every row the warp holds). Returns whether this thread counted a
// cost (rare).
//
// The accumulators are query rows r0 .. r0 + 63 of the unit (r0 > 0 for the later tiles of a
// resident unit that groups them: finish_row_tile): rows, qn2, q_row and out_base are read at
// r0 + r, and pcount counts from r0; costs and written hold the tile's own rows (r). The wide
// pass marks instead (wide_tile_marks).
template <bool IP, int N, int MI, int NI>
__device__ __forceinline__ bool bf16_tile_epilogue(const float (&acc)[MI][NI][4], const float* xhalf,
                                                   PruneRows<N>& rows,
                                                   int r0, const float* qn2, const int64_t* q_row,
                                                   const int64_t* out_base, const PruneState& pr, int64_t v0, int wq,
                                                   int wv, int pcount, float (*costs)[kMmaTile],
                                                   unsigned long long* written) {
  const int lane = threadIdx.x % 32, g = lane / 4;
  // The lane's tile columns c0 + 8 ni + e, the same for each of its query rows.
  const int c0 = wv + 2 * (lane % 4);
  float2 xh[NI];
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) xh[ni] = *reinterpret_cast<const float2*>(&xhalf[c0 + 8 * ni]);
  const auto t_of = [&](int mi, int h, int ni, int e) { return acc[mi][ni][2 * h + e] - (e == 0 ? xh[ni].x : xh[ni].y); };
  // A row that counts is also appended (count_at >= append_at: prune_row_thresholds), so one
  // test of the lane's largest t per query row finds both. fmaxf passes NaN over as each
  // comparison would fail on it.
  bool any_take = false;
  for_every_accumulator_row<MI>(wq, g, [&](int mi, int h, int r) {  // past pcount append_at is +inf
    float tmax = fmaxf(t_of(mi, h, 0, 0), t_of(mi, h, 0, 1));
#pragma unroll
    for (int ni = 1; ni < NI; ++ni) tmax = fmaxf(tmax, fmaxf(t_of(mi, h, ni, 0), t_of(mi, h, ni, 1)));
    any_take |= tmax >= rows.thresholds[r0 + r].x;
  });
  if (!any_take) return false;  // the common case once a bound holds (~11 appended rows a query)
  bool counted = false;
  for_each_accumulator_row<MI>(wq, g, pcount, [&](int mi, int h, int r) {
    const float2 th = rows.thresholds[r0 + r];
    const float qsq = IP ? 0.0f : qn2[r0 + r], m = rows.margin[r0 + r];
    const int64_t q = q_row[r0 + r], pos0 = out_base[r0 + r] + v0 - q * pr.stride;
    CountedCosts counts;
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float tv = t_of(mi, h, ni, e);
        const float base = IP ? -tv : fmaf(-2.0f, tv, qsq);  // the cost without its margin
        if (tv >= th.x) append_row(pr, q, pos0 + c0 + 8 * ni + e, __fsub_rd(base, m));
        if (tv > th.y) counts.add(costs, r, c0 + 8 * ni + e, __fadd_ru(base, m));  // pessimistic
      }
    if (counts.n > 0) {
      counted = true;
      counts.publish(rows.below + r0, written, r);
    }
  });
  return counted;
}

// The wide pass's epilogue (list_resident_kernel's WIDE build, one query tile a unit): it only
// marks, bit r of pair_rows[c], each (query row r, tile row c) whose optimistic cost reaches the
// row's bound (thresholds.x, as bf16_tile_epilogue appends; nothing counts there), for
// list_marked_pairs. The eight lanes holding one set of tile columns (lane % 4) gather their
// query rows' bits with three shuffles a column, and lane g of them ORs column g's into its word
// with one 32-bit atomic: a warp's query rows (16 on wgmma, 32 on mma.sync, from a multiple of
// 16 or 32) lie in one half of it. Marked pair by pair, by the lanes one at a time, the epilogue
// had taken ~17% of the pass's stall samples at k 1000 (H100, 1M x 128, nprobe 16, session 61).
// Each pair's margin takes its own row's norm (xnorm: |x|, rounded up; 0 where excluded) through
// its query row's slope (wide_row_thresholds): the test is t - xhalf + slope |x| >= append_at.
// Returns false: nothing counts.
template <int N, int MI, int NI>
__device__ __forceinline__ bool wide_tile_marks(const float (&acc)[MI][NI][4], const float* xhalf,
                                                const float* xnorm, const PruneRows<N>& rows, int wq, int wv,
                                                int pcount, unsigned long long* pair_rows) {
  constexpr int kCols = 2 * NI;  // a lane's tile columns c0 + 8 ni + e, index 2 ni + e
  static_assert(kCols <= 8 && 16 * MI <= 32, "a column's bits go to one of the eight lanes; one half a warp");
  const int lane = threadIdx.x % 32, g = lane / 4;
  const int c0 = wv + 2 * (lane % 4);
  float2 xh[NI], xn[NI];
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
    xh[ni] = *reinterpret_cast<const float2*>(&xhalf[c0 + 8 * ni]);
    xn[ni] = *reinterpret_cast<const float2*>(&xnorm[c0 + 8 * ni]);
  }
  uint32_t bits[kCols] = {};
  for_each_accumulator_row<MI>(wq, g, pcount, [&](int mi, int h, int r) {
    const float at = rows.thresholds[r].x, slope = rows.margin[r];
#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      if (fmaf(slope, xn[ni].x, acc[mi][ni][2 * h] - xh[ni].x) >= at) bits[2 * ni] |= 1u << (r % 32);
      if (fmaf(slope, xn[ni].y, acc[mi][ni][2 * h + 1] - xh[ni].y) >= at) bits[2 * ni + 1] |= 1u << (r % 32);
    }
  });
  uint32_t any = 0;
#pragma unroll
  for (int j = 0; j < kCols; ++j) any |= bits[j];
  if (!__any_sync(0xffffffffu, any != 0)) return false;
  uint32_t mine = 0;  // column g's bits, once gathered
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
#pragma unroll
    for (int o = 4; o < 32; o *= 2) bits[j] |= __shfl_xor_sync(0xffffffffu, bits[j], o);
    if (j == g) mine = bits[j];
  }
  if (mine != 0) {
    const int c = c0 + 8 * (g / 2) + g % 2;
    atomicOr(reinterpret_cast<unsigned int*>(&pair_rows[c]) + (wq / 32), mine);  // little-endian: low half first
  }
  return false;
}

// Eight warps: warp w multiplies query rows 32 * (w / 4) .. + 32 by tile rows 16 * (w % 4) .. + 16
// (2 x 2 mma tiles of 16 x 8). The next slice is loaded into registers while this one is
// multiplied. Each lane writes its own accumulators' keys (no shared staging of the dots).
//
// WG (the pruned pass on sm_90a: wgmma.cuh): two warpgroups, warpgroup w multiplying all 64
// query rows by tile rows 32 w .. + 32 with wgmma, warp w % 4 of it holding query rows
// 16 (w % 4) .. + 16 (one 16-row tile by four 8-row ones); the products of a slice are issued
// before the next slice is staged and waited for after it.
//
// PRUNE: the epilogue keeps the tile on chip instead (scan_prune.cuh): the pessimistic costs go
// to shared memory, and each warp settles eight query rows of the tile against their bounds.
// The pruned pass comes here only for shapes list_resident_kernel does not take (scan_resident.cuh:
// rows without four-element loads, more than 512 dimensions, L2 without centroids).
template <class T, bool IP, bool PRUNE, bool WG = false>
__global__ void __launch_bounds__(kThreads, 2)
    list_mma_kernel(TileArgs<T> a, MarginTerms mg, float* list_norm, PruneState pr) {
  static_assert(!WG || PRUNE, "wgmma serves the bf16 pruned pass");
  if (wgmma_build_missing<WG>()) return;  // code without wgmma never launches this build
  // Two buffers of a slice for the queries and two for the rows: slice i + 1 is staged while
  // slice i is multiplied, so one barrier per slice suffices.
  using Slice = float[2][kMmaTile][kMmaSlab];  // [slab][row][dimension, swizzled]
  constexpr int kSliceFloats = 2 * kMmaTile * kMmaSlab, kStageFloats = 4 * kSliceFloats;
  // 1,024-byte aligned: a wgmma descriptor's swizzle assumes slabs on 512-byte boundaries.
  __shared__ __align__(1024) float stage_mem[kStageFloats];
  Slice* const qs = reinterpret_cast<Slice*>(stage_mem);  // qs[buffer]
  Slice* const xs = reinterpret_cast<Slice*>(stage_mem + 2 * kSliceFloats);
  // PRUNE: the pessimistic costs of the rows that beat a query row's bound, and which of them
  // were written (written[r], bit c): only those are read. They share the rows' staging memory:
  // they are written after every warp's last products (a barrier between) and read before the
  // next row tile stages (its first barrier between).
  static_assert(kMmaTile * kMmaTile <= 2 * kSliceFloats, "the costs fit the rows' staging buffers");
  float(*const costs)[kMmaTile] = reinterpret_cast<float(*)[kMmaTile]>(stage_mem + 2 * kSliceFloats);
  __shared__ unsigned long long written[PRUNE ? kMmaTile : 1];
  __shared__ float qn2[kMmaTile], xn2[kMmaTile];
  __shared__ float qlen[PRUNE ? 1 : kMmaTile], xlen[PRUNE ? 1 : kMmaTile];  // the keys pass's margins
  __shared__ int64_t out_base[kMmaTile];
  __shared__ int64_t q_row[kMmaTile];
  __shared__ bool keep[kMmaTile];
  // PRUNE: each query row's bound (as this block knows it) and per-tile thresholds.
  __shared__ uint32_t qbound[PRUNE ? kMmaTile : 1];
  __shared__ PruneRows<PRUNE ? kMmaTile : 1> rows_pr;
  __shared__ float xmax_part[kThreads / 32];
  // PRUNE: half of each tile row's squared norm (L2; 0 for inner product), or +inf where the row
  // is excluded or past the tile's end, so that t = dot - xhalf fails every test there.
  __shared__ float xhalf[PRUNE ? kMmaTile : 1];
  // PRUNE, L2: the unit's list centroid, moved off queries and rows alike (distances do not
  // change; norms, and with them the error bound, shrink to the cluster's scale).
  constexpr bool kCentre = PRUNE && !IP;
  __shared__ __align__(16) float centre_s[kCentre ? kMmaMaxCentredDim : 4];
  const bool centred = kCentre && a.centroids != nullptr && a.dim <= kMmaMaxCentredDim;
  // The pruned pass multiplies bf16 operands (half the shared-memory traffic and mma count of
  // TF32, which left the pass bound by shared memory at d = 960); the keys pass keeps TF32, whose
  // margin its refinement recomputes.
  constexpr bool kBf16 = PRUNE;
  constexpr int kSlice = kMmaSlice<kBf16>;
  static_assert(kMmaMaxCentredDim % kSlice == 0, "the staged centroid pads to whole slices");
  const int tid = threadIdx.x, warp = uniform_warp_index(), lane = tid % 32;
  const int g = lane / 4, t4 = (lane % 4) * 4;
  const int wq = WG ? (warp % 4) * 16 : (warp / 4) * 32, wv = WG ? (warp / 4) * 32 : (warp % 4) * 16;
  constexpr int kMI = WG ? 1 : 2, kNI = WG ? 4 : 2;  // the warp's mma tiles: 16 query rows, 8 tile rows
  // The lane's ldmatrix row addresses in buffer 0, slab 0 (slab 1 lies kSlabBytes on, buffer 1
  // kBufferBytes). Fragment rows differ by multiples of 8, so slab_col's swizzle of them
  // depends on the lane alone.
  // A (mi, k step s): mma tile rows 0-7 / 8-15, columns 8s .. + 3 / 8s + 4 .. + 7, mi at + 16 rows.
  // B (ni): tile rows 8 ni .. + 7, columns 0-3, 4-7 (step 0's b0, b1), 8-11, 12-15 (step 1's).
  constexpr uint32_t kSlabBytes = kMmaTile * kMmaSlab * 4, kBufferBytes = 2 * kSlabBytes;
  const int sw = (lane >> 1) & 3;
  uint32_t a_at[2];
#pragma unroll
  for (int s = 0; s < 2; ++s)
    a_at[s] = static_cast<uint32_t>(__cvta_generic_to_shared(&qs[0][0][wq + (lane & 7) + (lane & 8)][0])) +
              (((2 * s + (lane >> 4)) ^ sw) * 16);
  const uint32_t b_at =
      static_cast<uint32_t>(__cvta_generic_to_shared(&xs[0][0][wv + (lane & 7)][0])) + (((lane >> 3) ^ sw) * 16);
  // WG: the buffers' first slabs, for the descriptors.
  const uint32_t q_base = static_cast<uint32_t>(__cvta_generic_to_shared(stage_mem));
  const uint32_t x_base = static_cast<uint32_t>(__cvta_generic_to_shared(stage_mem + 2 * kSliceFloats));
  if constexpr (PRUNE)
    for (int i = tid; i < kMmaTile; i += kThreads) {
      written[i] = 0;  // cleared again by each reader
      xn2[i] = 0.0f;   // element-wise bf16 staging adds to it; cleared again by the epilogue
    }
  const int64_t total = a.tile_off[a.nlist];
  __shared__ int64_t claimed;  // next_block_unit's
  for (int64_t t = blockIdx.x; t < total; t = next_block_unit(a, t, &claimed)) {
    const MmaUnit<T> u = mma_unit(a, t, true);
    const int64_t l = u.list, size = u.size, qt = u.qt, vt_begin = u.vt_begin, vt_end = u.vt_end;
    const int pcount = u.pcount;
    const T* rows = u.rows;
    __syncthreads();  // the previous unit is done with the shared arrays
    load_query_tile<kMmaTile>(a, l, qt, pcount, 0, q_row, out_base);
    // Through L2, where other blocks lower the bounds; a bound read early is only higher: safe.
    if (PRUNE && tid < pcount) qbound[tid] = __ldcg(pr.bound + q_row[tid]);
    if (kBf16 && !a.vec4 && tid < kMmaTile) qn2[tid] = 0.0f;  // summed while the first tile stages
    if (centred) {  // zero past dim: the padded dimensions stay zero
      const int64_t padded = (a.dim + kSlice - 1) / kSlice * kSlice;
      for (int64_t j = tid; j < padded; j += kThreads) centre_s[j] = j < a.dim ? a.centroids[l * a.dim + j] : 0.0f;
    }
    const float* centre = centred ? centre_s : nullptr;
    const auto q_ptr = [&](int r) -> const float* {
      const int64_t q = q_row[r];
      return q >= 0 ? a.queries + q * a.dim : nullptr;
    };
    const bool active = wq < pcount;  // a warp whose query rows are all past the tile's last
    float4 qv[kMmaVecs<kBf16>], xv[kMmaVecs<kBf16>];
    bool preloaded = false;  // the first slice of this row tile came with the previous tile's last
    const float* my_q = nullptr;  // the thread's query row: the same on every row tile of the unit
    const float* my_qs[kCoalescedRows] = {};  // bf16: its two rows (coalesced_row), likewise
    for (int64_t vt = vt_begin; vt < vt_end; ++vt) {
      const int64_t v0 = vt * kMmaTile;
      const int vcount = u.rows_in(vt);
      const auto x_ptr = [&](int r) -> const T* { return r < vcount ? rows + (v0 + r) * a.dim : nullptr; };
      // The next row tile's rows, for the prefetch of its first slice.
      const int next_count = u.rows_in(vt + 1);
      __syncthreads();  // the previous row tile is done with the shared arrays; q_row is visible
      mark_kept_rows(a, l, v0, vcount, keep);  // read only in the epilogue, after the slices' barriers
      float acc[kMI][kNI][4];
      zero_accumulators(acc);
      float qnorm = 0.0f, xnorm = 0.0f;
      // bf16 (vec4): the thread's parts of its two rows' squared norms (coalesced_store_bf16).
      float qsums[kBf16 ? kCoalescedRows : 1] = {}, xsums[kBf16 ? kCoalescedRows : 1] = {};
      const bool first_tile = vt == vt_begin;
      const int dim = static_cast<int>(a.dim);
      if (first_tile) {
        if constexpr (kBf16) {
#pragma unroll
          for (int h = 0; h < kCoalescedRows; ++h) {
            const float* p = q_ptr(coalesced_row(h));
            my_qs[h] = p != nullptr ? p : q_ptr(0);
          }
        } else {
          my_q = mma_thread_row<kBf16>(q_ptr(tid / 4), q_ptr(0));
        }
      }
      const T* my_x = kBf16 ? rows + v0 * a.dim : mma_tile_row<kBf16>(rows + v0 * a.dim, vcount, a.dim);
      // The registers' slice d0 (vec4): bf16 row-coalesced (coalesced_load_slice), TF32 a quarter
      // row a thread.
      const auto load = [&](int d0, const T* x_first, int x_count) {
        if constexpr (kBf16) {
          coalesced_load_slice<float>(qv, [&](int h) { return my_qs[h]; }, d0, dim);
          coalesced_load_tile(xv, x_first, x_count, a.dim, d0);
        } else {
          mma_load_slice<kBf16>(qv, my_q, d0, dim);
          mma_load_slice<kBf16>(xv, x_first, d0, dim);
        }
      };
      // Slice d0 into shared buffer b: from the registers (vec4), or element-wise.
      const auto stage = [&](int d0, int b) {
        if (a.vec4) {
          if constexpr (kBf16) {
            if (centre != nullptr) {
              coalesced_centre(qv, centre, d0);
              coalesced_centre(xv, centre, d0);
            }
            coalesced_store_bf16(reinterpret_cast<unsigned char*>(qs[b]), qv, qsums, first_tile);
            coalesced_store_bf16(reinterpret_cast<unsigned char*>(xs[b]), xv, xsums, true);
          } else {
            if (centre != nullptr) {
              mma_centre<kBf16>(qv, centre, d0);
              mma_centre<kBf16>(xv, centre, d0);
            }
            mma_store_slice(qs[b], qv, qnorm, first_tile);
            mma_store_slice(xs[b], xv, xnorm, true);
          }
        } else if constexpr (kBf16) {
          mma_stage_slice1_bf16<float>(reinterpret_cast<unsigned char*>(qs[b]), q_ptr, d0, a.dim, centre,
                                       first_tile ? qn2 : nullptr);
          mma_stage_slice1_bf16<T>(reinterpret_cast<unsigned char*>(xs[b]), x_ptr, d0, a.dim, centre, xn2);
        } else {
          mma_stage_slice1<float>(qs[b], q_ptr, d0, a.dim, centre);
          mma_stage_slice1<T>(xs[b], x_ptr, d0, a.dim, centre);
        }
        if constexpr (WG) wgmma_stores_visible();  // before the barrier that lets the tensor cores read them
      };
      // The registers' next slice (vec4): slice d0 of this tile, or past its end the next row
      // tile's first, which then travels over the epilogue.
      const auto prefetch = [&](int d0) {
        if (!a.vec4) return;
        if (d0 < dim) {
          load(d0, my_x, vcount);
        } else if (vt + 1 < vt_end) {
          const T* next = rows + (v0 + kMmaTile) * a.dim;
          load(0, kBf16 ? next : mma_tile_row<kBf16>(next, next_count, a.dim), next_count);
          preloaded = true;
        }
      };
      if (a.vec4 && !preloaded) load(0, my_x, vcount);
      preloaded = false;
      stage(0, 0);
      prefetch(kSlice);
      __syncthreads();
      for (int d0 = 0, b = 0; d0 < dim; d0 += kSlice, b ^= 1) {
        const bool more = d0 + kSlice < dim;
        if constexpr (WG)  // this slice's products, while the next slice stages (its slabs: 0 and 1)
          wgmma_slice_products<WgmmaBf16>(acc, q_base + b * kBufferBytes, x_base + b * kBufferBytes, 0, 2, wv * 64);
        // The other buffer was last read by the previous slice's products, before the barrier.
        if (more) {
          stage(d0 + kSlice, b ^ 1);
          prefetch(d0 + 2 * kSlice);
        }
        if (!kBf16 && !a.vec4 && tid < 2 * kMmaTile) {  // thread tid's row: query row tid, or tile row tid - 64
          const int r = tid % kMmaTile;
          float(*sl)[kMmaTile][kMmaSlab] = tid < kMmaTile ? qs[b] : xs[b];
          float sum = 0.0f;
          for (int i = 0; i < kSlice; ++i) {
            const int j = (i + r) % kSlice;  // rotated: neighbouring rows read other banks
            const float v = sl[j / kMmaSlab][r][slab_col(r, j % kMmaSlab)];
            sum = fmaf(v, v, sum);
          }
          qnorm += sum;
        }
        if constexpr (WG) {
          wgmma_wait_all();
        } else if (active) {
          // One slab's fragments at a time. Loading both slabs' first (48 registers) kept the
          // kernel at its 128-register cap, where the compiler recomputed the lanes' ldmatrix
          // addresses every slice (ncu); per slab, 0-7% faster (bench/RESULTS.md, session 36).
          const uint32_t at = b * kBufferBytes;
          // Two slabs of two k steps each (16 fp32 or 32 bf16 dimensions a slab: the same bytes).
          static_assert(kBf16SlabBytes == kSlabBytes, "a bf16 slab has a TF32 slab's bytes");
#pragma unroll
          for (int slab = 0; slab < 2; ++slab)  // a_at, b_at: the lanes' addresses in buffer 0, slab 0
            mma_slab<MmaOp<kBf16>>(acc, at + slab * kSlabBytes, at + slab * kSlabBytes, a_at, b_at);
        }
        if (more) __syncthreads();  // the staged slice is visible; this one's buffer is free
      }
      if constexpr (PRUNE) {
        // Squared norms: the four lanes of a row (vec4) hold its parts; element-wise staging
        // summed them into qn2 and xn2 (mma_stage_slice1_bf16). The tile's
        // largest row norm comes from a warp maximum (rows past the tile's end stage a copy of
        // its first row: they cannot raise it) and one barrier.
        float xsq = 0.0f;
        if (a.vec4) {  // the eight lanes of a row (coalesced_store_bf16) hold its parts
          if (first_tile) coalesced_row_sums(qsums);
          coalesced_row_sums(xsums);
          xsq = fmaxf(xsums[0], xsums[1]);
          if (lane % 8 == 0)
#pragma unroll
            for (int h = 0; h < kCoalescedRows; ++h) {
              const int v = coalesced_row(h);
              if (first_tile) qn2[v] = qsums[h];  // the same queries on the unit's later tiles
              xhalf[v] = keep[v] ? (IP ? 0.0f : 0.5f * xsums[h]) : __int_as_float(0x7f800000);
            }
        } else if (tid >= kMmaTile && tid < 2 * kMmaTile) {  // summed into qn2 and xn2 while staging
          const int v = tid - kMmaTile;
          xsq = xn2[v];
          xn2[v] = 0.0f;  // for the next tile's staging, two barriers on
          xhalf[v] = keep[v] ? (IP ? 0.0f : 0.5f * xsq) : __int_as_float(0x7f800000);
        }
        for (int o = 1; o < 32; o *= 2) xsq = fmaxf(xsq, __shfl_xor_sync(kFullMask, xsq, o));
        if (lane == 0) xmax_part[warp] = xsq;
        __syncthreads();
        if (tid < pcount) {
          float xmax = xmax_part[0];
#pragma unroll
          for (int w = 1; w < kThreads / 32; ++w) xmax = fmaxf(xmax, xmax_part[w]);
          prune_row_thresholds<IP>(mg, qn2[tid], sqrtf(xmax), qbound[tid], rows_pr, tid);
        } else if (tid < kMmaTile) {
          exclude_row_thresholds(rows_pr, tid);
        }
        __syncthreads();
        const bool counted_here =
            active && bf16_tile_epilogue<IP>(acc, xhalf, rows_pr, 0, qn2, q_row, out_base, pr, v0, wq, wv, pcount,
                                             costs, written);
        // The next tile writes no marks before two barriers more.
        lower_counted_bounds(pr, __syncthreads_or(counted_here), pcount, rows_pr.below, written, costs, q_row, qbound);
        continue;
      }
      if (a.vec4) {  // the four lanes of a row hold its partial norms
        qnorm += __shfl_xor_sync(0xffffffffu, qnorm, 1);
        qnorm += __shfl_xor_sync(0xffffffffu, qnorm, 2);
        xnorm += __shfl_xor_sync(0xffffffffu, xnorm, 1);
        xnorm += __shfl_xor_sync(0xffffffffu, xnorm, 2);
        if (tid % 4 == 0) {
          if (first_tile) qn2[tid / 4] = qnorm;  // the same queries on the unit's later tiles
          xn2[tid / 4] = xnorm;
        }
      } else if (tid < kMmaTile) {
        qn2[tid] = qnorm;
      } else if (tid < 2 * kMmaTile) {
        xn2[tid - kMmaTile] = qnorm;
      }
      __syncthreads();
      if (tid < kMmaTile) {
        qlen[tid] = sqrtf(qn2[tid]);
      } else if (tid < 2 * kMmaTile) {  // warps 2 and 3, whole
        const int v = tid - kMmaTile;
        const float xl = sqrtf(xn2[v]);
        xlen[v] = xl;
        if (v < vcount) atomic_max_nonneg(list_norm + l, xl);  // only the keys pass's refinement reads these
      }
      __syncthreads();
      if (!active) continue;
      for_each_accumulator_row<kMI>(wq, g, pcount, [&](int mi, int h, int r) {
        const float qsq = qn2[r], ql = qlen[r];
        float* out = a.cand.dist + out_base[r] + v0;
#pragma unroll
        for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int c = wv + 8 * ni + t4 / 2 + e;
            if (c >= vcount) continue;
            const float dot = acc[mi][ni][2 * h + e];
            const float m = candidate_margin(mg, ql, xlen[c]);
            // The pessimistic key: a distance no smaller, a similarity no larger, than the exact one.
            const float key = IP ? dot - m : (qsq + xn2[c] - 2.0f * dot) + m;
            out[c] = keep[c] ? key : a.excluded;
          }
      });
    }
  }
}

// The resident passes (list_resident_kernel, list_imma_kernel) come in two register budgets,
// chosen here, at launch: three blocks an SM (kResidentBlocks: 80 registers, ptxas spilling
// 24-72 bytes) where the shared memory of three fits, else two (up to 128 registers, no spills).
// At 16 warps an SM the resident bf16 pass waited mostly on short scoreboards, fixed latencies
// and barriers (ncu, H200, session 39: 25%, 24% and 19% of its stall samples), not on issue;
// 24 warps took 1M x 128 from 3.27-3.28M to 3.37-3.41M QPS at nprobe 16 and from 1.27M to
// 1.34M at 64, uint8 queries +3-8% / +9-11%, d 64 +4-10% / +10-12%. At d 512 (a 64 KiB query
// tile: two blocks fit) the 80-register build was 3-5% slower than the 128-register one.
constexpr int kResidentBlocks = 3;
constexpr int kResidentFallbackBlocks = 2;  // the build where three do not fit
template <class Kernel, class... Args>
void launch_resident_budget(const DeviceContext& ctx, cudaStream_t stream, Kernel three, Kernel two,
                            std::size_t dynamic, std::size_t largest_dynamic, const Args&... args) {
  // Once per context for the largest tile: raising the limit later, while another index on the
  // device launches the kernel, would race with that launch (DeviceContext::opt_in_shared_memory).
  ctx.opt_in_shared_memory(reinterpret_cast<const void*>(three), largest_dynamic);
  ctx.opt_in_shared_memory(reinterpret_cast<const void*>(two), largest_dynamic);
  Kernel kernel = three;
  int per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(three), kThreads, dynamic);
  if (per_sm < kResidentBlocks) {
    kernel = two;
    per_sm = ctx.blocks_per_sm(reinterpret_cast<const void*>(two), kThreads, dynamic);
  }
  const unsigned grid = static_cast<unsigned>(std::max(1, per_sm) * ctx.limits().sm_count);
  kernel<<<grid, kThreads, dynamic, stream>>>(args...);
  IVF_CUDA_CHECK_LAUNCH();
}

}  // namespace ivfgpu::cuda::scan_detail
