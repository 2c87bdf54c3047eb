// A typed, non-owning view of a row-major matrix in host or device memory: how vectors travel
// from the C layer down to a backend (queries, training data, added rows).
#pragma once

#include <cstddef>
#include <cstdint>

#include "element_type.hpp"
#include "types.hpp"

namespace ivfgpu {

struct MatrixView {
  const void* data = nullptr;
  ElementType type = ElementType::F32;
  int64_t rows = 0;
  int64_t dim = 0;
  MemoryKind memory = MemoryKind::Host;

  template <class T>
  const T* as() const { return static_cast<const T*>(data); }
  bool on_host() const { return memory == MemoryKind::Host; }
  std::size_t bytes() const {
    return static_cast<std::size_t>(rows) * static_cast<std::size_t>(dim) * element_size(type);
  }
  // The same matrix without its first `first` rows, `count` rows long.
  MatrixView rows_slice(int64_t first, int64_t count) const {
    MatrixView v = *this;
    v.data = static_cast<const char*>(data) + first * dim * static_cast<int64_t>(element_size(type));
    v.rows = count;
    return v;
  }

  static MatrixView host_f32(const float* x, int64_t rows, int64_t dim) {
    return MatrixView{x, ElementType::F32, rows, dim, MemoryKind::Host};
  }
};

}  // namespace ivfgpu
