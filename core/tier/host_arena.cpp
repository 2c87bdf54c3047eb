#include "host_arena.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "../errors.hpp"
#include "range_map.hpp"

namespace ivfgpu::tier {

namespace {

constexpr std::size_t kAlign = 64;
constexpr std::size_t kArenaRound = std::size_t{2} << 20;
std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

class Heap final : public HostMemory {
 public:
  explicit Heap(const char* what) : what_(what) {}
  void* allocate(std::size_t bytes, void** device) override {
    void* p = std::aligned_alloc(4096, round_up(std::max<std::size_t>(bytes, 1), 4096));
    if (p == nullptr) fail(Errc::OutOfHostMemory, what_ + ": out of host memory");
    *device = p;
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void register_range(void* p, std::size_t, void** device) override { *device = p; }
  void unregister_range(void*) noexcept override {}

 private:
  std::string what_;
};

}  // namespace

std::shared_ptr<HostMemory> heap_memory(const char* what) { return std::make_shared<Heap>(what); }

struct HostArenas::Arena {
  char* host = nullptr;
  char* device = nullptr;
  std::size_t bytes = 0;
  std::size_t used = 0;
  RangeMap free;
};

struct HostArenas::Shared {
  std::shared_ptr<HostMemory> memory;
  std::size_t min_arena = 0;
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<Arena>> arenas;
  std::size_t adopted = 0;

  ~Shared() {
    for (auto& a : arenas) memory->release(a->host);
  }

  void give_back(Arena* a, std::size_t off, std::size_t len) noexcept {
    std::lock_guard<std::mutex> lock(mutex);
    a->used -= len;
    a->free.give(off, len);
  }
};

HostArenas::HostArenas(std::shared_ptr<HostMemory> memory, std::size_t min_arena_bytes)
    : shared_(std::make_shared<Shared>()) {
  shared_->memory = std::move(memory);
  shared_->min_arena = round_up(std::max<std::size_t>(min_arena_bytes, kArenaRound), kArenaRound);
}

HostArenas::~HostArenas() = default;

std::shared_ptr<const HostBlock> HostArenas::allocate(std::size_t bytes) {
  const std::size_t len = round_up(std::max<std::size_t>(bytes, 1), kAlign);
  Shared& s = *shared_;
  Arena* arena = nullptr;
  std::size_t off = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto& a : s.arenas) {
      if (a->free.take(len, &off)) {
        arena = a.get();
        break;
      }
    }
    if (arena == nullptr) {
      // A new arena: a quarter of what the tier holds (so arenas stay few as it grows), at
      // least the minimum, at least the request.
      std::size_t reserved = 0;
      for (auto& a : s.arenas) reserved += a->bytes;
      const std::size_t size = round_up(std::max({len, s.min_arena, reserved / 4}), kArenaRound);
      s.arenas.reserve(s.arenas.size() + 1);  // the push below cannot throw
      auto a = std::make_unique<Arena>();
      void* device = nullptr;
      a->host = static_cast<char*>(s.memory->allocate(size, &device));
      a->device = static_cast<char*>(device);
      a->bytes = size;
      a->free = RangeMap(size);
      a->free.take(len, &off);
      arena = a.get();
      s.arenas.push_back(std::move(a));
    }
    arena->used += len;
  }
  // Outside the lock: if making the pointer throws, its deleter gives the range back (it locks).
  auto shared = shared_;
  return std::shared_ptr<const HostBlock>(new HostBlock{arena->host + off, arena->device + off, len},
                                          [shared, arena, off, len](const HostBlock* b) {
                                            shared->give_back(arena, off, len);
                                            delete b;
                                          });
}

std::shared_ptr<const HostBlock> HostArenas::adopt(std::shared_ptr<void> owner, void* p, std::size_t bytes) {
  Shared& s = *shared_;
  void* device = p;
  if (bytes > 0) s.memory->register_range(p, bytes, &device);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.adopted += bytes;
  }
  auto shared = shared_;
  auto* block = new HostBlock{static_cast<char*>(p), static_cast<const char*>(device), bytes};
  return std::shared_ptr<const HostBlock>(block, [shared, owner, bytes](const HostBlock* b) {
    if (bytes > 0) shared->memory->unregister_range(b->host);
    {
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->adopted -= bytes;
    }
    delete b;
  });
}

std::size_t HostArenas::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  std::size_t r = shared_->adopted;
  for (auto& a : shared_->arenas) r += a->bytes;
  return r;
}

void HostArenas::trim() {
  Shared& s = *shared_;
  std::lock_guard<std::mutex> lock(s.mutex);
  for (std::size_t i = 0; i < s.arenas.size() && s.arenas.size() > 1;) {
    if (s.arenas[i]->used == 0) {
      s.memory->release(s.arenas[i]->host);
      s.arenas.erase(s.arenas.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

}  // namespace ivfgpu::tier
