#include "device_list_store.hpp"

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <utility>

#include "../errors.hpp"
#include "../limits.hpp"
#include "check.hpp"
#include "launch.cuh"

namespace ivfgpu::cuda {

namespace {

__global__ void count_lists_kernel(const int32_t* assign, int64_t n, int32_t* counts) {
  for (int64_t i = global_thread(); i < n; i += thread_stride()) atomicAdd(&counts[assign[i]], 1);
}

__global__ void iota_kernel(int32_t* v, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += thread_stride()) v[i] = static_cast<int32_t>(i);
}

// Rows move as words W (16, 4, 2 or 1 bytes: the widest that divides the row and the bases),
// so the kernels do not care which element type a row holds; `dim` below counts words.
template <class Fn>
void with_row_words(std::size_t row_bytes, std::initializer_list<const void*> bases, Fn&& fn) {
  auto fits = [&](std::size_t w) {
    if (row_bytes % w != 0) return false;
    for (const void* b : bases)
      if (reinterpret_cast<uintptr_t>(b) % w != 0) return false;
    return true;
  };
  if (fits(16)) fn(uint4{}, static_cast<int64_t>(row_bytes / 16));
  else if (fits(4)) fn(uint32_t{}, static_cast<int64_t>(row_bytes / 4));
  else if (fits(2)) fn(uint16_t{}, static_cast<int64_t>(row_bytes / 2));
  else fn(uint8_t{}, static_cast<int64_t>(row_bytes));
}

// Moves every live list from the old layout to its place in the new one.
template <class W>
__global__ void copy_lists_kernel(const W* old_v, const int64_t* old_ids, const int64_t* old_start,
                                  const int64_t* old_size, const int64_t* new_start, int64_t dim, W* new_v,
                                  int64_t* new_ids) {
  const int64_t l = blockIdx.x;
  const int64_t os = old_start[l], ns = new_start[l], sz = old_size[l];
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t e = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < sz * dim; e += step)
    new_v[ns * dim + e] = old_v[os * dim + e];
  for (int64_t e = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < sz; e += step)
    new_ids[ns + e] = old_ids[os + e];
}

// Row r of the new storage is old slot gather[r] (live rows, list by list).
template <class W>
__global__ void gather_rows_kernel(const W* old_v, const int64_t* old_ids, const int64_t* gather, int64_t rows,
                                   int64_t dim, W* new_v, int64_t* new_ids, const int64_t* new_slot) {
  const int lane = threadIdx.x & 31;
  for (int64_t r = global_warp(); r < rows; r += warp_stride()) {
    const int64_t from = gather[r], to = new_slot[r];
    for (int64_t j = lane; j < dim; j += 32) new_v[to * dim + j] = old_v[from * dim + j];
    if (lane == 0) new_ids[to] = old_ids[from];
  }
}

__device__ __forceinline__ bool removed_at(const uint64_t* bits, int64_t slot) {
  return bits != nullptr && ((bits[slot >> 6] >> (slot & 63)) & 1u);
}

// Marks every live used row whose id is in `set`; counts them.
__global__ void mark_removed_kernel(const int64_t* ids, const int64_t* start, const int64_t* size,
                                    const uint64_t* old_bits, IdSetView set, unsigned long long* bits,
                                    unsigned long long* count) {
  const int64_t l = blockIdx.x;
  const int64_t first = start[l], end = first + size[l];
  for (int64_t s = first + blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; s < end;
       s += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    if (removed_at(old_bits, s) || !set.contains(ids[s])) continue;
    atomicOr(&bits[s >> 6], 1ull << (s & 63));
    atomicAdd(count, 1ull);
  }
}

// For every slot: (id, slot) when the slot is a live used row, written at position
// capacity - 1 - slot (descending slot order once compacted), with a flag.
__global__ void slot_pairs_kernel(const int64_t* ids, const int64_t* start, const int64_t* size, const uint64_t* bits,
                                  int64_t capacity, int64_t* keys, int64_t* slots, uint8_t* flags) {
  const int64_t l = blockIdx.x;
  const int64_t first = start[l], end = first + size[l];
  for (int64_t s = first + blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; s < end;
       s += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const int64_t at = capacity - 1 - s;
    keys[at] = ids[s];
    slots[at] = s;
    flags[at] = removed_at(bits, s) ? 0 : 1;
  }
}

// One warp per new row: sorted position s goes to dst[list] + (s - first[list]).
template <class W>
__global__ void scatter_rows_kernel(const W* x, const int64_t* ids, int64_t id_base, const int32_t* sorted_list,
                                    const int32_t* sorted_row, int64_t n, int64_t dim, const int64_t* dst,
                                    const int64_t* first, W* out_v, int64_t* out_ids, int64_t* out_slots) {
  const int lane = threadIdx.x & 31;
  for (int64_t s = global_warp(); s < n; s += warp_stride()) {
    const int32_t l = sorted_list[s];
    const int64_t row = sorted_row[s];
    const int64_t slot = dst[l] + (s - first[l]);
    for (int64_t j = lane; j < dim; j += 32) out_v[slot * dim + j] = x[row * dim + j];
    if (lane == 0) {
      out_ids[slot] = ids != nullptr ? ids[row] : id_base + row;
      if (out_slots != nullptr) out_slots[row] = slot;
    }
  }
}

unsigned list_chunks(int64_t largest) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(64, (largest + kDefaultThreads - 1) / kDefaultThreads)));
}

template <class V>
void upload(cudaStream_t stream, V* dst, const std::vector<V>& src) {
  if (src.empty()) return;
  IVF_CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(V), cudaMemcpyHostToDevice, stream));
}

std::shared_ptr<DeviceListStorage> make_storage(const DeviceContext& ctx, cudaStream_t stream, ListLayout layout,
                                                std::size_t row_bytes) {
  auto s = std::make_shared<DeviceListStorage>();
  s->vectors = DeviceBuffer<unsigned char>(ctx, static_cast<std::size_t>(layout.capacity) * row_bytes, stream,
                                           MemoryUse::State);
  s->ids = DeviceBuffer<int64_t>(ctx, static_cast<std::size_t>(layout.capacity), stream, MemoryUse::State);
  s->start = DeviceBuffer<int64_t>(ctx, layout.start.size(), stream, MemoryUse::State);
  upload(stream, s->start.data(), layout.start);
  s->layout = std::move(layout);
  return s;
}

}  // namespace

DeviceListStore::DeviceListStore(const DeviceContext& ctx, cudaStream_t stream, int64_t dim, ElementType type,
                                 std::shared_ptr<DeviceListStorage> storage, std::vector<int64_t> sizes,
                                 std::shared_ptr<const DeviceRemovedRows> removed)
    : ctx_(&ctx), dim_(dim), type_(type), row_bytes_(static_cast<std::size_t>(dim) * element_size(type)),
      storage_(std::move(storage)), sizes_(std::move(sizes)),
      by_size_(lists_by_size(sizes_)), largest_prefix_(largest_lists_prefix(sizes_, by_size_)),
      d_sizes_(ctx, sizes_.size(), stream, MemoryUse::State),
      d_by_size_(ctx, sizes_.size(), stream, MemoryUse::State), removed_(std::move(removed)),
      ntotal_(std::accumulate(sizes_.begin(), sizes_.end(), int64_t{0}) - (removed_ ? removed_->host.count : 0)) {
  upload(stream, d_sizes_.data(), sizes_);
  upload(stream, d_by_size_.data(), by_size_);
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::shared_ptr<const DeviceListStore> DeviceListStore::empty(const DeviceContext& ctx, cudaStream_t stream,
                                                              int64_t dim, ElementType type, int64_t nlist) {
  auto storage = make_storage(ctx, stream, ListLayout::empty(nlist), static_cast<std::size_t>(dim) * element_size(type));
  return std::shared_ptr<const DeviceListStore>(new DeviceListStore(
      ctx, stream, dim, type, std::move(storage), std::vector<int64_t>(static_cast<std::size_t>(nlist), 0)));
}

std::shared_ptr<const DeviceListStore> DeviceListStore::from_model(const DeviceContext& ctx, cudaStream_t stream,
                                                                   const HostModel& model) {
  std::vector<int64_t> sizes(static_cast<std::size_t>(model.nlist));
  for (int64_t l = 0; l < model.nlist; ++l) sizes[l] = model.list_size(l);
  auto storage = make_storage(ctx, stream, ListLayout::packed(sizes), model.row_bytes());
  if (model.ntotal() > 0) {
    // The file's list order is the packed layout: one copy each, no sort.
    IVF_CUDA_CHECK(cudaMemcpyAsync(storage->vectors.data(), model.row_data(), storage->vectors.bytes(),
                                   cudaMemcpyHostToDevice, stream));
    IVF_CUDA_CHECK(cudaMemcpyAsync(storage->ids.data(), model.ids.data(), storage->ids.bytes(),
                                   cudaMemcpyHostToDevice, stream));
  }
  return std::shared_ptr<const DeviceListStore>(
      new DeviceListStore(ctx, stream, model.dim, model.type, std::move(storage), std::move(sizes)));
}

std::shared_ptr<DeviceListStorage> DeviceListStore::copy_live(const DeviceContext& ctx, cudaStream_t stream,
                                                              ListLayout layout) const {
  const int64_t nlist = static_cast<int64_t>(sizes_.size());
  auto target = make_storage(ctx, stream, std::move(layout), row_bytes_);
  if (ntotal_ == 0) return target;
  if (!removed_) {
    // Whole lists move: one block row per list.
    const int64_t largest = *std::max_element(sizes_.begin(), sizes_.end());
    dim3 grid(static_cast<unsigned>(nlist), list_chunks(largest));
    with_row_words(row_bytes_, {}, [&](auto word, int64_t words) {
      using W = decltype(word);
      copy_lists_kernel<W><<<grid, kDefaultThreads, 0, stream>>>(
          reinterpret_cast<const W*>(storage_->vectors.data()), storage_->ids.data(), storage_->start.data(),
          d_sizes_.data(), target->start.data(), words, reinterpret_cast<W*>(target->vectors.data()),
          target->ids.data());
    });
    IVF_CUDA_CHECK_LAUNCH();
    return target;
  }
  // Live rows only: the (old slot, new slot) pairs are planned on the host from its mirror of
  // the removed bits, then moved in one gather.
  std::vector<int64_t> from, to;
  from.reserve(static_cast<std::size_t>(ntotal_));
  to.reserve(static_cast<std::size_t>(ntotal_));
  const ListView v = view();
  for (int64_t l = 0; l < nlist; ++l) {
    int64_t cursor = target->layout.start[l];
    for (int64_t s = v.host_start[l], e = s + sizes_[l]; s < e; ++s)
      if (!v.host_removed_at(s)) {
        from.push_back(s);
        to.push_back(cursor++);
      }
  }
  DeviceBuffer<int64_t> d_from(ctx, from.size(), stream), d_to(ctx, to.size(), stream);
  upload(stream, d_from.data(), from);
  upload(stream, d_to.data(), to);
  const int64_t rows = static_cast<int64_t>(from.size());
  with_row_words(row_bytes_, {}, [&](auto word, int64_t words) {
    using W = decltype(word);
    gather_rows_kernel<W><<<grid_for(rows * 32), kDefaultThreads, 0, stream>>>(
        reinterpret_cast<const W*>(storage_->vectors.data()), storage_->ids.data(), d_from.data(), rows, words,
        reinterpret_cast<W*>(target->vectors.data()), target->ids.data(), d_to.data());
  });
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host plans die here
  return target;
}

std::shared_ptr<const DeviceListStore> DeviceListStore::compacted(const DeviceContext& ctx, cudaStream_t stream) const {
  const std::vector<int64_t> live = live_list_sizes(view());
  auto target = copy_live(ctx, stream, grown(ListLayout::empty(static_cast<int64_t>(live.size())), live,
                                             std::vector<int64_t>(live.size(), 0)));
  return std::shared_ptr<const DeviceListStore>(new DeviceListStore(ctx, stream, dim_, type_, std::move(target), live));
}

std::pair<std::shared_ptr<const DeviceListStore>, int64_t> DeviceListStore::remove_in(const DeviceContext& ctx,
                                                                                      cudaStream_t stream,
                                                                                      const IdSetView& set) const {
  const int64_t nlist = static_cast<int64_t>(sizes_.size());
  const std::size_t words = RemovedRows::words_for(storage_->layout.capacity);
  auto next = std::make_shared<DeviceRemovedRows>();
  next->bits = DeviceBuffer<uint64_t>(ctx, std::max<std::size_t>(words, 1), stream, MemoryUse::State);
  DeviceBuffer<unsigned long long> count(ctx, 1, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(count.data(), 0, sizeof(unsigned long long), stream));
  if (removed_)
    IVF_CUDA_CHECK(cudaMemcpyAsync(next->bits.data(), removed_->bits.data(), words * sizeof(uint64_t),
                                   cudaMemcpyDeviceToDevice, stream));
  else
    IVF_CUDA_CHECK(cudaMemsetAsync(next->bits.data(), 0, next->bits.bytes(), stream));
  if (ntotal_ > 0) {
    const int64_t largest = *std::max_element(sizes_.begin(), sizes_.end());
    dim3 grid(static_cast<unsigned>(nlist), list_chunks(largest));
    mark_removed_kernel<<<grid, kDefaultThreads, 0, stream>>>(
        storage_->ids.data(), storage_->start.data(), d_sizes_.data(), removed_ ? removed_->bits.data() : nullptr, set,
        reinterpret_cast<unsigned long long*>(next->bits.data()), count.data());
    IVF_CUDA_CHECK_LAUNCH();
  }
  unsigned long long hits = 0;
  next->host.bits.resize(words);
  IVF_CUDA_CHECK(cudaMemcpyAsync(&hits, count.data(), sizeof hits, cudaMemcpyDeviceToHost, stream));
  if (words > 0)
    IVF_CUDA_CHECK(cudaMemcpyAsync(next->host.bits.data(), next->bits.data(), words * sizeof(uint64_t),
                                   cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  next->host.count = (removed_ ? removed_->host.count : 0) + static_cast<int64_t>(hits);
  return {std::shared_ptr<const DeviceListStore>(new DeviceListStore(ctx, stream, dim_, type_, storage_, sizes_, std::move(next))),
          static_cast<int64_t>(hits)};
}

int64_t DeviceListStore::live_pairs(const DeviceContext& ctx, cudaStream_t stream, int64_t* ids, int64_t* slots) const {
  const int64_t capacity = storage_->layout.capacity, nlist = static_cast<int64_t>(sizes_.size());
  if (ntotal_ == 0) return 0;
  DeviceBuffer<int64_t> keys(ctx, capacity, stream), vals(ctx, capacity, stream);
  DeviceBuffer<uint8_t> flags(ctx, capacity, stream);
  DeviceBuffer<int64_t> selected(ctx, 1, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(flags.data(), 0, flags.bytes(), stream));  // unused slots stay 0
  const int64_t largest = *std::max_element(sizes_.begin(), sizes_.end());
  dim3 grid(static_cast<unsigned>(nlist), list_chunks(largest));
  slot_pairs_kernel<<<grid, kDefaultThreads, 0, stream>>>(storage_->ids.data(), storage_->start.data(), d_sizes_.data(),
                                                          removed_ ? removed_->bits.data() : nullptr, capacity,
                                                          keys.data(), vals.data(), flags.data());
  IVF_CUDA_CHECK_LAUNCH();
  std::size_t b1 = 0, b2 = 0;
  IVF_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, b1, keys.data(), flags.data(), ids, selected.data(), capacity, stream));
  IVF_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, b2, vals.data(), flags.data(), slots, selected.data(), capacity, stream));
  DeviceBuffer<unsigned char> tmp(ctx, std::max(b1, b2), stream);
  IVF_CUDA_CHECK(cub::DeviceSelect::Flagged(tmp.data(), b1, keys.data(), flags.data(), ids, selected.data(), capacity, stream));
  IVF_CUDA_CHECK(cub::DeviceSelect::Flagged(tmp.data(), b2, vals.data(), flags.data(), slots, selected.data(), capacity, stream));
  int64_t n = 0;
  IVF_CUDA_CHECK(cudaMemcpyAsync(&n, selected.data(), sizeof n, cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  return n;
}

std::shared_ptr<const DeviceListStore> DeviceListStore::append(const DeviceContext& ctx, cudaStream_t stream,
                                                               const void* x, const int64_t* ids,
                                                               const int32_t* assign, int64_t n,
                                                               int64_t* slots) const {
  if (n > limits::kMaxRowsPerDeviceAdd) fail(Errc::Unsupported, "add: more than 2^31 - 1 vectors in one call");
  const int64_t nlist = static_cast<int64_t>(sizes_.size());
  // 1. Rows per list.
  DeviceBuffer<int32_t> d_counts(ctx, nlist, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(d_counts.data(), 0, d_counts.bytes(), stream));
  count_lists_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(assign, n, d_counts.data());
  IVF_CUDA_CHECK_LAUNCH();
  std::vector<int32_t> counts(static_cast<std::size_t>(nlist));
  IVF_CUDA_CHECK(cudaMemcpyAsync(counts.data(), d_counts.data(), d_counts.bytes(), cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));

  // 2. The layout: this storage when every list has room, else a grown one of the live rows.
  std::vector<int64_t> added(counts.begin(), counts.end()), first(static_cast<std::size_t>(nlist), 0);
  for (int64_t l = 1; l < nlist; ++l) first[l] = first[l - 1] + added[l - 1];
  const bool grow = !fits(storage_->layout, sizes_, added);
  std::vector<int64_t> base_sizes = grow ? live_list_sizes(view()) : sizes_;

  // 3. Every allocation before any write to shared storage: a failure leaves it untouched. (A
  // grown storage is private until the new store is published.)
  std::shared_ptr<DeviceListStorage> target =
      grow ? copy_live(ctx, stream, grown(ListLayout::empty(nlist), base_sizes, added)) : storage_;
  std::shared_ptr<const DeviceRemovedRows> removed = grow ? nullptr : removed_;
  std::vector<int64_t> dst(static_cast<std::size_t>(nlist)), next_sizes(base_sizes);
  for (int64_t l = 0; l < nlist; ++l) {
    dst[l] = target->layout.start[l] + base_sizes[l];
    next_sizes[l] += added[l];
  }
  DeviceBuffer<int64_t> d_dst(ctx, nlist, stream), d_first(ctx, nlist, stream);
  DeviceBuffer<int32_t> rows_in(ctx, n, stream), rows_out(ctx, n, stream), lists_out(ctx, n, stream);
  const int end_bit = radix_end_bit(nlist);
  std::size_t tmp_bytes = 0;
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, assign, lists_out.data(), rows_in.data(),
                                                 rows_out.data(), static_cast<int>(n), 0, end_bit, stream));
  DeviceBuffer<unsigned char> tmp(ctx, tmp_bytes, stream);

  // 4. Device work. Old rows are only read; new rows land past every published state's sizes.
  upload(stream, d_dst.data(), dst);
  upload(stream, d_first.data(), first);
  iota_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(rows_in.data(), n);
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data(), tmp_bytes, assign, lists_out.data(), rows_in.data(),
                                                 rows_out.data(), static_cast<int>(n), 0, end_bit, stream));
  with_row_words(row_bytes_, {x}, [&](auto word, int64_t words) {
    using W = decltype(word);
    scatter_rows_kernel<W><<<grid_for(n * 32), kDefaultThreads, 0, stream>>>(
        static_cast<const W*>(x), ids, ntotal_, lists_out.data(), rows_out.data(), n, words, d_dst.data(),
        d_first.data(), reinterpret_cast<W*>(target->vectors.data()), target->ids.data(), slots);
  });
  IVF_CUDA_CHECK_LAUNCH();
  // The constructor synchronises the stream: the new store is complete when it returns.
  return std::shared_ptr<const DeviceListStore>(new DeviceListStore(ctx, stream, dim_, type_, std::move(target),
                                                                    std::move(next_sizes), std::move(removed)));
}

ListView DeviceListStore::view() const {
  ListView v;
  v.nlist = static_cast<int64_t>(sizes_.size());
  v.dim = dim_;
  v.type = type_;
  v.tier = MemoryTier::Device;
  v.ntotal = ntotal_;
  v.vectors = storage_->vectors.data();
  v.ids = storage_->ids.data();
  v.start = storage_->start.data();
  v.size = d_sizes_.data();
  v.by_size = d_by_size_.data();
  v.host_start = storage_->layout.start.data();
  v.host_size = sizes_.data();
  v.removed = removed_ ? removed_->bits.data() : nullptr;
  v.host_removed = removed_ ? removed_->host.bits.data() : nullptr;
  v.removed_count = removed_ ? removed_->host.count : 0;
  v.largest_prefix = largest_prefix_.data();
  return v;
}

std::size_t DeviceListStore::bytes() const {
  return storage_->vectors.bytes() + storage_->ids.bytes() + storage_->start.bytes() + d_sizes_.bytes() +
         d_by_size_.bytes() + (removed_ ? removed_->bits.bytes() : 0);
}

void DeviceListStore::export_lists(HostModel& model) const {
  const std::vector<int64_t> live = live_list_sizes(view());
  const int64_t nlist = static_cast<int64_t>(live.size());
  model.list_offsets.assign(static_cast<std::size_t>(nlist) + 1, 0);
  for (int64_t l = 0; l < nlist; ++l) model.list_offsets[l + 1] = model.list_offsets[l] + live[l];
  model.type = type_;
  model.vectors.clear();
  model.packed.clear();
  if (type_ == ElementType::F32) model.vectors.resize(static_cast<std::size_t>(ntotal_ * dim_));
  else model.packed.resize(static_cast<std::size_t>(ntotal_) * row_bytes_);
  unsigned char* rows_out = type_ == ElementType::F32 ? reinterpret_cast<unsigned char*>(model.vectors.data())
                                                      : model.packed.data();
  model.ids.resize(static_cast<std::size_t>(ntotal_));
  // A reader: it runs on a worker stream of its own, never behind a mutation's work. Runs of
  // live rows are copied whole (a list at a time when nothing is removed).
  DeviceContext::Lease lease(*ctx_, nullptr);
  const cudaStream_t stream = lease.stream();
  const ListView v = view();
  for (int64_t l = 0; l < nlist; ++l) {
    int64_t to = model.list_offsets[l];
    const int64_t end = v.host_start[l] + sizes_[l];
    for (int64_t s = v.host_start[l]; s < end;) {
      if (v.host_removed_at(s)) {
        ++s;
        continue;
      }
      int64_t run = 1;
      while (s + run < end && !v.host_removed_at(s + run)) ++run;
      IVF_CUDA_CHECK(cudaMemcpyAsync(rows_out + to * row_bytes_, storage_->vectors.data() + s * row_bytes_,
                                     row_bytes_ * run, cudaMemcpyDeviceToHost, stream));
      IVF_CUDA_CHECK(cudaMemcpyAsync(model.ids.data() + to, storage_->ids.data() + s, sizeof(int64_t) * run,
                                     cudaMemcpyDeviceToHost, stream));
      to += run;
      s += run;
    }
  }
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ivfgpu::cuda
