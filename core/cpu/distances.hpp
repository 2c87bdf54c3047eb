// CPU distance primitives. Coarse work (query x centroid) is GEMM-shaped and goes through
// BLAS; distances that are returned to users are computed directly, term by term, so the
// reference carries no ||q||^2 + ||x||^2 - 2q.x cancellation error.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "../element_codec.hpp"
#include "../types.hpp"

namespace ivfgpu::cpu {

namespace distance_detail {
typedef float Lanes4 __attribute__((vector_size(16)));  // one SSE register
typedef float Lanes8 __attribute__((vector_size(32)));  // one AVX register (two SSE ones without AVX)
// The same vectors at any float address (unaligned loads and stores, no aliasing assumption):
// one vector move each, where memcpy was split into halves and stalled store forwarding.
typedef float Lanes4At __attribute__((vector_size(16), aligned(4), may_alias));
typedef float Lanes8At __attribute__((vector_size(32), aligned(4), may_alias));
// (Through these functions, not a template argument: a template argument drops the attributes.)
template <int VB, class V>
[[gnu::always_inline]] inline void load_lanes(V& v, const float* p) {
  if constexpr (VB == 32) v = *reinterpret_cast<const Lanes8At*>(p);
  else v = *reinterpret_cast<const Lanes4At*>(p);
}
// Stored elements decoded straight into a vector (exact: bf16 widens without rounding), where
// decoding through a float array stalled on store forwarding.
typedef uint16_t Halves8At __attribute__((vector_size(16), aligned(2), may_alias));
typedef uint32_t Words8 __attribute__((vector_size(32)));
#if defined(__x86_64__) || defined(__i386__)
#define IVFGPU_WIDEN_BYTES 1
// Eight bytes widened to exact floats with AVX2 (vpmovzxbd / vpmovsxbd, vcvtdq2ps): GCC builds
// the same widening from scalar inserts. Only the 8-lane kernel calls these, only from AVX2
// code (row_distances.cpp), where they are inlined; they cannot be always_inline (GCC does not
// force an AVX2 body into a function not itself marked AVX2).
__attribute__((target("avx2"))) inline void widen_bytes(Lanes8& v, const uint8_t* p) {
  v = reinterpret_cast<Lanes8>(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
}
__attribute__((target("avx2"))) inline void widen_bytes(Lanes8& v, const int8_t* p) {
  v = reinterpret_cast<Lanes8>(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
}
// Eight f16 values to floats with F16C (vcvtph2ps: exact, as the decoding table).
__attribute__((target("avx2,f16c"))) inline void widen_bytes(Lanes8& v, const Half* p) {
  v = reinterpret_cast<Lanes8>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
#else
#define IVFGPU_WIDEN_BYTES 0
#endif
// Rows the AVX2 kernel widens with an instruction (bytes; f16 with F16C).
template <class T>
constexpr bool kByteRow = std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t> || std::is_same_v<T, Half>;
// f32 rows at any width; bf16, f16 and byte rows only for 8-lane (AVX2) vectors (SSE2 has no
// widening moves, and its decode through a float array measured faster than GCC's emulation).
template <class T, int VB>
constexpr bool kVectorDecode =
    std::is_same_v<T, float> || (VB == 32 && (std::is_same_v<T, BFloat16> || (IVFGPU_WIDEN_BYTES && kByteRow<T>)));
template <int VB, class T, class V>
[[gnu::always_inline]] inline void load_decoded(V& v, const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    load_lanes<VB>(v, p);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    static_assert(VB == 32);
    v = reinterpret_cast<Lanes8>(__builtin_convertvector(*reinterpret_cast<const Halves8At*>(p), Words8) << 16);
  } else {
#if IVFGPU_WIDEN_BYTES
    static_assert(VB == 32 && kByteRow<T>);
    widen_bytes(v, p);
#endif
  }
}
template <int VB, class V>
[[gnu::always_inline]] inline void store_lanes(float* p, V v) {
  if constexpr (VB == 32) *reinterpret_cast<Lanes8At*>(p) = v;
  else *reinterpret_cast<Lanes4At*>(p) = v;
}

// Exact squared L2 distances (IP: inner products) between an f32 query and R consecutive stored
// rows of element type T (decoded to float term by term), written once over the element type
// and the vector width (VB bytes). Eight (sixteen for byte rows) independent partial sums per
// row, lane l summing dimensions l, l + lanes, l + 2 lanes, ... in order, then one fixed tree:
// a float reduction in one accumulator cannot be vectorised without reassociation, eight can.
// The lanes are explicit vectors (GCC vector extensions): each lane is plain IEEE float
// arithmetic, whatever the vector width, and nothing here is built with fused multiply-adds, so
// a row's distance is the same bits for every R and VB and repeats on every run. R > 1
// interleaves independent rows: one row alone is bound by its accumulators' add latency.
template <class T, int R, bool IP, int VB>
[[gnu::always_inline]] inline void exact_distances(const float* a, const T* b, int64_t dim, float* out) {
  using V = std::conditional_t<VB == 32, Lanes8, Lanes4>;
  constexpr int64_t kLanes = sizeof(T) == 1 ? 16 : 8;
  constexpr int W = static_cast<int>(kLanes * sizeof(float) / VB);  // vectors per block
  constexpr int kPer = VB / static_cast<int>(sizeof(float));         // lanes per vector
  const HostDecoder<T> x;  // exact; f16 by table
  V acc[R][W];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) acc[r][w] = V{};
  const int64_t body = dim - dim % kLanes;
  for (int64_t j = 0; j < body; j += kLanes) {
    V av[W];
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) load_lanes<VB>(av[w], a + j + w * kPer);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      V xv[W];
      if constexpr (kVectorDecode<T, VB>) {
#pragma GCC unroll 8
        for (int w = 0; w < W; ++w) load_decoded<VB>(xv[w], b + r * dim + j + w * kPer);
      } else {
        float xs[kLanes];  // the block decoded first: the conversion then vectorises on its own
#pragma GCC unroll 16
        for (int64_t l = 0; l < kLanes; ++l) xs[l] = x(b[r * dim + j + l]);
#pragma GCC unroll 8
        for (int w = 0; w < W; ++w) load_lanes<VB>(xv[w], xs + w * kPer);
      }
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) {
        if constexpr (IP) {
          acc[r][w] += av[w] * xv[w];
        } else {
          const V d = av[w] - xv[w];
          acc[r][w] += d * d;
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    float c[kLanes];
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) store_lanes<VB>(c + w * kPer, acc[r][w]);
    for (int64_t j = body; j < dim; ++j) {
      const float xj = x(b[r * dim + j]);
      if constexpr (IP) {
        c[0] += a[j] * xj;
      } else {
        const float d = a[j] - xj;
        c[0] += d * d;
      }
    }
    if constexpr (kLanes == 16)
      for (int64_t l = 0; l < 8; ++l) c[l] += c[l + 8];
    out[r] = ((c[0] + c[4]) + (c[1] + c[5])) + ((c[2] + c[6]) + (c[3] + c[7]));
  }
}
}  // namespace distance_detail

// Exact squared L2 distance or inner product between an f32 query and one stored row of
// element type T (distance_detail::exact_distances says how it sums). The scans score four
// rows at once through row_distances.hpp, with the same bits.
template <class T>
float exact_distance(const float* a, const T* b, int64_t dim, Metric metric) {
  float d;
  if (metric == Metric::L2)
    distance_detail::exact_distances<T, 1, false, 16>(a, b, dim, &d);
  else
    distance_detail::exact_distances<T, 1, true, 16>(a, b, dim, &d);
  return d;
}

// Integer rows (uint8, int8) against an integer query of the same type: the exact distance in
// int64, rounded once to float (uint8 L2 at d = 784 passes 2^24).
template <class T>
float exact_integer_distance(const T* a, const T* b, int64_t dim, Metric metric) {
  int64_t acc = 0;
  if (metric == Metric::L2) {
    for (int64_t j = 0; j < dim; ++j) {
      const int64_t d = static_cast<int64_t>(a[j]) - static_cast<int64_t>(b[j]);
      acc += d * d;
    }
  } else {
    for (int64_t j = 0; j < dim; ++j) acc += static_cast<int64_t>(a[j]) * static_cast<int64_t>(b[j]);
  }
  return static_cast<float>(acc);
}

// For n rows of x, scores[i * nc + c] against nc centroids, ordered so that SMALLER is
// better for every metric: ||c||^2 - 2 x.c for L2 (||x||^2 dropped: constant per row),
// -x.c for inner product. Row-blocked; scores must hold n * nc floats.
void coarse_scores(const float* x, int64_t n, const float* centroids, const float* centroid_norms,
                   int64_t nc, int64_t dim, Metric metric, float* scores);

// Nearest centroid of each of n rows (by coarse_scores), into assign[n]. Works in blocks so
// memory stays bounded for any n.
void nearest_centroids(const float* x, int64_t n, const float* centroids, const float* centroid_norms,
                       int64_t nc, int64_t dim, Metric metric, int64_t* assign);

}  // namespace ivfgpu::cpu
