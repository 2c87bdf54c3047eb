// What every benchmark program needs, once: a fatal check of a library status, elapsed time,
// and the order statistics the reports print (median, percentiles by nearest rank).
#pragma once

#include <ivfgpu/ivfgpu.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ivftools {

using Clock = std::chrono::steady_clock;

// Exits with status 1, naming the call, the status and the library's message, unless s is IVF_OK.
inline void check(ivf_status s, const char* what) {
  if (s != IVF_OK) {
    std::fprintf(stderr, "%s failed: %s (%s)\n", what, ivf_status_string(s), ivf_last_error_message());
    std::exit(1);
  }
}

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
inline double ms_since(Clock::time_point t0) { return 1000.0 * seconds_since(t0); }

// p in [0, 1]; 0 for no values.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))];
}
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace ivftools
