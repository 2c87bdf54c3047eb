// Bounds how many threads wait on one GPU's small searches at once. A small search is a few
// launches and a synchronisation that spins on a CPU core; 64 client threads on 16 cores
// spinning together starved every other thread of the process that needed the driver (an
// ivf_add under 64 batch-1 clients did not finish until they stopped: bench/RESULTS.md
// "Serving"). Past the gate's slots a thread sleeps instead, and is let in first come, first
// served (a slot passes straight to the longest waiter), so no caller waits behind later ones.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace ivfgpu::cuda {

class AdmissionGate {
 public:
  // Half the host's hardware threads, at least 2 and at most 16.
  AdmissionGate() : free_(std::clamp(static_cast<int>(std::thread::hardware_concurrency() / 2), 2, 16)) {}

  class Pass {
   public:
    explicit Pass(AdmissionGate& g) : gate_(g) { gate_.enter(); }
    ~Pass() { gate_.leave(); }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

   private:
    AdmissionGate& gate_;
  };

 private:
  struct Waiter {
    std::condition_variable cv;
    bool admitted = false;
  };

  void enter() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (free_ > 0 && queue_.empty()) {
      --free_;
      return;
    }
    Waiter me;
    queue_.push_back(&me);
    me.cv.wait(lock, [&] { return me.admitted; });
  }

  void leave() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty()) {
      ++free_;
      return;
    }
    Waiter* next = queue_.front();
    queue_.pop_front();
    next->admitted = true;
    next->cv.notify_one();  // under the lock: the waiter cannot return and destroy cv first
  }

  std::mutex mutex_;
  std::deque<Waiter*> queue_;
  int free_;
};

}  // namespace ivfgpu::cuda
