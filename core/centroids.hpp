// Trained centroids on the host, with their squared norms: part of a published state, shared
// (not copied) by every later state until the next train.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "host_model.hpp"

namespace ivfgpu {

struct HostCentroids {
  std::vector<float> centroids;  // nlist * dim, row-major
  std::vector<float> norms;      // nlist, ||c||^2
};

using CentroidsPtr = std::shared_ptr<const HostCentroids>;

// The model every export starts from: the shape and, when trained, a copy of the centroids;
// the backend's list store adds the lists.
inline HostModel model_with_centroids(int64_t dim, Metric metric, int64_t nlist, const CentroidsPtr& c) {
  HostModel m = HostModel::empty(dim, metric, nlist);
  if (c) {
    m.trained = true;
    m.centroids = c->centroids;
    m.centroid_norms = c->norms;
  }
  return m;
}

}  // namespace ivfgpu
