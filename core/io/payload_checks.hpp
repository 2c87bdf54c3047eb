// Value checks on payloads read from files, done chunk by chunk while the bytes are in cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "../errors.hpp"

namespace ivfgpu::io {

// Index (in floats) of the first NaN/Inf among n floats, or -1. Bit test: vectorises.
inline int64_t first_non_finite(const float* x, std::size_t n) {
  uint32_t any = 0;  // a uint32 accumulator (not bool) lets the compiler vectorise with SSE2
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    any |= static_cast<uint32_t>((b & 0x7f800000u) == 0x7f800000u);
  }
  if (any == 0) return -1;
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, x + i, 4);
    if ((b & 0x7f800000u) == 0x7f800000u) return static_cast<int64_t>(i);
  }
  return -1;
}

inline void check_finite(const float* x, std::size_t n, uint64_t first_index, int64_t dim, const char* what) {
  const int64_t at = first_non_finite(x, n);
  if (at >= 0)
    fail(Errc::CorruptData, std::string(what) + ": row " +
                                std::to_string((first_index + static_cast<uint64_t>(at)) / static_cast<uint64_t>(dim)) +
                                " holds NaN or Inf (libivfgpu never stores them)");
}

inline void check_ids(const int64_t* ids, std::size_t n, uint64_t first_index, const char* what) {
  for (std::size_t i = 0; i < n; ++i)
    if (ids[i] == -1)
      fail(Errc::CorruptData, std::string(what) + ": id -1 (reserved for padding) at position " +
                                  std::to_string(first_index + i));
}

// list_offsets[nlist + 1]: starts at 0, never decreases, ends at ntotal.
inline void check_offsets(const int64_t* off, int64_t nlist, int64_t ntotal, const char* what) {
  if (off[0] != 0) fail(Errc::CorruptData, std::string(what) + ": offset[0] is " + std::to_string(off[0]) + ", not 0");
  for (int64_t l = 0; l < nlist; ++l)
    if (off[l + 1] < off[l])
      fail(Errc::CorruptData, std::string(what) + ": offsets decrease at list " + std::to_string(l) + " (" +
                                  std::to_string(off[l]) + " then " + std::to_string(off[l + 1]) + ")");
  if (off[nlist] != ntotal)
    fail(Errc::CorruptData, std::string(what) + ": offsets end at " + std::to_string(off[nlist]) + ", not at ntotal " +
                                std::to_string(ntotal));
}

}  // namespace ivfgpu::io
