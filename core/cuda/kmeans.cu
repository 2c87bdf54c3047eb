#include "kmeans.hpp"

#include "../progress.hpp"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "../cpu/parallel.hpp"
#include "../kmeans_steps.hpp"
#include "../vector_ops.hpp"
#include "assign.hpp"
#include "check.hpp"
#include "launch.cuh"
#include "device_buffer.hpp"

namespace ivfgpu::cuda {

namespace {

__global__ void iota32_kernel(int32_t* v, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    v[i] = static_cast<int32_t>(i);
}

// One block per centroid: the mean of its members (rows sorted by cluster), summed in double
// in a fixed order. Empty clusters keep their previous centroid (the host splits them).
__global__ void centroid_means_kernel(const float* x, int64_t dim, const int32_t* sorted_rows,
                                      const int64_t* first, const int64_t* count, float* centroids) {
  const int64_t c = blockIdx.x;
  const int64_t m = count[c];
  if (m == 0) return;
  const int32_t* rows = sorted_rows + first[c];
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
    double s = 0.0;
    for (int64_t i = 0; i < m; ++i) s += x[static_cast<int64_t>(rows[i]) * dim + j];
    centroids[c * dim + j] = static_cast<float>(s / static_cast<double>(m));
  }
}

}  // namespace

void kmeans_train(const DeviceContext& ctx, cudaStream_t stream, cublasHandle_t blas, const float* x, int64_t n,
                  int64_t dim, int64_t k, Metric metric, int64_t iters, uint64_t seed, float* centroids) {
  std::mt19937_64 rng(seed);
  pick_initial_centroids(x, n, dim, k, rng, centroids);
  if (n >= (int64_t{1} << 31)) fail(Errc::Unsupported, "train: more than 2^31 - 1 training vectors");
  DeviceBuffer<float> d_x(ctx, static_cast<std::size_t>(n * dim), stream);
  DeviceBuffer<float> d_c(ctx, static_cast<std::size_t>(k * dim), stream), d_norms(ctx, k, stream);
  DeviceBuffer<int32_t> assign(ctx, n, stream), sorted_assign(ctx, n, stream);
  DeviceBuffer<int32_t> rows(ctx, n, stream), sorted_rows(ctx, n, stream);
  DeviceBuffer<int64_t> d_first(ctx, k, stream), d_count(ctx, k, stream);
  const int end_bit = radix_end_bit(k);
  std::size_t tmp_bytes = 0;
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, assign.data(), sorted_assign.data(),
                                                 rows.data(), sorted_rows.data(), static_cast<int>(n), 0, end_bit,
                                                 stream));
  DeviceBuffer<unsigned char> tmp(ctx, tmp_bytes, stream);
  IVF_CUDA_CHECK(cudaMemcpyAsync(d_x.data(), x, d_x.bytes(), cudaMemcpyHostToDevice, stream));
  iota32_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(rows.data(), n);
  IVF_CUDA_CHECK_LAUNCH();

  std::vector<float> norms;
  std::vector<int32_t> h_assign(static_cast<std::size_t>(n));
  std::vector<int64_t> counts(static_cast<std::size_t>(k)), first(static_cast<std::size_t>(k));
  for (int64_t it = 0; it < iters; ++it) {
    progress::set(static_cast<double>(it) / static_cast<double>(iters));
    squared_norms(centroids, k, dim, norms);
    IVF_CUDA_CHECK(cudaMemcpyAsync(d_c.data(), centroids, d_c.bytes(), cudaMemcpyHostToDevice, stream));
    IVF_CUDA_CHECK(cudaMemcpyAsync(d_norms.data(), norms.data(), d_norms.bytes(), cudaMemcpyHostToDevice, stream));
    assign_nearest(ctx, stream, blas, d_x.data(), n, dim, d_c.data(), d_norms.data(), k, metric, assign.data());
    IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data(), tmp_bytes, assign.data(), sorted_assign.data(),
                                                   rows.data(), sorted_rows.data(), static_cast<int>(n), 0,
                                                   end_bit, stream));
    // Cluster sizes from the sorted assignment (host: k counters, one pass).
    IVF_CUDA_CHECK(cudaMemcpyAsync(h_assign.data(), sorted_assign.data(), sizeof(int32_t) * n,
                                   cudaMemcpyDeviceToHost, stream));
    IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::fill(counts.begin(), counts.end(), 0);
    for (int32_t a : h_assign) ++counts[a];
    for (int64_t c = 0; c < k; ++c) first[c] = c == 0 ? 0 : first[c - 1] + counts[c - 1];
    IVF_CUDA_CHECK(cudaMemcpyAsync(d_first.data(), first.data(), d_first.bytes(), cudaMemcpyHostToDevice, stream));
    IVF_CUDA_CHECK(cudaMemcpyAsync(d_count.data(), counts.data(), d_count.bytes(), cudaMemcpyHostToDevice, stream));
    const unsigned threads = static_cast<unsigned>(std::min<int64_t>(256, (dim + 31) / 32 * 32));
    centroid_means_kernel<<<static_cast<unsigned>(k), threads, 0, stream>>>(d_x.data(), dim, sorted_rows.data(),
                                                                            d_first.data(), d_count.data(), d_c.data());
    IVF_CUDA_CHECK_LAUNCH();
    IVF_CUDA_CHECK(cudaMemcpyAsync(centroids, d_c.data(), d_c.bytes(), cudaMemcpyDeviceToHost, stream));
    IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    end_iteration(centroids, k, dim, n, counts, metric, rng);
  }
}

namespace {

// The means of the clusters of `assign`, summed on the host exactly as centroid_means_kernel
// sums them on the device: per cluster, its rows in ascending order, in double, then divided
// by the count and rounded to float. Empty clusters keep their previous centroid.
void host_cluster_means(const float* x, int64_t n, int64_t dim, int64_t k, const std::vector<int32_t>& assign,
                        int threads, std::vector<int64_t>& counts, float* centroids) {
  std::fill(counts.begin(), counts.end(), 0);
  for (int64_t i = 0; i < n; ++i) ++counts[assign[i]];
  // Rows grouped by cluster, ascending within each (a counting sort: stable).
  std::vector<int64_t> first(static_cast<std::size_t>(k) + 1, 0);
  for (int64_t c = 0; c < k; ++c) first[c + 1] = first[c] + counts[c];
  std::vector<int64_t> next(first.begin(), first.end() - 1);
  std::vector<int32_t> rows(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[next[assign[i]]++] = static_cast<int32_t>(i);
  parallel_for(k, threads, 16, [&](int64_t c0, int64_t c1) {
    std::vector<double> s(static_cast<std::size_t>(dim));
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t m = counts[c];
      if (m == 0) continue;
      std::fill(s.begin(), s.end(), 0.0);
      for (int64_t r = first[c]; r < first[c + 1]; ++r) {
        const float* row = x + static_cast<int64_t>(rows[r]) * dim;
        for (int64_t j = 0; j < dim; ++j) s[j] += row[j];
      }
      for (int64_t j = 0; j < dim; ++j) centroids[c * dim + j] = static_cast<float>(s[j] / static_cast<double>(m));
    }
  });
}

}  // namespace

void kmeans_train_streamed(const DeviceContext& ctx, cudaStream_t stream, cublasHandle_t blas, const float* x,
                           int64_t n, int64_t dim, int64_t k, Metric metric, int64_t iters, uint64_t seed,
                           int64_t block_rows, int threads, float* centroids) {
  std::mt19937_64 rng(seed);
  pick_initial_centroids(x, n, dim, k, rng, centroids);
  if (n >= (int64_t{1} << 31)) fail(Errc::Unsupported, "train: more than 2^31 - 1 training vectors");
  const int64_t block = std::max<int64_t>(1, std::min(block_rows, n));
  DeviceBuffer<float> d_x(ctx, static_cast<std::size_t>(block * dim), stream);
  DeviceBuffer<float> d_c(ctx, static_cast<std::size_t>(k * dim), stream), d_norms(ctx, k, stream);
  DeviceBuffer<int32_t> d_assign(ctx, block, stream);
  std::vector<float> norms;
  std::vector<int32_t> h_assign(static_cast<std::size_t>(n));
  std::vector<int64_t> counts(static_cast<std::size_t>(k));
  const int64_t blocks = (n + block - 1) / block;
  for (int64_t it = 0; it < iters; ++it) {
    squared_norms(centroids, k, dim, norms);
    IVF_CUDA_CHECK(cudaMemcpyAsync(d_c.data(), centroids, d_c.bytes(), cudaMemcpyHostToDevice, stream));
    IVF_CUDA_CHECK(cudaMemcpyAsync(d_norms.data(), norms.data(), d_norms.bytes(), cudaMemcpyHostToDevice, stream));
    for (int64_t b = 0; b < blocks; ++b) {
      progress::set((static_cast<double>(it) + 0.9 * static_cast<double>(b) / static_cast<double>(blocks)) /
                    static_cast<double>(iters));
      const int64_t r0 = b * block, rows = std::min(block, n - r0);
      IVF_CUDA_CHECK(cudaMemcpyAsync(d_x.data(), x + r0 * dim, sizeof(float) * rows * dim, cudaMemcpyHostToDevice,
                                     stream));
      assign_nearest(ctx, stream, blas, d_x.data(), rows, dim, d_c.data(), d_norms.data(), k, metric, d_assign.data());
      IVF_CUDA_CHECK(cudaMemcpyAsync(h_assign.data() + r0, d_assign.data(), sizeof(int32_t) * rows,
                                     cudaMemcpyDeviceToHost, stream));
      // The block buffer is reused by the next block's copy (and the host rows may go).
      IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    host_cluster_means(x, n, dim, k, h_assign, threads, counts, centroids);
    end_iteration(centroids, k, dim, n, counts, metric, rng);
  }
}

}  // namespace ivfgpu::cuda
