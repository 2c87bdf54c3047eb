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

// The same k-means with the training rows left on the host, for a device budget that cannot
// hold them: each iteration streams them through a device block of `block_rows` rows for the
// assignment, and the means are summed on the host (`threads`) in the device's order. With
// block_rows >= n the centroids equal kmeans_train's bit for bit.
void kmeans_train_streamed(const DeviceContext& ctx, cudaStream_t stream, cublasHandle_t blas, const float* x,
                           int64_t n, int64_t dim, int64_t k, Metric metric, int64_t iters, uint64_t seed,
                           int64_t block_rows, int threads, float* centroids);

}  // namespace ivfgpu::cuda
