#include "rows.hpp"

#include "check.hpp"
#include "device_buffer.hpp"
#include "launch.cuh"
#include "../vector_ops.hpp"

namespace ivfgpu::cuda {

namespace {

// One thread per row, in the host's order and rounding: explicit _rn operations so the
// compiler cannot contract a multiply and an add into an FMA.
__global__ void normalize_rows_kernel(const float* in, int64_t n, int64_t dim, float* out) {
  for (int64_t r = global_thread(); r < n; r += thread_stride()) {
    const float* x = in + r * dim;
    double s = 0.0;
    for (int64_t j = 0; j < dim; ++j) s = __dadd_rn(s, __dmul_rn(static_cast<double>(x[j]), static_cast<double>(x[j])));
    float* y = out + r * dim;
    if (s > 0.0) {
      const float inv = __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(s)));
      for (int64_t j = 0; j < dim; ++j) y[j] = __fmul_rn(x[j], inv);
    } else if (y != x) {
      for (int64_t j = 0; j < dim; ++j) y[j] = x[j];
    }
  }
}

// A thread per row, summing its squares as the host check does (vector_ops.cpp: in dimension
// order, each multiply and add rounded, never fused), so both refuse the same rows. The key is
// row * 2 + 1 for a finite row over the bound, row * 2 for a non-finite one.
__global__ void first_unusable_kernel(const float* x, int64_t n, int64_t dim, bool bounded, float bound,
                                      unsigned long long* first) {
  for (int64_t r = global_thread(); r < n; r += thread_stride()) {
    const float* row = x + r * dim;
    float s = 0.0f;
    for (int64_t j = 0; j < dim; ++j) s = __fadd_rn(s, __fmul_rn(row[j], row[j]));
    if (s <= bound) continue;  // NaN fails it
    bool finite = true;
    for (int64_t j = 0; j < dim; ++j) finite = finite && isfinite(row[j]);
    if (!finite || bounded) atomicMin(first, static_cast<unsigned long long>(r) * 2 + (finite ? 1 : 0));
  }
}

__global__ void first_equal_kernel(const int64_t* ids, int64_t n, int64_t value, unsigned long long* first) {
  for (int64_t i = global_thread(); i < n; i += thread_stride())
    if (ids[i] == value) atomicMin(first, static_cast<unsigned long long>(i));
}

__global__ void sequential_kernel(int64_t* v, int64_t n, int64_t first) {
  for (int64_t i = global_thread(); i < n; i += thread_stride()) v[i] = first + i;
}

template <class Launch>
int64_t first_index(const DeviceContext& ctx, cudaStream_t stream, Launch&& launch) {
  DeviceBuffer<unsigned long long> first(ctx, 1, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(first.data(), 0xff, sizeof(unsigned long long), stream));
  launch(first.data());
  IVF_CUDA_CHECK_LAUNCH();
  unsigned long long host = 0;
  IVF_CUDA_CHECK(cudaMemcpyAsync(&host, first.data(), sizeof host, cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host == ~0ull ? -1 : static_cast<int64_t>(host);
}

}  // namespace

void normalize_rows(cudaStream_t stream, const float* in, int64_t n, int64_t dim, float* out) {
  normalize_rows_kernel<<<grid_for(n, 128), 128, 0, stream>>>(in, n, dim, out);
  IVF_CUDA_CHECK_LAUNCH();
}

void fill_sequential(cudaStream_t stream, int64_t* v, int64_t n, int64_t first) {
  sequential_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(v, n, first);
  IVF_CUDA_CHECK_LAUNCH();
}

void enqueue_first_unusable_row(cudaStream_t stream, const float* x, int64_t n, int64_t dim, bool bounded,
                                unsigned long long* first) {
  first_unusable_kernel<<<grid_for(n, 128), 128, 0, stream>>>(x, n, dim, bounded, kMaxSquaredNorm, first);
  IVF_CUDA_CHECK_LAUNCH();
}

int64_t first_unusable_row(const DeviceContext& ctx, cudaStream_t stream, const float* x, int64_t n, int64_t dim,
                           bool bounded, bool* non_finite) {
  const int64_t key = first_index(ctx, stream, [&](unsigned long long* first) {
    enqueue_first_unusable_row(stream, x, n, dim, bounded, first);
  });
  return key < 0 ? -1 : unusable_row_of(static_cast<unsigned long long>(key), non_finite);
}

int64_t first_equal(const DeviceContext& ctx, cudaStream_t stream, const int64_t* ids, int64_t n, int64_t value) {
  return first_index(ctx, stream, [&](unsigned long long* first) {
    first_equal_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(ids, n, value, first);
  });
}

}  // namespace ivfgpu::cuda
