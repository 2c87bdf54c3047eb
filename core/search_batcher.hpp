// Dynamic batching of concurrent small searches (IVF_PARAM_DYNAMIC_BATCHING, issue 14): calls
// with a few host-memory queries that arrive within a window and ask the same thing (k, nprobe,
// filter) are answered by one search of all their queries, each caller receiving its own rows.
// The first caller of a batch leads: it waits until the window closes (or the batch is full),
// runs the merged search and hands the results out; later callers join and wait for it. No
// caller waits more than the window beyond the merged search, and each query's result does not
// depend on the others in its batch (queries are searched independently).
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "search_request.hpp"

namespace ivfgpu {

class SearchBatcher {
 public:
  // Calls of at most this many queries are merged, into batches of at most kMaxRows.
  static constexpr int64_t kMaxCallRows = 64;
  static constexpr int64_t kMaxRows = 4096;

  // Whether `req` may be merged (small, host memory, no stream).
  static bool eligible(const SearchRequest& req);
  // Answers req (already resolved: nprobe set, checks done) within a batch; `run` searches a
  // merged request. Exceptions of the merged search reach every caller of the batch.
  void search(const SearchRequest& req, int64_t window_us, int64_t dim,
              const std::function<void(const SearchRequest&)>& run);
  // Calls answered as part of a batch of two or more, since creation.
  int64_t merged_calls() const;

 private:
  using Key = std::tuple<int64_t, int64_t, const IdFilter*>;  // k, nprobe, filter
  struct Member {
    const SearchRequest* req;
    int64_t row0;
  };
  struct Batch {
    std::vector<Member> members;
    int64_t rows = 0;
    bool done = false;
    std::exception_ptr error;
    std::condition_variable cv;
  };

  // Waits on b's condition until ready() or the deadline, calling this thread's progress
  // callback about every slice while it waits; returns a cancel it asked for (a joiner keeps
  // waiting for its batch: its rows are written by the leader; a leader stops waiting).
  static constexpr std::chrono::steady_clock::time_point kNever = std::chrono::steady_clock::time_point::max();
  template <class Pred>
  static std::exception_ptr wait_reporting(std::unique_lock<std::mutex>& lock, Batch& b, Pred&& ready,
                                           std::chrono::steady_clock::time_point deadline);

  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<Batch>> open_;
  int64_t merged_ = 0;
};

}  // namespace ivfgpu
