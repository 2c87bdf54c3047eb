// Device k-means with the training rows left on the host (kmeans_train_streamed, the path of a
// device budget too small for the sample) against the in-memory device k-means.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/backend.hpp"
#include "core/cuda/device_context.hpp"
#include "core/cuda/kmeans.hpp"
#include "gpu_test_util.hpp"

namespace {

using ivfgpu::Metric;
using ivfgpu::cuda::DeviceContext;

// The k-means objective: the sum over rows of the squared distance to the nearest centroid.
double objective(const std::vector<float>& x, const std::vector<float>& c, int64_t dim) {
  const int64_t n = static_cast<int64_t>(x.size()) / dim, k = static_cast<int64_t>(c.size()) / dim;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double best = std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < k; ++j) {
      double d = 0;
      for (int64_t t = 0; t < dim; ++t) {
        const double e = double(x[i * dim + t]) - double(c[j * dim + t]);
        d += e * e;
      }
      best = std::min(best, d);
    }
    total += best;
  }
  return total;
}

struct Trained {
  std::vector<float> in_memory, streamed;
};

Trained train_both(const std::vector<float>& x, int64_t dim, int64_t k, Metric metric, int64_t block_rows) {
  const int64_t n = static_cast<int64_t>(x.size()) / dim;
  DeviceContext ctx(0);
  DeviceContext::Lease lease(ctx, nullptr);
  Trained t;
  t.in_memory.resize(static_cast<std::size_t>(k * dim));
  t.streamed.resize(static_cast<std::size_t>(k * dim));
  ivfgpu::cuda::kmeans_train(ctx, lease.stream(), lease.blas(), x.data(), n, dim, k, metric, 12, 5,
                             t.in_memory.data());
  ivfgpu::cuda::kmeans_train_streamed(ctx, lease.stream(), lease.blas(), x.data(), n, dim, k, metric, 12, 5,
                                      block_rows, 4, t.streamed.data());
  return t;
}

// One block of every row: the same assignment calls, so the host's means must be the device's
// bit for bit (same order of the double sums, same rounding), empty-cluster splits included.
TEST(GpuKMeansStreamed, OneBlockEqualsTheInMemoryKMeansBitForBit) {
  if (ivfgpu::cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device: GPU test skipped";
  for (Metric metric : {Metric::L2, Metric::InnerProduct}) {
    // 300 clusters over 200 centres: some start or fall empty and are split.
    const auto x = gputest::mixture(20000, 24, 200, 3);
    const Trained t = train_both(x, 24, 300, metric, 20000);
    ASSERT_EQ(t.in_memory.size(), t.streamed.size());
    int64_t differing = 0;
    for (std::size_t i = 0; i < t.streamed.size(); ++i) differing += t.in_memory[i] != t.streamed[i];
    EXPECT_EQ(differing, 0) << "metric " << static_cast<int>(metric);
  }
}

// Small blocks (and a last partial one): the blocks' assignments may round differently, so
// the centroids are compared by what they are for: the objective matches within 0.5%.
TEST(GpuKMeansStreamed, SmallBlocksReachTheSameObjective) {
  if (ivfgpu::cuda_device_count() == 0) GTEST_SKIP() << "no usable CUDA device: GPU test skipped";
  const int64_t dim = 33;
  const auto x = gputest::mixture(9001, dim, 64, 11);
  const Trained t = train_both(x, dim, 64, Metric::L2, 997);
  const double a = objective(x, t.in_memory, dim), b = objective(x, t.streamed, dim);
  EXPECT_NEAR(b / a, 1.0, 0.005) << "in-memory " << a << ", streamed " << b;
  for (float v : t.streamed) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
