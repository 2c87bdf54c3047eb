// Host-side helpers on row-major float matrices used by the Index before any backend runs.
#pragma once

#include <cstdint>
#include <vector>

namespace ivfgpu {

// Index of the first row holding NaN or +-Inf, or -1.
int64_t first_non_finite_row(const float* x, int64_t n, int64_t dim);
// Copy of x with every row scaled to unit L2 norm (zero rows stay zero).
std::vector<float> normalized_copy(const float* x, int64_t n, int64_t dim);
// A seeded random subset of at most `cap` rows of x (all rows, in order, when n <= cap).
std::vector<float> sample_rows(const float* x, int64_t n, int64_t dim, int64_t cap, uint64_t seed);

}  // namespace ivfgpu
