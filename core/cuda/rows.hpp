// Preparation and checks of device-memory rows, the device twins of vector_ops.hpp: cosine
// normalisation that rounds exactly as the host's (so a vector normalised on either side is
// the same bits), and the NaN/Inf and reserved-id checks that host data gets in the Index.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device_context.hpp"
#include "../element_type.hpp"

namespace ivfgpu::cuda {

// out = every row of in scaled to unit L2 norm (zero rows stay zero); in == out is allowed.
// The same arithmetic as normalized_copy: a sequential double sum of squares, 1/sqrt in double
// rounded once to float, one float multiply per element.
void normalize_rows(cudaStream_t stream, const float* in, int64_t n, int64_t dim, float* out);

// The device twin of first_unusable_row (vector_ops.hpp): the first row holding NaN or +-Inf,
// or (bounded) whose squared norm passes kMaxSquaredNorm, summed in the host's order and
// rounding; -1 if none, else *non_finite says which. x holds n x dim elements of `type` (f32,
// f16 or bf16: each decoded exactly, as the host decodes them). Synchronises `stream`.
int64_t first_unusable_row(const DeviceContext& ctx, cudaStream_t stream, ElementType type, const void* x, int64_t n,
                           int64_t dim, bool bounded, bool* non_finite);

// The same check queued without waiting: the first unusable row's key, row * 2 + 1 for a finite
// row over the bound and row * 2 for a non-finite one, is lowered into *first (device memory,
// which the caller set to ~0: no such row, as the key stays). unusable_row_of reads a key.
void enqueue_first_unusable_row(cudaStream_t stream, ElementType type, const void* x, int64_t n, int64_t dim,
                                bool bounded, unsigned long long* first);
inline int64_t unusable_row_of(unsigned long long key, bool* non_finite) {
  if (key == ~0ull) return -1;
  *non_finite = key % 2 == 0;
  return static_cast<int64_t>(key / 2);
}

// v[i] = first + i.
void fill_sequential(cudaStream_t stream, int64_t* v, int64_t n, int64_t first);

// First i with ids[i] == value, or -1. Synchronises `stream`.
int64_t first_equal(const DeviceContext& ctx, cudaStream_t stream, const int64_t* ids, int64_t n, int64_t value);

}  // namespace ivfgpu::cuda
