#include "vector_ops.hpp"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <numeric>
#include <random>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ivfgpu {

int64_t first_non_finite_row(const float* x, int64_t n, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * dim;
    // A sum is non-finite when any term is; checking the sum first keeps the common path fast.
    float s = 0.0f;
    for (int64_t j = 0; j < dim; ++j) s += row[j] * 0.0f;
    if (!(s == 0.0f)) return i;
  }
  return -1;
}

namespace {

// A row whose squared norm failed the bound (or is NaN): whether it is refused, and why.
bool refused_row(const float* row, int64_t dim, bool bounded, bool* non_finite) {
  bool finite = true;
  for (int64_t j = 0; j < dim; ++j) finite = finite && std::isfinite(row[j]);
  if (!finite || bounded) {
    *non_finite = !finite;
    return true;
  }
  return false;
}

}  // namespace

// Each row's squared norm is one fp32 sum in dimension order, with a rounded multiply and a
// rounded add per element (no fused multiply-add), so that every path refuses the same rows.
// On x86 eight rows are summed at once: four-row blocks transposed so that each SIMD lane holds
// one row and adds its elements in the same order. One row at a time was a chain of dependent
// adds (0.7 ms for 10,000 x 128 queries on the H100 machine's host) and 3.3x slower than this
// on the 2-core CI machine.
int64_t first_unusable_row(const float* x, int64_t n, int64_t dim, bool bounded, bool* non_finite, float bound) {
  int64_t i = 0;
#if defined(__SSE2__)
  const int64_t d4 = dim / 4 * 4;
  for (; i + 8 <= n; i += 8) {
    const float* b = x + i * dim;
    __m128 sa = _mm_setzero_ps(), sb = _mm_setzero_ps();
    int64_t j = 0;
    for (; j < d4; j += 4) {
      __m128 a0 = _mm_loadu_ps(b + j), a1 = _mm_loadu_ps(b + dim + j);
      __m128 a2 = _mm_loadu_ps(b + 2 * dim + j), a3 = _mm_loadu_ps(b + 3 * dim + j);
      __m128 c0 = _mm_loadu_ps(b + 4 * dim + j), c1 = _mm_loadu_ps(b + 5 * dim + j);
      __m128 c2 = _mm_loadu_ps(b + 6 * dim + j), c3 = _mm_loadu_ps(b + 7 * dim + j);
      _MM_TRANSPOSE4_PS(a0, a1, a2, a3);  // a0: element j of rows 0..3, a1: element j + 1, ...
      _MM_TRANSPOSE4_PS(c0, c1, c2, c3);
      sa = _mm_add_ps(sa, _mm_mul_ps(a0, a0));
      sb = _mm_add_ps(sb, _mm_mul_ps(c0, c0));
      sa = _mm_add_ps(sa, _mm_mul_ps(a1, a1));
      sb = _mm_add_ps(sb, _mm_mul_ps(c1, c1));
      sa = _mm_add_ps(sa, _mm_mul_ps(a2, a2));
      sb = _mm_add_ps(sb, _mm_mul_ps(c2, c2));
      sa = _mm_add_ps(sa, _mm_mul_ps(a3, a3));
      sb = _mm_add_ps(sb, _mm_mul_ps(c3, c3));
    }
    float s[8];
    _mm_storeu_ps(s, sa);
    _mm_storeu_ps(s + 4, sb);
    for (; j < dim; ++j)
      for (int r = 0; r < 8; ++r) {
        const float v = b[r * dim + j];
        s[r] += v * v;
      }
    for (int r = 0; r < 8; ++r)
      if (!(s[r] <= bound) && refused_row(b + r * dim, dim, bounded, non_finite)) return i + r;  // NaN fails <=
  }
#endif
  for (; i < n; ++i) {
    const float* row = x + i * dim;
    float s = 0.0f;
    for (int64_t j = 0; j < dim; ++j) s += row[j] * row[j];
    if (!(s <= bound) && refused_row(row, dim, bounded, non_finite)) return i;  // NaN fails <=
  }
  return -1;
}

std::vector<float> normalized_copy(const float* x, int64_t n, int64_t dim) {
  std::vector<float> out(x, x + n * dim);
  for (int64_t i = 0; i < n; ++i) {
    float* row = out.data() + i * dim;
    double s = 0.0;
    for (int64_t j = 0; j < dim; ++j) s += double(row[j]) * row[j];
    if (s > 0.0) {
      const float inv = static_cast<float>(1.0 / std::sqrt(s));
      for (int64_t j = 0; j < dim; ++j) row[j] *= inv;
    }
  }
  return out;
}

std::vector<float> sample_rows(const float* x, int64_t n, int64_t dim, int64_t cap, uint64_t seed) {
  if (n <= cap) return std::vector<float>(x, x + n * dim);
  // Partial Fisher-Yates over row numbers, then sorted so the gather reads memory in order.
  std::vector<int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < cap; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, n - 1);
    std::swap(perm[i], perm[pick(rng)]);
  }
  perm.resize(static_cast<std::size_t>(cap));
  std::sort(perm.begin(), perm.end());
  std::vector<float> out(static_cast<std::size_t>(cap * dim));
  for (int64_t i = 0; i < cap; ++i)
    std::memcpy(out.data() + i * dim, x + perm[i] * dim, sizeof(float) * dim);
  return out;
}

}  // namespace ivfgpu
