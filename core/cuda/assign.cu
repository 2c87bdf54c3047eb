#include "assign.hpp"

#include "../progress.hpp"

#include <algorithm>
#include <cfloat>
#include <climits>

#include "check.hpp"
#include "cublas_loader.hpp"
#include "device_buffer.hpp"

namespace ivfgpu::cuda {

namespace {

// One warp per row: the first index of the smallest score (+ norm for L2).
__global__ void argmin_rows_kernel(const float* scores, int64_t rows, int64_t nc, const float* norms,
                                   int32_t* assign) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    const float* s = scores + r * nc;
    float best = FLT_MAX;
    int best_i = INT_MAX;
    for (int64_t c = lane; c < nc; c += 32) {
      const float v = norms ? s[c] + norms[c] : s[c];
      if (v < best || best_i == INT_MAX) {
        best = v;
        best_i = static_cast<int>(c);
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_i, o);
      if (ov < best || (ov == best && oi < best_i)) {
        best = ov;
        best_i = oi;
      }
    }
    if (lane == 0) assign[r] = best_i;
  }
}

}  // namespace

void coarse_gemm(cublasHandle_t blas, const float* x, int64_t n, const float* centroids, int64_t nc,
                 int64_t dim, Metric metric, float* scores) {
  // Row-major scores (n x nc) is column-major (nc x n) = C (nc x dim) * X^T.
  const float alpha = metric == Metric::L2 ? -2.0f : -1.0f;
  const float beta = 0.0f;
  IVF_CUBLAS_CHECK(blas::sgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(nc), static_cast<int>(n),
                               static_cast<int>(dim), &alpha, centroids, static_cast<int>(dim), x,
                               static_cast<int>(dim), &beta, scores, static_cast<int>(nc)));
}

void assign_nearest(const DeviceContext& ctx, cudaStream_t stream, cublasHandle_t blas, const float* x,
                    int64_t n, int64_t dim, const float* centroids, const float* centroid_norms, int64_t nc,
                    Metric metric, int32_t* assign) {
  if (n == 0) return;
  // Bounded scratch: at most 64M scores (256 MB) per GEMM.
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(n, (int64_t{1} << 26) / nc));
  DeviceBuffer<float> scores(ctx, static_cast<std::size_t>(block * nc), stream);
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    progress::poll();
    const int64_t rows = std::min(block, n - r0);
    coarse_gemm(blas, x + r0 * dim, rows, centroids, nc, dim, metric, scores.data());
    const int64_t blocks = std::min<int64_t>((rows + 7) / 8, 1 << 20);
    argmin_rows_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
        scores.data(), rows, nc, metric == Metric::L2 ? centroid_norms : nullptr, assign + r0);
    IVF_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace ivfgpu::cuda
