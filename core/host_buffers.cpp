#include "host_buffers.hpp"

#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "backend.hpp"
#include "errors.hpp"
#include "tier/host_arena.hpp"

#ifdef IVFGPU_HAVE_CUDA
#include "cuda/pinned_memory.hpp"
#endif

namespace ivfgpu {

namespace {

constexpr const char* kWhat = "ivf_host_alloc/ivf_host_register";  // begins the allocators' messages

struct Range {
  std::size_t bytes = 0;
  bool allocated = false;  // host_alloc's (else a caller's registered memory)
};

struct Registry {
  // Page-locked memory where a CUDA device is usable, else ordinary page-aligned memory whose
  // registration does nothing: the tier's two kinds of host memory. Chosen once per process.
  std::shared_ptr<tier::HostMemory> memory;
  std::mutex mutex;
  std::map<std::uintptr_t, Range> ranges;  // by first byte; never overlapping

  Registry() {
#ifdef IVFGPU_HAVE_CUDA
    if (cuda_device_count() > 0) memory = cuda::pinned_host_memory(kWhat);
#endif
    if (!memory) memory = tier::heap_memory(kWhat);
  }

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

std::string address(const void* p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

}  // namespace

void* host_alloc(std::size_t bytes) {
  if (bytes == 0) fail(Errc::InvalidArgument, "ivf_host_alloc: bytes is 0");
  if (bytes > (std::size_t{1} << 48))  // also keeps the allocators' rounding from wrapping
    fail(Errc::OutOfHostMemory, "ivf_host_alloc: " + std::to_string(bytes) + " bytes is more than any host has");
  Registry& r = registry();
  void* device = nullptr;
  void* p = r.memory->allocate(bytes, &device);
  try {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.ranges.emplace(reinterpret_cast<std::uintptr_t>(p), Range{bytes, true});
  } catch (...) {
    r.memory->release(p);
    throw;
  }
  return p;
}

void host_free(void* p) {
  if (p == nullptr) return;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    const auto it = r.ranges.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == r.ranges.end() || !it->second.allocated)
      fail(Errc::InvalidArgument, "ivf_host_free: " + address(p) +
                                      " was not returned by ivf_host_alloc, or was freed already; nothing freed");
    r.ranges.erase(it);
  }
  r.memory->release(p);
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
  void* device = nullptr;
  r.memory->register_range(p, bytes, &device);
  try {
    r.ranges.emplace(at, Range{bytes, false});
  } catch (...) {
    r.memory->unregister_range(p);
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
  r.memory->unregister_range(p);
  r.ranges.erase(it);
}

}  // namespace ivfgpu
