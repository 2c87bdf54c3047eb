#include "vector_ops.hpp"

#include <cmath>
#include <cstring>
#include <algorithm>
#include <numeric>
#include <random>

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

int64_t first_unusable_row(const float* x, int64_t n, int64_t dim, bool bounded, bool* non_finite, float bound) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = x + i * dim;
    float s = 0.0f;
    for (int64_t j = 0; j < dim; ++j) s += row[j] * row[j];
    if (s <= bound) continue;  // NaN fails this too
    bool finite = true;
    for (int64_t j = 0; j < dim; ++j) finite = finite && std::isfinite(row[j]);
    if (!finite || bounded) {
      *non_finite = !finite;
      return i;
    }
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
