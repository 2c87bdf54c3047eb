// Memory of the host tier (docs/host-tier.md): a few large arenas of device-visible (pinned)
// host memory, carved into blocks by a first-fit allocator with coalescing. No block is ever
// pinned on its own (pinning is slow and the driver's page tables are finite), and an arena is
// never copied or resized: growing the tier adds an arena, so a 50 GB tier never needs 100 GB.
// A block returns to its arena when its last shared_ptr goes; a published state holding a
// list's block keeps it readable for as long as the state lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace ivfgpu::tier {

// How arenas are obtained: pinned, mapped host memory on CUDA (cuda/pinned_memory.cpp), plain
// heap memory for the engine's CPU tests.
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // `bytes` of host memory; Errc::OutOfHostMemory when there is none. *device receives the
  // address the device uses for it (the same pointer under unified addressing).
  virtual void* allocate(std::size_t bytes, void** device) = 0;
  virtual void release(void* p) noexcept = 0;
  // Makes existing memory device-visible in place (cudaHostRegister); *device as above.
  virtual void register_range(void* p, std::size_t bytes, void** device) = 0;
  virtual void unregister_range(void* p) noexcept = 0;
};
// Ordinary page-aligned memory; registering does nothing. `what` begins error messages.
std::shared_ptr<HostMemory> heap_memory(const char* what = "host tier");

// A piece of host-tier memory: `host` for the CPU, `device` for kernels and copies.
struct HostBlock {
  char* host = nullptr;
  const char* device = nullptr;
  std::size_t bytes = 0;
};

class HostArenas {
 public:
  explicit HostArenas(std::shared_ptr<HostMemory> memory, std::size_t min_arena_bytes = std::size_t{256} << 20);
  ~HostArenas();
  HostArenas(const HostArenas&) = delete;
  HostArenas& operator=(const HostArenas&) = delete;

  // A block of at least `bytes` (64-byte aligned). Out of host memory: Errc::OutOfHostMemory,
  // nothing changed.
  std::shared_ptr<const HostBlock> allocate(std::size_t bytes);
  // Existing memory kept alive by `owner`, made device-visible in place (no copy): how a loaded
  // file's lists become the tier. Unregistered when the last block using it goes.
  std::shared_ptr<const HostBlock> adopt(std::shared_ptr<void> owner, void* p, std::size_t bytes);

  std::size_t reserved_bytes() const;  // arenas plus adopted memory
  // Gives back arenas that hold no block (after a reset); the last arena is kept.
  void trim();

 private:
  struct Arena;
  struct Shared;  // what blocks keep alive: the arenas and the memory source
  std::shared_ptr<Shared> shared_;
};

}  // namespace ivfgpu::tier
