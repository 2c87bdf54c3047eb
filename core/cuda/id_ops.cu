#include "id_ops.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>

#include "check.hpp"
#include "element_traits.cuh"
#include "id_bitset.cuh"
#include "id_map_view.cuh"
#include "launch.cuh"

namespace ivfgpu::cuda {

namespace {

constexpr double kIdMapMaxLoad = 0.8;

// A new row wins when its id is not mapped yet or it comes before the mapped row.
__global__ void winners_kernel(const int64_t* slots, const int64_t* existing, const uint8_t* found, int64_t n,
                               uint8_t* win) {
  for (int64_t i = global_thread(); i < n; i += thread_stride()) win[i] = !found[i] || slots[i] < existing[i];
}

// The stored row of each id, decoded to f32 (exact for every storage type).
template <class T>
__global__ void gather_kernel(IdMapView map, const T* rows, int64_t dim, const int64_t* ids, int64_t n, float* out,
                              uint8_t* found) {
  const int lane = threadIdx.x & 31;
  for (int64_t i = global_warp(); i < n; i += warp_stride()) {
    int64_t slot = -1;
    const bool hit = map.find_warp(ids[i], &slot);
    for (int64_t j = lane; j < dim; j += 32)
      out[i * dim + j] = hit ? DeviceElement<T>::load1(rows + slot * dim + j) : 0.0f;
    if (lane == 0) found[i] = hit ? 1 : 0;
  }
}

__global__ void found_to_count_kernel(const uint8_t* found, int64_t n, int64_t* counts) {
  for (int64_t i = global_thread(); i < n; i += thread_stride()) counts[i] = found[i];
}

// Every live used row whose id is asked for adds one to the count of the request that
// represents its id (request -> index map).
__global__ void count_rows_kernel(IdMapView requests, const int64_t* ids, const int64_t* start, const int64_t* size,
                                  const uint64_t* removed, unsigned long long* counts) {
  const int64_t l = blockIdx.x;
  const int64_t first = start[l], end = first + size[l];
  for (int64_t s = first + blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; s < end;
       s += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    if (slot_removed(removed, s)) continue;
    int64_t at = -1;
    if (requests.find(ids[s], &at)) atomicAdd(&counts[at], 1ull);
  }
}

// counts[i] = counts of the request that represents ids[i] (the last request of that id).
__global__ void spread_counts_kernel(IdMapView requests, const int64_t* ids, int64_t n, const unsigned long long* raw,
                                     int64_t* counts) {
  for (int64_t i = global_thread(); i < n; i += thread_stride()) {
    int64_t at = i;
    requests.find(ids[i], &at);
    counts[i] = static_cast<int64_t>(raw[at]);
  }
}

__global__ void iota64_kernel(int64_t* v, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += thread_stride()) v[i] = i;
}

// rev[i] = ids[first + count - 1 - i], slots[i] = first + count - 1 - i.
__global__ void reversed_chunk_kernel(const int64_t* ids, int64_t first, int64_t count, int64_t* rev, int64_t* slots) {
  for (int64_t i = global_thread(); i < count; i += thread_stride()) {
    const int64_t s = first + count - 1 - i;
    rev[i] = ids[s];
    slots[i] = s;
  }
}

}  // namespace

IdMapPtr build_id_map(const DeviceContext& ctx, cudaStream_t stream, const DeviceListStore& store) {
  const ListView v = store.view();
  auto map = std::make_shared<IdMap>(ctx, std::max<int64_t>(v.ntotal, 1024), kIdMapMaxLoad, stream);
  if (v.ntotal == 0) return map;
  if (v.removed == nullptr && v.ntotal == store.capacity()) {
    // Every slot is a live row (a packed layout, as a load builds): insert straight from the
    // store's ids, last chunk first and each chunk reversed, so that of equal ids the one first
    // in list order is inserted last and kept; the scratch is one chunk, not the whole index.
    constexpr int64_t kChunk = int64_t{1} << 20;
    const int64_t rows = std::min<int64_t>(kChunk, v.ntotal);
    DeviceBuffer<int64_t> keys(ctx, rows, stream), slots(ctx, rows, stream);
    for (int64_t end = v.ntotal; end > 0;) {
      const int64_t count = std::min<int64_t>(kChunk, end), first = end - count;
      reversed_chunk_kernel<<<grid_for(count), kDefaultThreads, 0, stream>>>(v.ids, first, count, keys.data(),
                                                                             slots.data());
      IVF_CUDA_CHECK_LAUNCH();
      map->insert(keys.data(), slots.data(), count, stream);
      end = first;
    }
    return map;
  }
  const int64_t cap = std::max<int64_t>(store.capacity(), 1);
  DeviceBuffer<int64_t> ids(ctx, cap, stream), slots(ctx, cap, stream);
  const int64_t n = store.live_pairs(ctx, stream, ids.data(), slots.data());
  if (n > 0) map->insert(ids.data(), slots.data(), n, stream);
  return map;
}

IdMapPtr map_with_rows(const DeviceContext& ctx, cudaStream_t stream, const IdMap& old, const int64_t* ids,
                       const int64_t* slots, int64_t n) {
  auto map = std::make_shared<IdMap>(old.clone(stream));
  if (n == 0) return map;
  DeviceBuffer<int64_t> existing(ctx, n, stream);
  DeviceBuffer<uint8_t> found(ctx, n, stream), win(ctx, n, stream);
  map->find(ids, n, existing.data(), found.data(), stream);
  winners_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(slots, existing.data(), found.data(), n, win.data());
  IVF_CUDA_CHECK_LAUNCH();
  // The winners, then sorted by slot descending: the insert keeps the last of equal ids, i.e.
  // the one first in list order.
  DeviceBuffer<int64_t> w_ids(ctx, n, stream), w_slots(ctx, n, stream), s_ids(ctx, n, stream), s_slots(ctx, n, stream);
  DeviceBuffer<int64_t> selected(ctx, 1, stream);
  std::size_t b1 = 0, b2 = 0, b3 = 0;
  IVF_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, b1, ids, win.data(), w_ids.data(), selected.data(), n, stream));
  IVF_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, b2, slots, win.data(), w_slots.data(), selected.data(), n, stream));
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, b3, w_slots.data(), s_slots.data(), w_ids.data(),
                                                           s_ids.data(), static_cast<int>(n), 0, 64, stream));
  DeviceBuffer<unsigned char> tmp(ctx, std::max({b1, b2, b3}), stream);
  IVF_CUDA_CHECK(cub::DeviceSelect::Flagged(tmp.data(), b1, ids, win.data(), w_ids.data(), selected.data(), n, stream));
  IVF_CUDA_CHECK(cub::DeviceSelect::Flagged(tmp.data(), b2, slots, win.data(), w_slots.data(), selected.data(), n, stream));
  int64_t m = 0;
  IVF_CUDA_CHECK(cudaMemcpyAsync(&m, selected.data(), sizeof m, cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (m == 0) return map;
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(tmp.data(), b3, w_slots.data(), s_slots.data(), w_ids.data(),
                                                           s_ids.data(), static_cast<int>(m), 0, 64, stream));
  map->insert(s_ids.data(), s_slots.data(), m, stream);
  return map;
}

IdMapPtr map_without(const DeviceContext&, cudaStream_t stream, const IdMap& old, const int64_t* ids, int64_t n) {
  auto map = std::make_shared<IdMap>(old.clone(stream));
  if (n > 0) map->erase(ids, n, stream);
  return map;
}

void gather_by_id(const DeviceContext&, cudaStream_t stream, const IdMap& map, const ListView& lists,
                  const int64_t* ids, int64_t n, float* out, uint8_t* found) {
  if (n == 0) return;
  dispatch_element_type(lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gather_kernel<T><<<grid_for(n * 32), kDefaultThreads, 0, stream>>>(map.view(), lists.rows<T>(), lists.dim, ids, n,
                                                                       out, found);
  });
  IVF_CUDA_CHECK_LAUNCH();
}

void count_by_id(const DeviceContext& ctx, cudaStream_t stream, const IdMap& map, bool unique, const ListView& lists,
                 const int64_t* ids, int64_t n, int64_t* counts) {
  if (n == 0) return;
  if (unique) {
    DeviceBuffer<uint8_t> found(ctx, n, stream);
    map.find(ids, n, nullptr, found.data(), stream);
    found_to_count_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(found.data(), n, counts);
    IVF_CUDA_CHECK_LAUNCH();
    return;
  }
  // Repeated ids share a count: requests map each id to one representative request.
  DeviceBuffer<int64_t> index(ctx, n, stream);
  iota64_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(index.data(), n);
  IVF_CUDA_CHECK_LAUNCH();
  IdMap requests(ctx, n, kIdMapMaxLoad, stream);
  requests.insert(ids, index.data(), n, stream);
  DeviceBuffer<unsigned long long> raw(ctx, n, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(raw.data(), 0, raw.bytes(), stream));
  if (lists.ntotal > 0) {
    int64_t largest = 0;
    for (int64_t l = 0; l < lists.nlist; ++l) largest = std::max(largest, lists.host_size[l]);
    dim3 grid(static_cast<unsigned>(lists.nlist),
              static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(64, (largest + 255) / 256))));
    count_rows_kernel<<<grid, kDefaultThreads, 0, stream>>>(requests.view(), lists.ids, lists.start, lists.size,
                                                            lists.removed, raw.data());
    IVF_CUDA_CHECK_LAUNCH();
  }
  spread_counts_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(requests.view(), ids, n, raw.data(), counts);
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));  // `requests` is freed on return
}

}  // namespace ivfgpu::cuda
