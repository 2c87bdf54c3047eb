// The engine-side index: argument policy (NaN/Inf, sizes, state), metric preparation
// (cosine normalisation), training-sample selection, and delegation to one backend.
// Locking is the C layer's job.
#pragma once

#include <cstdint>
#include <memory>

#include "backend.hpp"
#include "types.hpp"

namespace ivfgpu {

struct SearchArgs {
  const float* queries = nullptr;
  int64_t n = 0;
  int64_t k = 0;
  int64_t nprobe = 0;  // <= 0: the index's default
  int64_t* ids = nullptr;
  float* dists = nullptr;
  MemoryKind memory = MemoryKind::Host;
  void* stream = nullptr;
};

class Index {
 public:
  Index(int64_t dim, const BuildParams& params);
  // An index whose content is a (validated) model, e.g. from a file; the model is moved in.
  Index(HostModel model, const BuildParams& params);

  void train(const float* x, int64_t n);
  void add(const float* x, int64_t n, const int64_t* ids);
  void reset();
  void search(const SearchArgs& args) const;

  int64_t dim() const { return dim_; }
  const BuildParams& params() const { return params_; }
  int64_t ntotal() const { return backend_->ntotal(); }
  bool is_trained() const { return backend_->is_trained(); }
  BackendInfo backend_info() const { return backend_->info(); }
  HostModel snapshot() const { return backend_->snapshot(); }

 private:
  int64_t dim_;
  BuildParams params_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace ivfgpu
