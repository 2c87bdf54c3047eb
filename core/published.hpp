// A published, immutable value that readers take a reference to and a writer replaces with
// one swap. Readers never wait for a writer's work: the lock below guards only the pointer
// copy (a few nanoseconds, never held while anything else runs), and a writer builds the next
// value completely before it publishes it. The value lives as long as the last reader that
// loaded it (docs/architecture.md, "Concurrency").
#pragma once

#include <memory>
#include <mutex>
#include <utility>

namespace ivfgpu {

template <class T>
class Published {
 public:
  explicit Published(std::shared_ptr<const T> initial) : current_(std::move(initial)) {}

  std::shared_ptr<const T> load() const {
    std::lock_guard<std::mutex> lock(pointer_mutex_);
    return current_;
  }

  // Returns the replaced value, so the caller chooses where its last reference is dropped.
  std::shared_ptr<const T> publish(std::shared_ptr<const T> next) {
    std::lock_guard<std::mutex> lock(pointer_mutex_);
    std::swap(current_, next);
    return next;
  }

 private:
  mutable std::mutex pointer_mutex_;
  std::shared_ptr<const T> current_;
};

}  // namespace ivfgpu
