#include "progress.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "errors.hpp"

namespace ivfgpu::progress {

namespace {
thread_local Scope* current = nullptr;
// Calls come at least this often while the loops run (the contract says ~100 ms). Tests set
// IVFGPU_PROGRESS_EVERY_MS=0 to be called at every step, so that a cancel lands where they ask.
std::chrono::milliseconds every() {
  static const std::chrono::milliseconds interval = [] {
    const char* e = std::getenv("IVFGPU_PROGRESS_EVERY_MS");
    if (e == nullptr || *e == '\0') return std::chrono::milliseconds(50);
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    return *end == '\0' && v >= 0 && v <= 50 ? std::chrono::milliseconds(v) : std::chrono::milliseconds(50);
  }();
  return interval;
}

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::Train: return "train";
    case Stage::Add: return "add";
    case Stage::Load: return "load";
    case Stage::Search: return "search";
  }
  return "call";
}
}  // namespace

Scope::Scope(Callback fn, void* user, Stage stage) : fn_(fn), user_(user), stage_(stage), outer_(current) {
  // A call inside another (a load's restore, say) reports through the outer scope only.
  if (fn_ == nullptr || outer_ != nullptr) {
    fn_ = nullptr;
    return;
  }
  current = this;
  try {
    call(0.0);
  } catch (...) {
    current = outer_;  // a constructor that throws runs no destructor
    throw;
  }
}

Scope::~Scope() {
  if (current == this) current = outer_;
}

void Scope::call(double fraction) {
  fraction_ = std::clamp(std::max(fraction_, fraction), 0.0, 1.0);
  last_ = std::chrono::steady_clock::now();
  const int32_t r = fn_(static_cast<int32_t>(stage_), fraction_, user_);
  // Any non-zero value cancels (a callback returning garbage cancels rather than being ignored).
  if (r != 0) {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f%%", 100.0 * fraction_);
    fail(Errc::Cancelled, std::string(stage_name(stage_)) + " cancelled by the progress callback (it returned " +
                              std::to_string(r) + " at " + pct + "); nothing changed");
  }
}

Pause::Pause() : saved_(current) { current = nullptr; }
Pause::~Pause() { current = saved_; }

void set(double fraction) {
  Scope* s = current;
  if (s == nullptr || s->finished_) return;
  if (fraction > s->fraction_) s->fraction_ = std::min(fraction, 1.0);
  if (std::chrono::steady_clock::now() - s->last_ >= every()) s->call(s->fraction_);
}

void poll() { set(0.0); }

bool active() {
  const Scope* s = current;
  return s != nullptr && !s->finished_;
}

void finish() {
  Scope* s = current;
  if (s == nullptr || s->finished_) return;
  s->finished_ = true;
  s->call(1.0);
}

}  // namespace ivfgpu::progress
