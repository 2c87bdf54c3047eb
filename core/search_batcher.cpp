#include "search_batcher.hpp"

#include <chrono>
#include <cstring>

#include "progress.hpp"

namespace ivfgpu {

bool SearchBatcher::eligible(const SearchRequest& req) {
  return req.n() <= kMaxCallRows && req.memory == MemoryKind::Host && req.stream == nullptr &&
         req.queries.type == ElementType::F32;
}

int64_t SearchBatcher::merged_calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return merged_;
}

void SearchBatcher::search(const SearchRequest& req, int64_t window_us, int64_t dim,
                           const std::function<void(const SearchRequest&)>& run) {
  const Key key{req.k, req.nprobe, req.filter};
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = open_.find(key);
  if (it != open_.end() && it->second->rows + req.n() <= kMaxRows) {
    // Join: the leader runs the batch; wait for it.
    std::shared_ptr<Batch> b = it->second;
    b->members.push_back(Member{&req, b->rows});
    b->rows += req.n();
    if (b->rows + kMaxCallRows > kMaxRows) {
      open_.erase(it);  // full: no one else joins; the leader may go now
      b->cv.notify_all();
    }
    // The leader writes this call's rows when the batch is done, so the call cannot leave
    // before then: a cancel from its callback while it waits is answered after the batch.
    const std::exception_ptr cancelled = wait_reporting(lock, *b, [&] { return b->done; }, kNever);
    if (b->error) std::rethrow_exception(b->error);
    if (cancelled) std::rethrow_exception(cancelled);
    return;
  }
  // Lead a new batch: wait for the window (or a full batch), then run it.
  auto b = std::make_shared<Batch>();
  b->members.push_back(Member{&req, 0});
  b->rows = req.n();
  open_[key] = b;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(window_us);
  // A cancel while the window is open closes the batch: the callers who joined are still
  // answered (below), and this call then returns the cancel.
  const std::exception_ptr cancelled =
      wait_reporting(lock, *b, [&] { return open_.count(key) == 0 || open_[key] != b; }, deadline);
  auto still = open_.find(key);
  if (still != open_.end() && still->second == b) open_.erase(still);
  // From here the batch is closed: its members are fixed.
  const std::vector<Member> members = b->members;
  const int64_t rows = b->rows;
  if (members.size() > 1) merged_ += static_cast<int64_t>(members.size());
  lock.unlock();

  std::exception_ptr error;
  try {
    if (members.size() == 1) {
      if (!cancelled) run(req);
    } else {
      std::vector<float> queries(static_cast<std::size_t>(rows * dim));
      std::vector<int64_t> ids(static_cast<std::size_t>(rows * req.k));
      std::vector<float> dists(ids.size());
      for (const Member& m : members)
        std::memcpy(queries.data() + m.row0 * dim, m.req->queries.data, sizeof(float) * m.req->n() * dim);
      SearchRequest merged = req;
      merged.queries = MatrixView::host_f32(queries.data(), rows, dim);
      merged.ids = ids.data();
      merged.dists = dists.data();
      // The leader's progress callback must not cancel the other callers' searches.
      const progress::Pause pause;
      run(merged);
      for (const Member& m : members) {
        std::memcpy(m.req->ids, ids.data() + m.row0 * req.k, sizeof(int64_t) * m.req->n() * req.k);
        std::memcpy(m.req->dists, dists.data() + m.row0 * req.k, sizeof(float) * m.req->n() * req.k);
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  lock.lock();
  b->error = error;
  b->done = true;
  b->cv.notify_all();
  lock.unlock();
  if (error) std::rethrow_exception(error);
  if (cancelled) std::rethrow_exception(cancelled);
}

template <class Pred>
std::exception_ptr SearchBatcher::wait_reporting(std::unique_lock<std::mutex>& lock, Batch& b, Pred&& ready,
                                                 std::chrono::steady_clock::time_point deadline) {
  // Slices of the progress interval, so that a caller with a callback is still told while it
  // waits; the callback runs outside the batcher's lock (it is the caller's code).
  constexpr auto kSlice = std::chrono::milliseconds(25);
  std::exception_ptr cancelled;
  while (!ready()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    const bool reporting = !cancelled && progress::active();
    if (!reporting && deadline == kNever) {
      b.cv.wait(lock, ready);
      break;
    }
    b.cv.wait_until(lock, reporting && deadline - now > kSlice ? now + kSlice : deadline, ready);
    if (!reporting || ready()) continue;
    lock.unlock();
    try {
      progress::poll();
    } catch (...) {
      cancelled = std::current_exception();
    }
    lock.lock();
    if (cancelled && deadline != kNever) break;  // a leader stops waiting; a joiner cannot
  }
  return cancelled;
}

}  // namespace ivfgpu
