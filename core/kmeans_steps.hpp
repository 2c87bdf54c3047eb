// The host-side steps of k-means that both backends share, so that CPU and GPU training
// follow one rule and stay comparable: initial centroids, norms, and the splitting of empty
// clusters. Each works on k centroid rows only; the heavy steps (assignment, means) are the
// backends' own.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "types.hpp"

namespace ivfgpu {

// k distinct rows of x (n >= k) chosen with rng, copied into centroids[k * dim].
void pick_initial_centroids(const float* x, int64_t n, int64_t dim, int64_t k, std::mt19937_64& rng,
                            float* centroids);

// norms[i] = ||c_i||^2 for the k rows of c.
void squared_norms(const float* c, int64_t k, int64_t dim, std::vector<float>& norms);

// Each empty cluster takes a copy of a cluster picked with probability proportional to
// (size - 1); the two copies are nudged apart symmetrically so the next assignment splits
// the points between them (FAISS's rule). counts are updated to match.
void split_into_empty(float* c, int64_t k, int64_t dim, int64_t n, std::vector<int64_t>& counts,
                      std::mt19937_64& rng);

// The end of every iteration, after the means: empty clusters split, then (cosine) every
// centroid back to unit length.
void end_iteration(float* c, int64_t k, int64_t dim, int64_t n, std::vector<int64_t>& counts, Metric metric,
                   std::mt19937_64& rng);

}  // namespace ivfgpu
