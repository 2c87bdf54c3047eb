// Trained centroids on the host, with their squared norms: part of a published state, shared
// (not copied) by every later state until the next train.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "host_model.hpp"
#include "kmeans_steps.hpp"
#include "matrix_view.hpp"
#include "types.hpp"
#include "vector_ops.hpp"

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

// A trained model's centroids taken over (the inverse of model_with_centroids); null when the
// model is not trained.
inline CentroidsPtr centroids_from(HostModel& model) {
  if (!model.trained) return nullptr;
  auto c = std::make_shared<HostCentroids>();
  c->centroids = std::move(model.centroids);
  c->norms = std::move(model.centroid_norms);
  return c;
}

// Centroids trained on a host f32 sample, whatever runs k-means: cosine trains on unit vectors
// (the one place training normalises); kmeans(x, rows, centroids) fills nlist x dim floats.
template <class KMeans>
CentroidsPtr train_on_sample(const BuildParams& params, int64_t dim, const MatrixView& sample, KMeans&& kmeans) {
  std::vector<float> unit;
  const float* x = sample.as<float>();
  if (params.metric == Metric::Cosine) {
    unit = normalized_copy(x, sample.rows, dim);
    x = unit.data();
  }
  auto c = std::make_shared<HostCentroids>();
  c->centroids.resize(static_cast<std::size_t>(params.nlist * dim));
  kmeans(x, sample.rows, c->centroids.data());
  squared_norms(c->centroids.data(), params.nlist, dim, c->norms);
  return c;
}

}  // namespace ivfgpu
