// The layout of a chunk's candidate rows, written by the scan (stage C) and read back by the
// finaliser (stage D) — defined once here. Query q's row holds the distance to every row of
// every list it probes, probe after probe: probe p's list starts at offsets[q][p] and
// offsets[q][nprobe] is the row's length.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace ivfgpu::cuda {

struct CandidateRows {
  float* dist = nullptr;          // nq * stride
  int64_t stride = 0;             // >= every row's length
  int64_t* offsets = nullptr;     // nq * (nprobe + 1)
  int64_t* lengths = nullptr;     // nq
  int64_t nprobe = 0;

  // Where the distance of list row `row` of query q's probe p goes.
  __device__ __forceinline__ int64_t slot(int64_t q, int64_t p, int64_t row) const {
    return q * stride + offsets[q * (nprobe + 1) + p] + row;
  }
  // The probe and the list row behind position pos of query q's candidate row.
  __device__ __forceinline__ void locate(int64_t q, int64_t pos, int64_t& probe, int64_t& row) const {
    const int64_t* off = offsets + q * (nprobe + 1);
    int64_t lo = 0, hi = nprobe;  // off[lo] <= pos < off[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (off[mid] <= pos) lo = mid; else hi = mid;
    }
    probe = lo;
    row = pos - off[lo];
  }
};

}  // namespace ivfgpu::cuda
