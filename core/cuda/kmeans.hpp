// k-means on the GPU, mirroring the CPU reference (core/cpu/kmeans.cpp): the same seeded
// initial rows, assignment by cuBLAS GEMM + argmin, centroid means from a CUB radix sort of the
// assignment (fixed summation order: repeatable), FAISS-style splitting for empty clusters,
// cosine centroids renormalised every iteration.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "../types.hpp"
#include "device_context.hpp"

namespace ivfgpu::cuda {

// x: n host rows (the already-sampled training set); writes k * dim host centroids.
void kmeans_train(const DeviceContext& ctx, cudaStream_t stream, cublasHandle_t blas, const float* x, int64_t n,
                  int64_t dim, int64_t k, Metric metric, int64_t iters, uint64_t seed, float* centroids);

}  // namespace ivfgpu::cuda
