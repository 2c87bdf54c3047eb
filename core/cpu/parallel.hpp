// A minimal fork-join parallel loop over [0, n) in contiguous chunks. Threads live for one
// call only: no global pool whose threads would outlive a dlclose of the library.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ivfgpu {

inline int resolve_threads(int64_t requested) {
  if (requested > 0) return static_cast<int>(requested);
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

// fn(begin, end) runs on disjoint chunks; the first exception thrown by any chunk is
// rethrown on the calling thread after every chunk has finished.
template <class Fn>
void parallel_for(int64_t n, int threads, int64_t min_chunk, Fn&& fn) {
  if (n <= 0) return;
  int64_t max_workers = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  int workers = static_cast<int>(std::min<int64_t>(threads, max_workers));
  if (workers <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  auto run = [&](int64_t b, int64_t e) {
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  const int64_t chunk = (n + workers - 1) / workers;
  for (int w = 1; w < workers; ++w) {
    int64_t b = w * chunk, e = std::min(n, b + chunk);
    if (b >= e) break;
    pool.emplace_back(run, b, e);
  }
  run(0, std::min(n, chunk));
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace ivfgpu
