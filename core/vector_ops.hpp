// Host-side helpers on row-major float matrices used by the Index before any backend runs.
#pragma once

#include <cstdint>
#include <vector>

namespace ivfgpu {

// Index of the first row holding NaN or +-Inf, or -1.
int64_t first_non_finite_row(const float* x, int64_t n, int64_t dim);

// The largest squared L2 norm a row may have under the L2 and inner-product metrics: with both
// rows at most this, no distance between them (||x - q||^2 <= 4 x this, |x . q| <= this) and
// no partial sum overflows float, with room for rounding. Elements up to ~6.5e18.
constexpr float kMaxSquaredNorm = 3.4028235e38f / 8;

// The first row of x that no distance is defined for, or -1: one holding NaN or Inf
// (*non_finite = true), or, when `bounded`, one whose squared norm exceeds kMaxSquaredNorm
// (*non_finite = false; `bound` replaces kMaxSquaredNorm where given). One pass; the common
// path adds squares and compares once per row.
int64_t first_unusable_row(const float* x, int64_t n, int64_t dim, bool bounded, bool* non_finite,
                           float bound = kMaxSquaredNorm);
// Copy of x with every row scaled to unit L2 norm (zero rows stay zero).
std::vector<float> normalized_copy(const float* x, int64_t n, int64_t dim);
// A seeded random subset of at most `cap` rows of x (all rows, in order, when n <= cap).
std::vector<float> sample_rows(const float* x, int64_t n, int64_t dim, int64_t cap, uint64_t seed);

}  // namespace ivfgpu
