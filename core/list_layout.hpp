// Where each list's rows sit in a store's one contiguous array, and the growth rule shared by
// every list store (host and device): list l owns rows [start[l], start[l] + cap[l]). An add
// that fits every list's spare room keeps the layout (its rows go past the live sizes, where
// no published state looks); otherwise the whole layout is rebuilt once, each grown list
// getting 1/8 spare rounded up to 32 rows (amortised growth; never 2x per list as FAISS).
#pragma once

#include <cstdint>
#include <vector>

namespace ivfgpu {

struct ListLayout {
  std::vector<int64_t> start;  // nlist
  std::vector<int64_t> cap;    // nlist
  int64_t capacity = 0;        // rows in the array: sum of cap

  int64_t nlist() const { return static_cast<int64_t>(start.size()); }
  // Lists packed end to end with no spare room (cap = size): what a load builds.
  static ListLayout packed(const std::vector<int64_t>& sizes);
  static ListLayout empty(int64_t nlist);
};

// True when `sizes[l] + added[l] <= layout.cap[l]` for every list.
bool fits(const ListLayout& layout, const std::vector<int64_t>& sizes, const std::vector<int64_t>& added);
// The rebuilt layout for lists that will hold sizes[l] + added[l] rows; lists that still fit
// keep their capacity.
ListLayout grown(const ListLayout& layout, const std::vector<int64_t>& sizes, const std::vector<int64_t>& added);

// prefix[p] = rows of the p largest lists together (p = 0..nlist): the longest candidate row a
// query probing p lists can have.
std::vector<int64_t> largest_lists_prefix(const std::vector<int64_t>& sizes);
// The same from the lists' order by size (lists_by_size(sizes)), when the caller has it.
std::vector<int64_t> largest_lists_prefix(const std::vector<int64_t>& sizes, const std::vector<int32_t>& by_size);

// The list ids by size, largest first, equal sizes by id: the order in which the tensor seeds and
// pruned passes hand out their work units, so that the longest start first and the last are short.
std::vector<int32_t> lists_by_size(const std::vector<int64_t>& sizes);

}  // namespace ivfgpu
