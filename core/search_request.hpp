// What one search is asked, filled once by the C layer (or a test) and read by every stage.
// Build parameters (types.hpp) describe the index; these describe a call.
#pragma once

#include <cstdint>

#include "id_filter.hpp"
#include "matrix_view.hpp"
#include "types.hpp"

namespace ivfgpu {

// Per-call options that may be left unset; the index supplies defaults (its nprobe).
struct SearchParams {
  int64_t nprobe = 0;  // 0: the index's default
  MemoryKind memory = MemoryKind::Host;  // where queries and results live
  void* stream = nullptr;                // caller's cudaStream_t, or nullptr
  const IdFilter* filter = nullptr;      // restricts the rows a search may return
  int64_t batch_window_us = 100;         // dynamic batching's window (0: this call alone)
};

struct SearchRequest {
  MatrixView queries;         // n x dim, in `memory`
  int64_t k = 0;
  int64_t nprobe = 0;         // resolved by Index::search: in [1, nlist]
  int64_t* ids = nullptr;     // n * k, in `memory`
  float* dists = nullptr;     // n * k, in `memory`
  MemoryKind memory = MemoryKind::Host;
  void* stream = nullptr;     // caller's cudaStream_t, or nullptr (own stream, synchronous)
  const IdFilter* filter = nullptr;  // null: every live row may be returned
  int64_t batch_window_us = 0;       // dynamic batching (an index option): 0 = alone
  // Host queries Index::search left to the backend to check (reject_unusable_rows, with the
  // index's metric) before it writes any output: a large GPU batch checks them on the calling
  // thread while its first chunk runs (Backend::checks_queries_late).
  bool check_queries = false;
  // Device-memory queries a sharded search has already checked whole on its merging device
  // (PartExchange::reject_unusable_queries): its parts search them without checking again.
  bool device_queries_checked = false;

  int64_t n() const { return queries.rows; }
  bool asynchronous() const { return stream != nullptr && memory == MemoryKind::Device; }
};

}  // namespace ivfgpu
