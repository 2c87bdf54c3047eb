#include "host_buffers.hpp"

#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include "backend.hpp"
#include "errors.hpp"

#ifdef IVFGPU_HAVE_CUDA
#include "cuda/pinned_memory.hpp"
#endif

namespace ivfgpu {

namespace {

constexpr std::size_t kHeapAlign = 64;

struct Range {
  std::size_t bytes = 0;
  bool allocated = false;  // host_alloc's (else a caller's registered memory)
  bool pinned = false;     // page-locked by the driver (else ordinary memory, no device)
};

struct Registry {
  std::mutex mutex;
  std::map<std::uintptr_t, Range> ranges;  // by first byte; never overlapping

  // Whether [at, at + bytes) overlaps a recorded range. Caller holds mutex.
  bool overlaps(std::uintptr_t at, std::size_t bytes) const {
    auto next = ranges.lower_bound(at);
    if (next != ranges.end() && next->first - at < bytes) return true;
    if (next == ranges.begin()) return false;
    const auto prev = std::prev(next);
    return at - prev->first < prev->second.bytes;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

bool have_device() { return cuda_device_count() > 0; }

std::string address(const void* p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

}  // namespace

void* host_alloc(std::size_t bytes) {
  if (bytes == 0) fail(Errc::InvalidArgument, "ivf_host_alloc: bytes is 0");
  if (bytes > (std::size_t{1} << 48))  // also keeps the aligned size below from wrapping
    fail(Errc::OutOfHostMemory, "ivf_host_alloc: " + std::to_string(bytes) + " bytes is more than any host has");
  void* p = nullptr;
  bool pinned = false;
#ifdef IVFGPU_HAVE_CUDA
  if (have_device()) {
    p = cuda::pinned_allocate(bytes, "ivf_host_alloc");
    pinned = true;
  }
#endif
  if (p == nullptr) {
    p = std::aligned_alloc(kHeapAlign, (bytes + kHeapAlign - 1) / kHeapAlign * kHeapAlign);
    if (p == nullptr) fail(Errc::OutOfHostMemory, "ivf_host_alloc: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  Registry& r = registry();
  try {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.ranges.emplace(reinterpret_cast<std::uintptr_t>(p), Range{bytes, true, pinned});
  } catch (...) {
#ifdef IVFGPU_HAVE_CUDA
    if (pinned) cuda::pinned_release(p);
#endif
    if (!pinned) std::free(p);
    throw;
  }
  return p;
}

void host_free(void* p) {
  if (p == nullptr) return;
  Registry& r = registry();
  Range range;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.ranges.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == r.ranges.end() || !it->second.allocated)
      fail(Errc::InvalidArgument, "ivf_host_free: " + address(p) +
                                      " was not returned by ivf_host_alloc, or was freed already; nothing freed");
    range = it->second;
    r.ranges.erase(it);
  }
#ifdef IVFGPU_HAVE_CUDA
  if (range.pinned) {
    cuda::pinned_release(p);
    return;
  }
#endif
  std::free(p);
}

void host_register(void* p, std::size_t bytes) {
  if (p == nullptr) fail(Errc::InvalidArgument, "ivf_host_register: p is NULL");
  if (bytes == 0) fail(Errc::InvalidArgument, "ivf_host_register: bytes is 0");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  if (bytes > UINTPTR_MAX - at) fail(Errc::InvalidArgument, "ivf_host_register: the range wraps around memory");
  Registry& r = registry();
  // Held across the driver call, so that two threads cannot register overlapping ranges.
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.overlaps(at, bytes))
    fail(Errc::InvalidArgument, "ivf_host_register: [" + address(p) + ", +" + std::to_string(bytes) +
                                    ") overlaps memory already registered or from ivf_host_alloc");
  bool pinned = false;
#ifdef IVFGPU_HAVE_CUDA
  if (have_device()) {
    cuda::pinned_register(p, bytes, "ivf_host_register");
    pinned = true;
  }
#endif
  try {
    r.ranges.emplace(at, Range{bytes, false, pinned});
  } catch (...) {
#ifdef IVFGPU_HAVE_CUDA
    if (pinned) cuda::pinned_unregister(p);
#endif
    throw;
  }
}

void host_unregister(void* p) {
  if (p == nullptr) fail(Errc::InvalidArgument, "ivf_host_unregister: p is NULL");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.ranges.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == r.ranges.end() || it->second.allocated)
    fail(Errc::InvalidArgument, "ivf_host_unregister: " + address(p) +
                                    " is not the start of a range registered by ivf_host_register");
#ifdef IVFGPU_HAVE_CUDA
  if (it->second.pinned) cuda::pinned_unregister(p);
#endif
  r.ranges.erase(it);
}

}  // namespace ivfgpu
