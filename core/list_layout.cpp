#include "list_layout.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

namespace ivfgpu {

namespace {
constexpr int64_t kRowAlign = 32;
int64_t round_rows(int64_t n) { return (n + kRowAlign - 1) / kRowAlign * kRowAlign; }
}  // namespace

ListLayout ListLayout::packed(const std::vector<int64_t>& sizes) {
  ListLayout l;
  l.start.resize(sizes.size());
  l.cap = sizes;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    l.start[i] = l.capacity;
    l.capacity += sizes[i];
  }
  return l;
}

ListLayout ListLayout::empty(int64_t nlist) {
  ListLayout l;
  l.start.assign(static_cast<std::size_t>(nlist), 0);
  l.cap.assign(static_cast<std::size_t>(nlist), 0);
  return l;
}

bool fits(const ListLayout& layout, const std::vector<int64_t>& sizes, const std::vector<int64_t>& added) {
  for (std::size_t l = 0; l < sizes.size(); ++l)
    if (sizes[l] + added[l] > layout.cap[l]) return false;
  return true;
}

ListLayout grown(const ListLayout& layout, const std::vector<int64_t>& sizes, const std::vector<int64_t>& added) {
  ListLayout next;
  next.start.resize(sizes.size());
  next.cap.resize(sizes.size());
  for (std::size_t l = 0; l < sizes.size(); ++l) {
    const int64_t need = sizes[l] + added[l];
    next.cap[l] = need > layout.cap[l] ? round_rows(need + need / 8) : layout.cap[l];
    next.start[l] = next.capacity;
    next.capacity += next.cap[l];
  }
  return next;
}

std::vector<int64_t> largest_lists_prefix(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> sorted(sizes);
  std::sort(sorted.begin(), sorted.end(), std::greater<int64_t>());
  std::vector<int64_t> prefix(sorted.size() + 1, 0);
  for (std::size_t i = 0; i < sorted.size(); ++i) prefix[i + 1] = prefix[i] + sorted[i];
  return prefix;
}

std::vector<int32_t> lists_by_size(const std::vector<int64_t>& sizes) {
  std::vector<int32_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return sizes[a] > sizes[b]; });
  return order;
}

}  // namespace ivfgpu
