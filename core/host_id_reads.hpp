// get and count_ids over rows the host can read, written once for the backends whose lists
// live in host memory (the CPU backend, the CUDA host tier). for_each_row(fn) calls
// fn(id, decode) for every live row in list order, decode(out) writing the row as dim f32.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace ivfgpu {

// The row of each id that comes first in list order into out (n x dim), found[i] = 1; zeros
// and found[i] = 0 for an absent id. One pass over the rows, the wanted ids in a hash map.
template <class ForEachRow>
void get_first_rows(ForEachRow&& for_each_row, const int64_t* ids, int64_t n, int64_t dim, float* out,
                    uint8_t* found) {
  std::unordered_map<int64_t, std::vector<int64_t>> wanted;
  for (int64_t i = 0; i < n; ++i) wanted[ids[i]].push_back(i);
  std::fill(out, out + n * dim, 0.0f);
  if (found) std::fill(found, found + n, uint8_t{0});
  std::unordered_set<int64_t> done;
  for_each_row([&](int64_t id, auto&& decode) {
    auto it = wanted.find(id);
    if (it == wanted.end() || !done.insert(id).second) return;
    decode(out + it->second.front() * dim);
    for (int64_t i : it->second) {
      if (i != it->second.front()) std::copy_n(out + it->second.front() * dim, dim, out + i * dim);
      if (found) found[i] = 1;
    }
  });
}

// How many rows hold each id.
template <class ForEachRow>
void count_rows(ForEachRow&& for_each_row, const int64_t* ids, int64_t n, int64_t* counts) {
  std::unordered_map<int64_t, int64_t> count;
  for (int64_t i = 0; i < n; ++i) count.emplace(ids[i], 0);
  for_each_row([&](int64_t id, auto&&) {
    auto it = count.find(id);
    if (it != count.end()) ++it->second;
  });
  for (int64_t i = 0; i < n; ++i) counts[i] = count[ids[i]];
}

// The ids an add uses: the caller's, or first, first + 1, ... kept in `storage`.
inline const int64_t* ids_or_sequential(const int64_t* ids, int64_t first, int64_t n, std::vector<int64_t>& storage) {
  if (ids != nullptr) return ids;
  storage.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) storage[i] = first + i;
  return storage.data();
}

}  // namespace ivfgpu
