// The interface every backend (cpu/, cuda/) implements. The Index above it has already
// checked arguments, converted and normalised host data and chosen the training sample, so a
// backend sees only well-formed float data of the index's dimension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "host_model.hpp"
#include "types.hpp"

namespace ivfgpu {

struct SearchRequest {
  const float* queries = nullptr;  // n * dim, in `memory`
  int64_t n = 0;
  int64_t k = 0;
  int64_t nprobe = 0;  // already clamped to [1, nlist]
  int64_t* ids = nullptr;    // n * k, in `memory`
  float* dists = nullptr;    // n * k, in `memory`
  MemoryKind memory = MemoryKind::Host;
  void* stream = nullptr;    // caller's cudaStream_t, or nullptr
  // Device-memory queries of a cosine index still need normalising; host ones arrive
  // normalised.
  bool normalize_queries = false;
};

struct BackendInfo {
  BackendKind kind = BackendKind::Cpu;
  int device = -1;
  std::size_t device_memory_bytes = 0;
  std::size_t host_memory_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // k-means on n host vectors (already sampled and normalised); replaces the centroids.
  // Only called while the index holds no vectors.
  virtual void train(const float* x, int64_t n) = 0;
  // Assign n host vectors to their nearest lists and append them with their ids.
  // All or nothing: on any exception the backend is unchanged.
  virtual void add(const float* x, const int64_t* ids, int64_t n) = 0;
  // Drop every vector, keep the centroids.
  virtual void reset() = 0;
  virtual void search(const SearchRequest& request) const = 0;

  virtual int64_t ntotal() const = 0;
  virtual bool is_trained() const = 0;
  virtual BackendInfo info() const = 0;

  // A host copy of the whole index, for saving.
  virtual HostModel snapshot() const = 0;
  // Replace the whole index with a validated model. All or nothing. Taken by value so that a
  // loader can hand over a model of hundreds of megabytes without a copy.
  virtual void restore(HostModel model) = 0;
};

// Picks the backend for params (AUTO: CUDA device params.device when usable, else CPU).
std::unique_ptr<Backend> make_backend(int64_t dim, const BuildParams& params);
// Usable CUDA devices (0 without CUDA support compiled in).
int cuda_device_count();

}  // namespace ivfgpu
