// Overflow-checked size arithmetic for parsers: every length read from a file goes through
// these before it sizes an allocation or a read.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "../errors.hpp"

namespace ivfgpu::io {

inline uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(Errc::CorruptData, std::string(what) + ": " + std::to_string(a) + " x " + std::to_string(b) +
                                " overflows 64 bits");
  return r;
}

inline uint64_t checked_add(uint64_t a, uint64_t b, const char* what) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(Errc::CorruptData, std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) +
                                " overflows 64 bits");
  return r;
}

// A byte count that must also fit the address space (size_t may be narrower than 64 bits).
inline std::size_t to_size(uint64_t v, const char* what) {
  if (v > std::numeric_limits<std::size_t>::max())
    fail(Errc::CorruptData, std::string(what) + ": " + std::to_string(v) + " bytes exceed the address space");
  return static_cast<std::size_t>(v);
}

// Inclusive range check of a signed field read from a file.
inline void check_range(int64_t v, int64_t lo, int64_t hi, const char* what) {
  if (v < lo || v > hi)
    fail(Errc::CorruptData, std::string(what) + " is " + std::to_string(v) + ", outside [" + std::to_string(lo) +
                                ", " + std::to_string(hi) + "]");
}

}  // namespace ivfgpu::io
