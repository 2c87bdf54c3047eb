// The host-side index model shared by every backend and by the file formats (docs/architecture.md §2):
// centroids with their squared norms, then all list vectors in one contiguous row-major array,
// list by list, with list_offsets[nlist + 1] and ids parallel to the vectors.
#pragma once

#include <cstdint>
#include <vector>

#include "element_type.hpp"
#include "types.hpp"

namespace ivfgpu {

struct HostModel {
  int64_t dim = 0;
  Metric metric = Metric::L2;
  int64_t nlist = 0;
  bool trained = false;
  std::vector<float> centroids;        // nlist * dim (empty until trained)
  std::vector<float> centroid_norms;   // nlist, ||c||^2
  std::vector<int64_t> list_offsets;   // nlist + 1, list l is [offsets[l], offsets[l+1])
  // The rows, list by list: f32 in `vectors`; a compact storage type (issue 11) as its raw
  // elements in `packed` (ntotal * dim * element_size(type) bytes), `vectors` then empty.
  ElementType type = ElementType::F32;
  std::vector<float> vectors;          // ntotal * dim (f32)
  std::vector<unsigned char> packed;   // ntotal * dim elements of `type` (other types)
  std::vector<int64_t> ids;            // ntotal

  std::size_t row_bytes() const { return static_cast<std::size_t>(dim) * element_size(type); }
  const void* row_data() const {
    return type == ElementType::F32 ? static_cast<const void*>(vectors.data()) : static_cast<const void*>(packed.data());
  }

  int64_t ntotal() const { return static_cast<int64_t>(ids.size()); }
  int64_t list_size(int64_t l) const { return list_offsets[l + 1] - list_offsets[l]; }

  // An untrained model of the given shape: no centroids, empty lists.
  static HostModel empty(int64_t dim, Metric metric, int64_t nlist);
  // Recompute centroid_norms from centroids.
  void compute_centroid_norms();
  // Throws Errc::CorruptData when sizes, offsets or values are inconsistent; loaders call this
  // before a model reaches a backend.
  void validate() const;
  // Part of validate(): no row or centroid that an add would refuse (Errc::CorruptData).
  void check_rows_usable() const;
  std::size_t bytes() const;
};

}  // namespace ivfgpu
