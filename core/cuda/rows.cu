#include "rows.hpp"

#include "check.hpp"
#include "device_buffer.hpp"
#include "element_traits.cuh"
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

// A lane per row, summing its squares as the host check does (vector_ops.cpp: in dimension
// order, each multiply and add rounded, never fused), so both refuse the same rows; the rows are
// read in their own type (f16 and bf16 decode exactly to the f32 the host checks). A warp takes
// 32 rows a chunk of 32 dimensions at a time, each load a row's 32 consecutive elements, through
// shared memory; the next chunk's 32 loads are in flight while a lane sums the current one. A
// thread reading its own row alone made each load touch 32 rows' lines (1M x 128 f16, 10,000
// queries, H100: 14 us, after a separate 6 us decode into f32; with a chunk's loads waited for
// eight at a time, 22.7 us). The loads keep the elements' bits (DeviceElement::load_bits,
// decoded on their way to shared memory) and are never predicated: with each f16 load and its
// decode in a branch of their own (the PTX), the check took 23.0 us against f32's 8.4 (ncu,
// H100), as if each waited for its load before the next was issued; now 5.8 us, as f32 (H200).
// Past the rows or the dimensions a load reads the last row or dimension again, which no lane's
// sum or test counts. The key is row * 2 + 1
// for a finite row over the bound, row * 2 for a non-finite one.
constexpr int kCheckWarps = 2;
template <class T>
__device__ __forceinline__ void load_check_chunk(const T* x, int64_t r0, int rows, int64_t dim, int64_t j,
                                                 typename DeviceElement<T>::Bits (&v)[32]) {
  const T* const col = x + r0 * dim + (j < dim ? j : dim - 1);
#pragma unroll
  for (int r = 0; r < 32; ++r) v[r] = DeviceElement<T>::load_bits(col + (r < rows ? r : rows - 1) * dim);
}
template <class T>
__global__ void __launch_bounds__(kCheckWarps * 32)
    first_unusable_kernel(const T* x, int64_t n, int64_t dim, bool bounded, float bound, unsigned long long* first) {
  __shared__ float chunk[kCheckWarps][32][33];  // [row][dimension], padded: a lane's row reads no shared bank twice
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float(*const c)[33] = chunk[warp];
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kCheckWarps;
  for (int64_t r0 = (static_cast<int64_t>(blockIdx.x) * kCheckWarps + warp) * 32; r0 < n; r0 += warps * 32) {
    const int rows = static_cast<int>(n - r0 < 32 ? n - r0 : 32);
    float s = 0.0f;
    bool finite = true;
    typename DeviceElement<T>::Bits v[32];
    load_check_chunk(x, r0, rows, dim, lane, v);
    for (int64_t j0 = 0; j0 < dim; j0 += 32) {
#pragma unroll
      for (int r = 0; r < 32; ++r) c[r][lane] = DeviceElement<T>::decode(v[r]);
      __syncwarp();
      if (j0 + 32 < dim) load_check_chunk(x, r0, rows, dim, j0 + 32 + lane, v);
      const int m = static_cast<int>(dim - j0 < 32 ? dim - j0 : 32);
      for (int i = 0; i < m; ++i) {
        const float e = c[lane][i];
        s = __fadd_rn(s, __fmul_rn(e, e));
        finite = finite && isfinite(e);
      }
      __syncwarp();  // the chunk is read before the next one is written
    }
    if (lane >= rows || s <= bound) continue;  // NaN fails it
    if (!finite || bounded) atomicMin(first, static_cast<unsigned long long>(r0 + lane) * 2 + (finite ? 1 : 0));
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

void enqueue_first_unusable_row(cudaStream_t stream, ElementType type, const void* x, int64_t n, int64_t dim,
                                bool bounded, unsigned long long* first) {
  if (n <= 0) return;
  const unsigned grid = grid_for(n, kCheckWarps * 32);  // a warp a 32 rows, grid-stride past the cap
  dispatch_element_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!DeviceElement<T>::kInteger)
      first_unusable_kernel<T><<<grid, kCheckWarps * 32, 0, stream>>>(static_cast<const T*>(x), n, dim, bounded,
                                                                       kMaxSquaredNorm, first);
    else
      fail(Errc::Internal, "integer rows need no check for NaN, Inf or their norm");
  });
  IVF_CUDA_CHECK_LAUNCH();
}

int64_t first_unusable_row(const DeviceContext& ctx, cudaStream_t stream, ElementType type, const void* x, int64_t n,
                           int64_t dim, bool bounded, bool* non_finite) {
  const int64_t key = first_index(ctx, stream, [&](unsigned long long* first) {
    enqueue_first_unusable_row(stream, type, x, n, dim, bounded, first);
  });
  return key < 0 ? -1 : unusable_row_of(static_cast<unsigned long long>(key), non_finite);
}

int64_t first_equal(const DeviceContext& ctx, cudaStream_t stream, const int64_t* ids, int64_t n, int64_t value) {
  return first_index(ctx, stream, [&](unsigned long long* first) {
    first_equal_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(ids, n, value, first);
  });
}

}  // namespace ivfgpu::cuda
