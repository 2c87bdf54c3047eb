// Trained centroids on the host, with their squared norms: part of a published state, shared
// (not copied) by every later state until the next train.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace ivfgpu {

struct HostCentroids {
  std::vector<float> centroids;  // nlist * dim, row-major
  std::vector<float> norms;      // nlist, ||c||^2
};

using CentroidsPtr = std::shared_ptr<const HostCentroids>;

}  // namespace ivfgpu
