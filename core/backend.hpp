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
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "host_model.hpp"
#include "index_state.hpp"
#include "matrix_view.hpp"
#include "search_request.hpp"
#include "types.hpp"

namespace ivfgpu {

// A caller's device-memory argument: where, how many bytes, and its name for errors.
struct DeviceRange {
  const void* data;
  std::size_t bytes;
  const char* what;
};

struct BackendInfo {
  BackendKind kind = BackendKind::Cpu;
  int device = -1;
  std::size_t device_memory_bytes = 0;  // the state's device arrays
  std::size_t host_memory_bytes = 0;
  std::size_t pool_cached_bytes = 0;    // device pool blocks kept for reuse
  std::size_t id_map_bytes = 0;         // the id map (device memory on CUDA)
  // The host tier (BuildParams::device_budget); zeros without one.
  std::size_t device_budget = 0;
  int64_t resident_lists = 0;
  std::size_t resident_bytes = 0;
  std::size_t host_tier_bytes = 0;
  int64_t cache_hits = 0, cache_misses = 0;
  std::size_t streamed_bytes = 0;
  // Shards (IVF_PARAM_SHARDS): parts, and those still serving; 1 and 1 for a plain index.
  int64_t parts = 1, live_parts = 1;
  // Searches answered by replaying a captured CUDA graph (the small-batch path).
  int64_t graph_searches = 0;
  // Searches answered by the fused small-batch kernels (the default latency path).
  int64_t fused_searches = 0;
  // Shards: time split searches spent merging after their parts returned, whether results
  // cross devices by peer copies, and each part's device (-1: CPU) and device memory.
  int64_t merge_ns = 0;
  bool peer_merge = false;
  std::vector<int> part_devices;
  std::vector<std::size_t> part_device_memory;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The state of a new, untrained, empty index.
  virtual NewState initial_state() = 0;
  // k-means on the sample rows; the new state has the new centroids and no vectors. Only
  // called for a state holding no vectors.
  virtual NewState train(const IndexState& current, const MatrixView& sample) = 0;
  // Assigns rows x to their nearest lists and appends them with ids (one per row, in
  // ids_memory; nullptr: ntotal, ntotal + 1, ...).
  virtual NewState add(const IndexState& current, const MatrixView& x, const int64_t* ids, MemoryKind ids_memory) = 0;
  // No vectors, the same centroids.
  virtual NewState reset(const IndexState& current) = 0;
  // Removes every live row whose id is one of ids[0..n) (host memory); .second counts them.
  // Compacts the lists when removed rows pass a quarter of the used rows.
  virtual std::pair<NewState, int64_t> remove(const IndexState& current, const int64_t* ids, int64_t n) = 0;

  // Reads of one state, ids in host memory. get: the row of each id that comes first in list
  // order, into out (n x dim f32, host), zeros and found = 0 for absent ids. count: rows per id.
  virtual void get(const IndexState& state, const int64_t* ids, int64_t n, float* out, uint8_t* found) const = 0;
  virtual void count_ids(const IndexState& state, const int64_t* ids, int64_t n, int64_t* counts) const = 0;
  // A state holding exactly a validated model.
  virtual NewState restore(HostModel model) = 0;

  // Takes the state by shared pointer: a search that finishes asynchronously (device memory on
  // a caller's stream) keeps it alive until its stream work is done.
  virtual void search(const StatePtr& state, const SearchRequest& request) const = 0;

  virtual HostModel export_model(const IndexState& state) const = 0;
  // f32 rows of a device-memory matrix, and device-memory ids, copied to the host.
  virtual std::vector<float> host_copy(const MatrixView& x) const = 0;
  virtual std::vector<int64_t> host_copy_ids(const int64_t* ids, int64_t n) const = 0;
  // false: adds and updates of device-memory rows are copied to the host (host_copy) first.
  virtual bool takes_device_rows() const { return true; }
  virtual BackendKind kind() const = 0;
  virtual BackendInfo info(const IndexState& state) const = 0;
  // Return cached memory (device pool blocks) to the system; called after a reset.
  virtual void trim() noexcept {}
  // Lowest k this backend refuses (0: any k).
  virtual int64_t max_k() const { return 0; }
  // true: this search's host queries are checked by search() itself (SearchRequest::
  // check_queries), later than Index::search would, so that the check overlaps device work.
  virtual bool checks_queries_late(const SearchRequest&) const { return false; }
  // Before a call reads or writes the caller's device memory (IVF_MEMORY_DEVICE): each range
  // must be memory the index's device can address, else Errc::InvalidArgument naming it; a
  // synchronous call (the library's own stream) then waits for the work the caller queued on
  // the CUDA default streams (cuda/caller_memory.hpp). Backends without a device take no
  // device memory (Index refuses it first).
  virtual void accept_device_memory(std::initializer_list<DeviceRange> /*ranges*/, bool /*synchronous*/) const {}
};

// Picks the backend for params (AUTO: CUDA device params.device when usable, else CPU).
std::unique_ptr<Backend> make_backend(int64_t dim, const BuildParams& params);
// Usable CUDA devices (0 without CUDA support compiled in).
int cuda_device_count();
// Blocks until the caller's cudaStream_t has finished its queued work (device-memory input
// produced on that stream). Errc::InvalidArgument without CUDA support.
void wait_for_stream(void* stream);

}  // namespace ivfgpu
