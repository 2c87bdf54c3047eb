// The CPU backend's scan of one block of queries whose probes are known, in one of two orders
// (scan_block picks, in one place):
//
// - list-major: the (query, probe) pairs are grouped by list, and each list is read in
//   cache-sized pieces that every query probing it scores before the next piece is read. A
//   query-by-query scan reads each list once per query that probes it (a block of 2,000 queries
//   at nprobe 8 read a 100 MB index ~150 times over) and runs at memory speed.
// - query-major: each query scans its own lists into its own top-k. Where the index fits a
//   cache, or k is large against a pair's scoring work, the pairs' separate top-k (each filling
//   up to k before it can reject anything) cost more than the reads they save.
//
// Both give the same results bit for bit: the same exact distance for every (query, row)
// (row_distances.hpp scores four rows at once with exact_distance's bits), TopK's total order
// (distance, then id), and a query's k best are the k best of the union of its pairs' bests.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../id_filter.hpp"
#include "../list_store.hpp"
#include "../types.hpp"
#include "distances.hpp"
#include "parallel.hpp"
#include "row_distances.hpp"
#include "topk.hpp"

namespace ivfgpu::cpu {

struct ScanBlock {
  const float* queries;     // count x dim, f32 (decoded; unit length for cosine)
  const void* int_queries;  // count x dim of the row type (integer rows, integer queries) or null
  int64_t count, dim, nprobe, k;
  const int64_t* probes;    // count x nprobe
  bool larger;
  Metric kernel;            // L2 or inner product (cosine is inner product on unit vectors)
  const IdFilter* filter;   // null: none
  int threads;
  int64_t* ids;             // count x k
  float* dists;
};

// (query, probe) pairs of one block: its probes and a list-major scan's per-pair arrays (three
// int64 each) stay within about 100 MB.
constexpr int64_t kMaxBlockPairs = int64_t{1} << 22;

// Entries (pairs x min(k, list size)) a list-major scan may hold for one block, and the
// largest block that keeps a scan of nprobe probes with k neighbours under it (at least 1;
// scan_block scans a block that holds more query-major).
constexpr int64_t kListMajorMaxEntries = int64_t{1} << 24;  // 256 MiB of Neighbor
inline int64_t list_major_block(int64_t nprobe, int64_t k, int64_t largest_list) {
  const int64_t per_query = std::max<int64_t>(1, nprobe * std::min(k, std::max<int64_t>(1, largest_list)));
  return std::max<int64_t>(1, kListMajorMaxEntries / per_query);
}

namespace scan_detail {

// Rows per piece: about 64 KiB of them, so a piece stays in the core's cache while every query
// of a list-major item reads it.
template <class T>
int64_t piece_rows(int64_t dim) {
  return std::max<int64_t>(16, (int64_t{64} << 10) / std::max<int64_t>(1, dim * int64_t{sizeof(T)}));
}

// Scores rows [r0, r1) of the store for one query into a heap (TopK or HeapSpan), skipping the
// rows keep[i - r0] marks out. Removed and filtered-out rows are skipped inside the scan, never
// after it.
template <class T>
struct RowScorer {
  const ListView& lists;
  const ScanBlock& b;
  const T* rows = lists.rows<T>();
  const T* int_queries = static_cast<const T*>(b.int_queries);
  RowDistances<T> four_rows = row_distances<T>(b.kernel);

  void mark(int64_t r0, int64_t r1, char* keep) const {
    for (int64_t i = r0; i < r1; ++i)
      keep[i - r0] = !lists.host_removed_at(i) && (b.filter == nullptr || b.filter->permits(lists.ids[i]));
  }

  // cached: the rows are in the core's cache (a piece that several queries score). Rows read
  // from memory are scored one at a time: the hardware prefetcher follows one row after
  // another, not four rows read side by side (from memory, four at once ran at half the speed).
  template <class Heap>
  void score(int64_t q, int64_t r0, int64_t r1, const char* keep, bool cached, Heap& heap) const {
    const int64_t dim = b.dim;
    const float* query = b.queries + q * dim;
    // Four rows at once where all four are kept (a sparse filter leaves few such groups:
    // its rows are scored one by one, never the rows it excludes).
    int64_t i = r0;
    if (four_rows != nullptr && cached && int_queries == nullptr)
      for (; i + kScanRows <= r1; i += kScanRows) {
        const char* k4 = keep + (i - r0);
        if (!(k4[0] && k4[1] && k4[2] && k4[3])) {
          for (int r = 0; r < kScanRows; ++r)
            if (k4[r]) heap.push(exact_distance(query, rows + (i + r) * dim, dim, b.kernel), lists.ids[i + r]);
          continue;
        }
        float d[kScanRows];
        four_rows(query, rows + i * dim, dim, d);
        for (int r = 0; r < kScanRows; ++r) heap.push(d[r], lists.ids[i + r]);
      }
    for (; i < r1; ++i) {
      if (!keep[i - r0]) continue;
      float d;
      if constexpr (std::is_integral_v<T>) {
        d = int_queries != nullptr ? exact_integer_distance(int_queries + q * dim, rows + i * dim, dim, b.kernel)
                                   : exact_distance(query, rows + i * dim, dim, b.kernel);
      } else {
        d = exact_distance(query, rows + i * dim, dim, b.kernel);
      }
      heap.push(d, lists.ids[i]);
    }
  }
};

// Rows one at a time: a query reads them once (from L3 too, four rows side by side measured no
// faster).
template <class T>
void scan_query_major(const ListView& lists, const ScanBlock& b) {
  const RowScorer<T> scorer{lists, b};
  const int64_t piece = piece_rows<T>(b.dim);
  parallel_for(b.count, b.threads, 4, [&](int64_t q0, int64_t q1) {
    std::vector<char> keep(static_cast<std::size_t>(piece));
    for (int64_t q = q0; q < q1; ++q) {
      TopK top(b.k, b.larger);
      for (int64_t p = 0; p < b.nprobe; ++p) {
        const int64_t l = b.probes[q * b.nprobe + p];
        const int64_t start = lists.host_start[l], stop = start + lists.host_size[l];
        for (int64_t r0 = start; r0 < stop; r0 += piece) {
          const int64_t r1 = std::min(stop, r0 + piece);
          scorer.mark(r0, r1, keep.data());
          scorer.score(q, r0, r1, keep.data(), false, top);
        }
      }
      top.write(b.ids + q * b.k, b.dists + q * b.k);
    }
  });
}

// pairs_at[l] .. pairs_at[l + 1]: the entries of `grouped` (pair numbers q * nprobe + p) that
// probe list l.
template <class T>
void scan_list_major(const ListView& lists, const ScanBlock& b, const std::vector<int64_t>& pairs_at,
                     const std::vector<int64_t>& grouped) {
  const int64_t nlist = lists.nlist, npairs = b.count * b.nprobe;
  // A pair's heap holds min(k, list size) entries, all in one allocation.
  std::vector<int64_t> heap_at(static_cast<std::size_t>(npairs + 1), 0);
  for (int64_t i = 0; i < npairs; ++i) heap_at[i + 1] = heap_at[i] + std::min(b.k, lists.host_size[b.probes[i]]);
  std::vector<Neighbor> storage(static_cast<std::size_t>(heap_at[npairs]));
  std::vector<int64_t> heap_size(static_cast<std::size_t>(npairs), 0);

  // Work items: up to kPairsPerItem pairs of one list (so a list probed by many queries is
  // spread over threads), largest first, taken by the threads as they come free.
  constexpr int64_t kPairsPerItem = 32;
  struct Item {
    int64_t list, begin, end, cost;
  };
  std::vector<Item> items;
  for (int64_t l = 0; l < nlist; ++l)
    for (int64_t g = pairs_at[l]; g < pairs_at[l + 1]; g += kPairsPerItem) {
      const int64_t e = std::min(g + kPairsPerItem, pairs_at[l + 1]);
      items.push_back({l, g, e, (e - g) * lists.host_size[l]});
    }
  std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) { return x.cost > y.cost; });

  const RowScorer<T> scorer{lists, b};
  const int64_t piece = piece_rows<T>(b.dim);
  std::atomic<int64_t> next{0};
  const int64_t nitems = static_cast<int64_t>(items.size());
  parallel_for(std::min<int64_t>(b.threads, nitems), b.threads, 1, [&](int64_t, int64_t) {
    std::vector<char> keep(static_cast<std::size_t>(piece));
    std::vector<HeapSpan> heaps;
    for (int64_t it; (it = next.fetch_add(1, std::memory_order_relaxed)) < nitems;) {
      const Item& item = items[static_cast<std::size_t>(it)];
      heaps.clear();
      for (int64_t g = item.begin; g < item.end; ++g) {
        const int64_t pair = grouped[g];
        heaps.emplace_back(storage.data() + heap_at[pair], heap_at[pair + 1] - heap_at[pair], b.larger);
      }
      const int64_t start = lists.host_start[item.list], stop = start + lists.host_size[item.list];
      for (int64_t r0 = start; r0 < stop; r0 += piece) {
        const int64_t r1 = std::min(stop, r0 + piece);
        scorer.mark(r0, r1, keep.data());
        // The item's first query reads the piece from memory; the others find it in cache.
        for (int64_t g = item.begin; g < item.end; ++g)
          scorer.score(grouped[g] / b.nprobe, r0, r1, keep.data(), g > item.begin,
                       heaps[static_cast<std::size_t>(g - item.begin)]);
      }
      for (int64_t g = item.begin; g < item.end; ++g) heap_size[grouped[g]] = heaps[static_cast<std::size_t>(g - item.begin)].size();
    }
  });

  // Each query: the k best of its pairs' bests.
  parallel_for(b.count, b.threads, 16, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      TopK top(b.k, b.larger);
      for (int64_t pair = q * b.nprobe; pair < (q + 1) * b.nprobe; ++pair) {
        const Neighbor* h = storage.data() + heap_at[pair];
        for (int64_t j = 0; j < heap_size[pair]; ++j) top.push(h[j].dist, h[j].id);
      }
      top.write(b.ids + q * b.k, b.dists + q * b.k);
    }
  });
}

}  // namespace scan_detail

// The one place that picks the order. List-major where a pair does much scoring per neighbour
// it keeps (rows x dimensions at least kMinWorkPerKept x k on average, so filling its own top-k
// is cheap beside it) and either the index is larger than a cache could hold (kMinListMajorBytes
// of rows: each list shared by several queries is then read once instead of once per query) or
// the block has fewer queries than threads (list-major spreads one query's probes over them).
// Measured on this project's 2-core EPYC, same results every time: 200K x 128 f32, 2,000
// queries, nprobe 8, list-major 1.5x faster with the same kernel; Fashion-MNIST (60K x 784,
// lists of ~59 rows, k 10: 4,600 per neighbour kept) 1.2x at nprobe 1 to 2.5x at 64; one
// query at nprobe 16 (200K x 128) 1.8x; 20K x 33 f16 in 50 lists, 300 queries, nprobe 50, k 100
// (130 per neighbour kept): query-major 2x faster; 20K x 32 f32 (2.5 MB), nprobe 8, k 10:
// query-major 1.3x faster.
template <class T>
void scan_block(const ListView& lists, const ScanBlock& b) {
  constexpr int64_t kMinWorkPerKept = 1024, kMinListMajorBytes = int64_t{8} << 20;
  const int64_t nlist = lists.nlist, npairs = b.count * b.nprobe;
  std::vector<int64_t> pairs_at(static_cast<std::size_t>(nlist + 1), 0);
  int64_t rows = 0, entries = 0;
  for (int64_t i = 0; i < npairs; ++i) {
    const int64_t size = lists.host_size[b.probes[i]];
    ++pairs_at[b.probes[i] + 1];
    rows += size;
    entries += std::min(b.k, size);
  }
  for (int64_t l = 0; l < nlist; ++l) pairs_at[l + 1] += pairs_at[l];
  const bool fills_cheaply = rows * b.dim >= kMinWorkPerKept * b.k * npairs;
  const bool beyond_cache = lists.ntotal * b.dim * int64_t{sizeof(T)} >= kMinListMajorBytes;
  // Fewer queries than threads: query by query would leave threads idle, list-major spreads a
  // query's probes over them (the same per-pair heaps, then the merge).
  const bool few_queries = b.count < b.threads;
  bool list_major = fills_cheaply && (few_queries || beyond_cache);
  // IVFGPU_CPU_SCAN=list or =query pins the order (A/B runs; tests that compare the two).
  if (const char* pin = std::getenv("IVFGPU_CPU_SCAN"); pin != nullptr) {
    if (std::strcmp(pin, "list") == 0) list_major = true;
    if (std::strcmp(pin, "query") == 0) list_major = false;
  }
  if (!list_major || entries > kListMajorMaxEntries) return scan_detail::scan_query_major<T>(lists, b);
  std::vector<int64_t> grouped(static_cast<std::size_t>(npairs));
  std::vector<int64_t> cursor(pairs_at.begin(), pairs_at.end() - 1);
  for (int64_t i = 0; i < npairs; ++i) grouped[cursor[b.probes[i]]++] = i;
  scan_detail::scan_list_major<T>(lists, b, pairs_at, grouped);
}

}  // namespace ivfgpu::cpu
