#include "host_model.hpp"

#include <cmath>
#include <string>

#include "element_convert.hpp"
#include "errors.hpp"
#include "kmeans_steps.hpp"
#include "vector_ops.hpp"

namespace ivfgpu {

HostModel HostModel::empty(int64_t dim, Metric metric, int64_t nlist) {
  HostModel m;
  m.dim = dim;
  m.metric = metric;
  m.nlist = nlist;
  m.list_offsets.assign(static_cast<std::size_t>(nlist) + 1, 0);
  return m;
}

void HostModel::compute_centroid_norms() { squared_norms(centroids.data(), nlist, dim, centroid_norms); }

void HostModel::validate() const {
  auto bad = [](const std::string& what) { fail(Errc::CorruptData, "index model: " + what); };
  if (dim < 1) bad("dimension < 1");
  if (nlist < 1) bad("nlist < 1");
  if (static_cast<int32_t>(metric) < 0 || static_cast<int32_t>(metric) > 2) bad("metric out of range");
  if (list_offsets.size() != static_cast<std::size_t>(nlist) + 1) bad("list_offsets size != nlist + 1");
  if (list_offsets.front() != 0) bad("list_offsets[0] != 0");
  for (int64_t l = 0; l < nlist; ++l)
    if (list_offsets[l + 1] < list_offsets[l]) bad("list_offsets not monotone");
  if (list_offsets.back() != ntotal()) bad("list_offsets do not end at ntotal");
  if (type == ElementType::F32) {
    if (vectors.size() / static_cast<std::size_t>(dim) != ids.size() ||
        vectors.size() % static_cast<std::size_t>(dim) != 0 || !packed.empty())
      bad("vector array size != ntotal * dim");
  } else if (packed.size() != ids.size() * row_bytes() || !vectors.empty()) {
    bad(std::string(element_name(type)) + " row array size != ntotal * dim");
  }
  if (trained) {
    if (centroids.size() != static_cast<std::size_t>(nlist * dim)) bad("centroid array size != nlist * dim");
    if (centroid_norms.size() != static_cast<std::size_t>(nlist)) bad("centroid norm array size != nlist");
    for (float v : centroids)
      if (!std::isfinite(v)) bad("non-finite centroid value");
  } else if (ntotal() != 0 || !centroids.empty()) {
    bad("untrained model holds centroids or vectors");
  }
  check_rows_usable();
}

// What an add refuses a file may not bring in: under L2 and inner product a row (or centroid)
// whose squared norm passes kMaxSquaredNorm could overflow float distances (a FAISS file has
// no checksum; an older libivfgpu stored them). An add checks f32 input before it is rounded
// to bf16, which may grow a norm by up to (1 + 2^-8)^2: bf16 rows get that much room, so every
// file libivfgpu writes opens again. f16 and integer rows cannot reach the bound.
void HostModel::check_rows_usable() const {
  if (metric == Metric::Cosine) return;
  bool non_finite = false;
  if (trained && first_unusable_row(centroids.data(), nlist, dim, true, &non_finite) >= 0)
    fail(Errc::CorruptData, "index model: a centroid has a squared norm beyond 4.25e37 (its distances could overflow "
                            "float)");
  if (type != ElementType::F32 && type != ElementType::BF16) return;
  const float bound = type == ElementType::BF16 ? kMaxSquaredNorm * 1.008f : kMaxSquaredNorm;
  const void* rows = type == ElementType::F32 ? static_cast<const void*>(vectors.data()) : packed.data();
  const int64_t at = first_unusable(MatrixView{rows, type, ntotal(), dim, MemoryKind::Host}, true, &non_finite, bound);
  if (at >= 0)
    fail(Errc::CorruptData, "index model: row " + std::to_string(at) +
                                (non_finite ? " holds NaN or Inf"
                                            : " has a squared norm beyond 4.25e37 (its distances could overflow "
                                              "float; libivfgpu refuses such rows under L2 and inner product)"));
}

std::size_t HostModel::bytes() const {
  return centroids.size() * sizeof(float) + centroid_norms.size() * sizeof(float) +
         list_offsets.size() * sizeof(int64_t) + vectors.size() * sizeof(float) + packed.size() +
         ids.size() * sizeof(int64_t);
}

}  // namespace ivfgpu
