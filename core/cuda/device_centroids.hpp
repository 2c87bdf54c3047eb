// Centroids on the device, and training them: shared by the CUDA backend with every list on
// the device and the one whose lists live in the host tier.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "../centroids.hpp"
#include "../matrix_view.hpp"
#include "../types.hpp"
#include "device_buffer.hpp"

namespace ivfgpu::cuda {

struct DeviceCentroids {
  DeviceBuffer<float> centroids, norms;
};

// The host centroids copied to the device (state memory); synchronises `stream`.
std::shared_ptr<const DeviceCentroids> upload_centroids(const DeviceContext& ctx, cudaStream_t stream,
                                                        const HostCentroids& host);
// k-means on a host sample (cosine: on unit vectors), on `stream`.
CentroidsPtr train_centroids(const DeviceContext& ctx, cudaStream_t stream, const BuildParams& params, int64_t dim,
                             const MatrixView& sample);

}  // namespace ivfgpu::cuda
