// Progress and cancellation of one long call (train, add, load, search): the caller's callback,
// visible to the engine's loops on the calling thread for the duration of the call. Loops call
// set(fraction) between steps and poll() inside long ones; either calls the callback when it is
// due (the call's start, every ~50 ms, the end; IVFGPU_PROGRESS_EVERY_MS sets the interval, so
// that tests can see every step) and throws Errc::Cancelled when it returns
// non-zero. A mutation reports 1.0 before it publishes, so a cancel at any point (0%, 99%, the
// last call) leaves the index exactly as it was. Worker threads (parallel_for) never call it.
#pragma once

#include <chrono>
#include <cstdint>

namespace ivfgpu::progress {

// Values match the ABI's ivf_progress_stage.
enum class Stage : int32_t { Train = 1, Add = 2, Load = 3, Search = 4 };
using Callback = int32_t (*)(int32_t stage, double fraction, void* user);

class Scope {
 public:
  // fn == nullptr: no callback (the loops' calls cost a thread-local read). Calls fn(0) at once.
  Scope(Callback fn, void* user, Stage stage);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  friend void set(double);
  friend void poll();
  friend void finish();
  friend bool active();
  void call(double fraction);
  Callback fn_;
  void* user_;
  Stage stage_;
  double fraction_ = 0.0;
  bool finished_ = false;
  std::chrono::steady_clock::time_point last_;
  Scope* outer_;
};

// Work done on behalf of other calls too (a merged search of several callers): no callback
// of this thread's call may cancel it, so reports are off while a Pause lives.
class Pause {
 public:
  Pause();
  ~Pause();
  Pause(const Pause&) = delete;
  Pause& operator=(const Pause&) = delete;

 private:
  Scope* saved_;
};

// The call has reached `fraction` (0..1, never decreasing); reports when due.
void set(double fraction);
// Inside a long step: reports the last fraction when due.
void poll();
// The work is done, about to publish: reports 1.0 now (a last chance to cancel).
void finish();
// Whether this thread's call has a callback still to be told (waits on the GPU then poll while
// they wait instead of blocking in the driver; without one they block as before).
bool active();

}  // namespace ivfgpu::progress
