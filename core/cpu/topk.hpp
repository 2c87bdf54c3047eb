// Host top-k: a bounded heap of (distance, id) with a total order, so ties resolve the same
// way on every run (by smaller id) and the CPU backend is deterministic.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace ivfgpu {

struct Neighbor {
  float dist;
  int64_t id;
};

// The total order of every host top-k: a before b when its distance is better, ties by smaller id.
inline bool neighbor_better(const Neighbor& a, const Neighbor& b, bool larger_is_better) {
  if (a.dist != b.dist) return larger_is_better ? a.dist > b.dist : a.dist < b.dist;
  return a.id < b.id;
}

// The two steps of a bounded max-heap on "worse" (its front is the worst kept entry), shared by
// TopK and HeapSpan. heap_sift_in: an entry was just appended at first[size - 1].
inline void heap_sift_in(Neighbor* first, int64_t size, bool larger_is_better) {
  std::push_heap(first, first + size,
                 [=](const Neighbor& a, const Neighbor& b) { return neighbor_better(a, b, larger_is_better); });
}
// A full heap of size > 0 entries: n replaces the worst kept entry when it is better.
inline void heap_replace_worst(Neighbor* first, int64_t size, const Neighbor& n, bool larger_is_better) {
  if (!neighbor_better(n, first[0], larger_is_better)) return;
  const auto worse_first = [=](const Neighbor& a, const Neighbor& b) { return neighbor_better(a, b, larger_is_better); };
  std::pop_heap(first, first + size, worse_first);
  first[size - 1] = n;
  std::push_heap(first, first + size, worse_first);
}

class TopK {
 public:
  TopK(int64_t k, bool larger_is_better) : k_(k), larger_(larger_is_better) {
    heap_.reserve(static_cast<std::size_t>(std::min<int64_t>(k, 1 << 16)));
  }

  // True when a better than b.
  bool better(const Neighbor& a, const Neighbor& b) const { return neighbor_better(a, b, larger_); }

  // The current worst kept distance: candidates not better than it can be skipped cheaply.
  bool full() const { return static_cast<int64_t>(heap_.size()) == k_; }
  const Neighbor& worst() const { return heap_.front(); }

  void push(float dist, int64_t id) {
    const Neighbor n{dist, id};
    if (!full()) {
      heap_.push_back(n);
      heap_sift_in(heap_.data(), static_cast<int64_t>(heap_.size()), larger_);
    } else if (k_ > 0) {
      heap_replace_worst(heap_.data(), k_, n, larger_);
    }
  }

  // Best first into ids/dists[0..k), padded with -1 and the worst possible distance.
  void write(int64_t* ids, float* dists) {
    auto cmp = [this](const Neighbor& a, const Neighbor& b) { return better(a, b); };
    std::sort(heap_.begin(), heap_.end(), cmp);
    const float pad = larger_ ? -std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < k_; ++j) {
      if (j < static_cast<int64_t>(heap_.size())) {
        ids[j] = heap_[j].id;
        dists[j] = heap_[j].dist;
      } else {
        ids[j] = -1;
        dists[j] = pad;
      }
    }
  }

 private:
  int64_t k_;
  bool larger_;
  std::vector<Neighbor> heap_;  // max-heap on "worse": front is the worst kept
};

// TopK's bounded heap in caller storage of `cap` entries (no allocation of its own), for scans
// that keep many small top-k lists at once (the CPU's list-major scan: one per (query, probe)).
class HeapSpan {
 public:
  HeapSpan(Neighbor* data, int64_t cap, bool larger_is_better) : data_(data), cap_(cap), larger_(larger_is_better) {}

  void push(float dist, int64_t id) {
    const Neighbor n{dist, id};
    if (size_ < cap_) {
      data_[size_++] = n;
      heap_sift_in(data_, size_, larger_);
    } else if (cap_ > 0) {
      heap_replace_worst(data_, size_, n, larger_);
    }
  }
  int64_t size() const { return size_; }

 private:
  Neighbor* data_;
  int64_t cap_, size_ = 0;
  bool larger_;
};

}  // namespace ivfgpu
