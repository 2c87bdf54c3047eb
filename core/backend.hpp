// The interface every backend (cpu/, cuda/) implements. A backend owns resources (threads,
// device context, streams, pools) but no index content: content is the IndexState it is given.
// Mutations build and return a new state beside the current one, sharing what did not change;
// they never modify what a published state shows. The Index above has already checked
// arguments (shapes, NaN/Inf in host data, ids), chosen the training sample and numbered the
// states; the backend prepares vectors for the metric (cosine normalisation, in one place per
// backend) and runs the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "host_model.hpp"
#include "index_state.hpp"
#include "matrix_view.hpp"
#include "search_request.hpp"
#include "types.hpp"

namespace ivfgpu {

struct BackendInfo {
  BackendKind kind = BackendKind::Cpu;
  int device = -1;
  std::size_t device_memory_bytes = 0;  // the state's device arrays
  std::size_t host_memory_bytes = 0;
  std::size_t pool_cached_bytes = 0;    // device pool blocks kept for reuse
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The state of a new, untrained, empty index.
  virtual NewState initial_state() = 0;
  // k-means on the sample rows; the new state has the new centroids and no vectors. Only
  // called for a state holding no vectors.
  virtual NewState train(const IndexState& current, const MatrixView& sample) = 0;
  // Assigns rows x (ids: one per row, in x's memory) to their nearest lists and appends them.
  virtual NewState add(const IndexState& current, const MatrixView& x, const int64_t* ids) = 0;
  // No vectors, the same centroids.
  virtual NewState reset(const IndexState& current) = 0;
  // A state holding exactly a validated model.
  virtual NewState restore(HostModel model) = 0;

  // Takes the state by shared pointer: a search that finishes asynchronously (device memory on
  // a caller's stream) keeps it alive until its stream work is done.
  virtual void search(const StatePtr& state, const SearchRequest& request) const = 0;

  virtual HostModel export_model(const IndexState& state) const = 0;
  // f32 rows of a device-memory matrix, copied to the host (training data is sampled there).
  virtual std::vector<float> host_copy(const MatrixView& x) const = 0;
  virtual BackendKind kind() const = 0;
  virtual BackendInfo info(const IndexState& state) const = 0;
  // Return cached memory (device pool blocks) to the system; called after a reset.
  virtual void trim() noexcept {}
  // Lowest k this backend refuses (0: any k).
  virtual int64_t max_k() const { return 0; }
};

// Picks the backend for params (AUTO: CUDA device params.device when usable, else CPU).
std::unique_ptr<Backend> make_backend(int64_t dim, const BuildParams& params);
// Usable CUDA devices (0 without CUDA support compiled in).
int cuda_device_count();
// Blocks until the caller's cudaStream_t has finished its queued work (device-memory input
// produced on that stream). Errc::InvalidArgument without CUDA support.
void wait_for_stream(void* stream);

}  // namespace ivfgpu
