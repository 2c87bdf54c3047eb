// Nearest centroid of every row (train and add): one cuBLAS GEMM per block of rows, then an
// argmin per row that adds the centroid norms (L2). Ties go to the smaller centroid index,
// like the CPU reference.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "../types.hpp"
#include "device_context.hpp"

namespace ivfgpu::cuda {

// scores[n x nc] (row-major) = alpha * x * c^T, with alpha -2 (L2) or -1 (inner product): the
// "smaller is better" coarse score without the ||c||^2 term.
void coarse_gemm(cublasHandle_t blas, const float* x, int64_t n, const float* centroids, int64_t nc,
                 int64_t dim, Metric metric, float* scores);

// assign[i] = nearest of nc centroids to row i of x (device pointers).
void assign_nearest(const DeviceContext& ctx, cudaStream_t stream, cublasHandle_t blas, const float* x,
                    int64_t n, int64_t dim, const float* centroids, const float* centroid_norms, int64_t nc,
                    Metric metric, int32_t* assign);

}  // namespace ivfgpu::cuda
