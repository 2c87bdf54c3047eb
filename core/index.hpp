// The engine-side index: argument policy (NaN/Inf in host data, ids, state), training-sample
// selection, numbering and publishing of states, and delegation to one backend. Concurrency
// (docs/architecture.md): a search loads the published state once and reads only it;
// mutations are serialised by one mutex, build the next state beside the current one and
// publish it with one swap. Nothing a search does waits for a mutation, and no mutation waits
// for searches.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "backend.hpp"
#include "published.hpp"
#include "search_batcher.hpp"
#include "search_request.hpp"
#include "types.hpp"

namespace ivfgpu {

class Index {
 public:
  Index(int64_t dim, const BuildParams& params);
  // An index whose content is a (validated) model, e.g. from a file; the model is moved in.
  Index(HostModel model, const BuildParams& params);
  ~Index();
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  void train(const MatrixView& x);
  // ids: x.rows ids in x's memory, or nullptr for ntotal, ntotal + 1, ...
  void add(const MatrixView& x, const int64_t* ids);
  void reset();
  // Removes every vector with one of the n ids (host); returns how many were removed.
  int64_t remove(const int64_t* ids, int64_t n);
  // Replaces the vectors of existing ids by the rows of x and adds the others (ids in x's memory,
  // not repeated). One published state.
  void update(const MatrixView& x, const int64_t* ids);
  // Reads of the published state (ids in host memory; see Backend::get / count_ids).
  void get(const int64_t* ids, int64_t n, float* out, uint8_t* found) const;
  void count_ids(const int64_t* ids, int64_t n, int64_t* counts) const;
  // request.nprobe <= 0 takes the index's default; the result is clamped to [1, nlist].
  void search(SearchRequest request) const;

  // Host-memory f32 shorthands (tests, tools).
  void train(const float* x, int64_t n) { train(MatrixView::host_f32(x, n, dim_)); }
  void add(const float* x, int64_t n, const int64_t* ids) { add(MatrixView::host_f32(x, n, dim_), ids); }

  // The published state a call starting now reads; hold it to read several properties of one
  // state.
  StatePtr state() const { return state_.load(); }
  int64_t dim() const { return dim_; }
  const BuildParams& params() const { return params_; }
  // The element type the index stores its rows in (BuildParams::storage).
  ElementType storage() const { return static_cast<ElementType>(params_.storage); }
  int64_t ntotal() const { return state()->ntotal(); }
  bool is_trained() const { return state()->trained(); }
  uint64_t version() const { return state()->version; }
  BackendInfo backend_info() const { return backend_->info(*state()); }
  // Searches answered inside a merged batch (dynamic batching), since creation.
  int64_t merged_searches() const { return batcher_.merged_calls(); }
  BackendInfo backend_info(const IndexState& s) const { return backend_->info(s); }
  HostModel snapshot() const { return export_model(*state()); }
  HostModel export_model(const IndexState& s) const { return backend_->export_model(s); }

 private:
  // Runs one mutation under the mutation lock and publishes its result as the next state.
  template <class Build>
  void mutate(Build&& build);
  // The ids of an add or update as host values (generating sequential ones for a unique-ids
  // index), checked against the unique-ids rule when it applies.
  std::vector<int64_t> checked_ids(const IndexState& current, const MatrixView& x, const int64_t* ids,
                                   bool replacing) const;

  int64_t dim_;
  BuildParams params_;
  std::unique_ptr<Backend> backend_;  // declared before the state: outlives every state
  Published<IndexState> state_;
  std::mutex mutation_mutex_;
  mutable SearchBatcher batcher_;
};

}  // namespace ivfgpu
