// A reusable id set that restricts a search (ivf_filter in the C ABI): built once from the
// caller's ids, immutable afterwards, shared by any number of searches on any index. The host
// form (a bitset when the ids are dense, else a hash set: chosen in IdFilter's constructor)
// serves the CPU backend; a backend with devices keeps one device copy per device, made on
// first use through device_copy().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace ivfgpu {

class IdFilter {
 public:
  // allow: only ids in the set pass; otherwise (deny) ids in the set never pass.
  IdFilter(const int64_t* ids, int64_t n, bool allow);

  bool allow() const { return allow_; }
  // Whether a row with this id may be returned.
  bool permits(int64_t id) const { return contains(id) == allow_; }
  bool contains(int64_t id) const;
  // The distinct ids, ascending.
  const std::vector<int64_t>& ids() const { return sorted_; }
  std::size_t host_bytes() const;
  std::size_t device_bytes() const;

  // A backend's per-device form of the set (e.g. a device bitset or hash set).
  class DeviceCopy {
   public:
    virtual ~DeviceCopy() = default;
    virtual std::size_t bytes() const = 0;
  };
  // The device copy for `device`, made by `make` the first time (thread-safe; later calls
  // return the same copy).
  const DeviceCopy& device_copy(int device, const std::function<std::unique_ptr<DeviceCopy>()>& make) const;

 private:
  bool allow_;
  std::vector<int64_t> sorted_;
  // Dense: bits over [base_, base_ + nbits); sparse: hash set.
  bool dense_ = true;
  int64_t base_ = 0;
  uint64_t nbits_ = 0;
  std::vector<uint64_t> bits_;
  std::unordered_set<int64_t> set_;
  mutable std::mutex device_mutex_;
  mutable std::map<int, std::unique_ptr<DeviceCopy>> devices_;
};

// Dense (a bitset) when the ids span at most 64 ids per member: the one rule both the host and
// the device forms follow.
bool dense_id_range(int64_t count, int64_t min_id, int64_t max_id);

}  // namespace ivfgpu
