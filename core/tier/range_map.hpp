// Free space of one region as a first-fit map of [offset, offset + length) ranges, merged with
// their neighbours on release. The host tier's arenas and the device list cache carve their
// memory with it. Not thread-safe: its owner locks.
#pragma once

#include <cstddef>
#include <iterator>
#include <map>

namespace ivfgpu::tier {

class RangeMap {
 public:
  RangeMap() = default;
  explicit RangeMap(std::size_t bytes) { if (bytes > 0) free_.emplace(0, bytes); }

  // The first free range of at least len bytes; false when none is.
  bool take(std::size_t len, std::size_t* offset) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < len) continue;
      *offset = it->first;
      const std::size_t rest = it->second - len;
      free_.erase(it);
      if (rest > 0) free_.emplace(*offset + len, rest);
      return true;
    }
    return false;
  }

  void give(std::size_t off, std::size_t len) {
    auto next = free_.lower_bound(off);
    if (next != free_.end() && off + len == next->first) {
      len += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        prev->second += len;
        return;
      }
    }
    free_.emplace(off, len);
  }

 private:
  std::map<std::size_t, std::size_t> free_;  // offset -> length
};

}  // namespace ivfgpu::tier
