#include "device_centroids.hpp"

#include <utility>
#include <vector>

#include "check.hpp"
#include "kmeans.hpp"

namespace ivfgpu::cuda {

std::shared_ptr<const DeviceCentroids> upload_centroids(const DeviceContext& ctx, cudaStream_t stream,
                                                        const HostCentroids& host) {
  auto d = std::make_shared<DeviceCentroids>();
  d->centroids = DeviceBuffer<float>(ctx, host.centroids.size(), stream, MemoryUse::State);
  d->norms = DeviceBuffer<float>(ctx, host.norms.size(), stream, MemoryUse::State);
  IVF_CUDA_CHECK(cudaMemcpyAsync(d->centroids.data(), host.centroids.data(), d->centroids.bytes(),
                                 cudaMemcpyHostToDevice, stream));
  IVF_CUDA_CHECK(cudaMemcpyAsync(d->norms.data(), host.norms.data(), d->norms.bytes(), cudaMemcpyHostToDevice, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  return d;
}

CentroidsPtr train_centroids(const DeviceContext& ctx, cudaStream_t stream, const BuildParams& params, int64_t dim,
                             const MatrixView& sample) {
  // The sample is on the host (the Index draws it there).
  return train_on_sample(params, dim, sample, [&](const float* x, int64_t rows, float* centroids) {
    DeviceContext::Lease lease(ctx, stream);
    kmeans_train(ctx, stream, lease.blas(), x, rows, dim, params.nlist, params.metric, params.kmeans_iters,
                 static_cast<uint64_t>(params.seed), centroids);
  });
}

}  // namespace ivfgpu::cuda
