#include "id_filter.hpp"

#include <algorithm>

namespace ivfgpu {

bool dense_id_range(int64_t count, int64_t min_id, int64_t max_id) {
  if (count <= 0) return true;
  const uint64_t span = static_cast<uint64_t>(max_id) - static_cast<uint64_t>(min_id);  // no overflow
  return span < static_cast<uint64_t>(count) * 64u;
}

IdFilter::IdFilter(const int64_t* ids, int64_t n, bool allow) : allow_(allow), sorted_(ids, ids + n) {
  std::sort(sorted_.begin(), sorted_.end());
  sorted_.erase(std::unique(sorted_.begin(), sorted_.end()), sorted_.end());
  const int64_t count = static_cast<int64_t>(sorted_.size());
  dense_ = count == 0 || dense_id_range(count, sorted_.front(), sorted_.back());
  if (dense_) {
    if (count > 0) {
      base_ = sorted_.front();
      nbits_ = static_cast<uint64_t>(sorted_.back()) - static_cast<uint64_t>(base_) + 1;
      bits_.assign(static_cast<std::size_t>((nbits_ + 63) / 64), 0);
      for (int64_t id : sorted_) {
        const uint64_t off = static_cast<uint64_t>(id) - static_cast<uint64_t>(base_);
        bits_[off >> 6] |= uint64_t{1} << (off & 63);
      }
    }
  } else {
    set_.reserve(sorted_.size());
    set_.insert(sorted_.begin(), sorted_.end());
  }
}

bool IdFilter::contains(int64_t id) const {
  if (!dense_) return set_.count(id) != 0;
  const uint64_t off = static_cast<uint64_t>(id) - static_cast<uint64_t>(base_);
  return off < nbits_ && ((bits_[off >> 6] >> (off & 63)) & 1u);
}

std::size_t IdFilter::host_bytes() const {
  // The sorted ids, the bitset, and the hash set's nodes and buckets (an estimate of the
  // standard library's layout: a node holds the key and a next pointer).
  return sorted_.size() * sizeof(int64_t) + bits_.size() * sizeof(uint64_t) +
         set_.size() * (sizeof(int64_t) + sizeof(void*)) + set_.bucket_count() * sizeof(void*);
}

std::size_t IdFilter::device_bytes() const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  std::size_t total = 0;
  for (const auto& [device, copy] : devices_) total += copy->bytes();
  return total;
}

const IdFilter::DeviceCopy& IdFilter::device_copy(int device,
                                                   const std::function<std::unique_ptr<DeviceCopy>()>& make) const {
  std::lock_guard<std::mutex> lock(device_mutex_);
  auto it = devices_.find(device);
  if (it == devices_.end()) it = devices_.emplace(device, make()).first;
  return *it->second;
}

}  // namespace ivfgpu
