#include "device_list_store.hpp"

#include <cub/device/device_radix_sort.cuh>

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

// Moves every live list from the old layout to its place in the new one.
__global__ void copy_lists_kernel(const float* old_v, const int64_t* old_ids, const int64_t* old_start,
                                  const int64_t* old_size, const int64_t* new_start, int64_t dim, float* new_v,
                                  int64_t* new_ids) {
  const int64_t l = blockIdx.x;
  const int64_t os = old_start[l], ns = new_start[l], sz = old_size[l];
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t e = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < sz * dim; e += step)
    new_v[ns * dim + e] = old_v[os * dim + e];
  for (int64_t e = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < sz; e += step)
    new_ids[ns + e] = old_ids[os + e];
}

// One warp per new row: sorted position s goes to dst[list] + (s - first[list]).
__global__ void scatter_rows_kernel(const float* x, const int64_t* ids, int64_t id_base, const int32_t* sorted_list,
                                    const int32_t* sorted_row, int64_t n, int64_t dim, const int64_t* dst,
                                    const int64_t* first, float* out_v, int64_t* out_ids) {
  const int lane = threadIdx.x & 31;
  for (int64_t s = global_warp(); s < n; s += warp_stride()) {
    const int32_t l = sorted_list[s];
    const int64_t row = sorted_row[s];
    const int64_t slot = dst[l] + (s - first[l]);
    for (int64_t j = lane; j < dim; j += 32) out_v[slot * dim + j] = x[row * dim + j];
    if (lane == 0) out_ids[slot] = ids != nullptr ? ids[row] : id_base + row;
  }
}

void upload(cudaStream_t stream, int64_t* dst, const std::vector<int64_t>& src) {
  if (src.empty()) return;
  IVF_CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
}

std::shared_ptr<DeviceListStorage> make_storage(const DeviceContext& ctx, cudaStream_t stream, ListLayout layout,
                                                int64_t dim) {
  auto s = std::make_shared<DeviceListStorage>();
  s->vectors = DeviceBuffer<float>(ctx, static_cast<std::size_t>(layout.capacity * dim), stream);
  s->ids = DeviceBuffer<int64_t>(ctx, static_cast<std::size_t>(layout.capacity), stream);
  s->start = DeviceBuffer<int64_t>(ctx, layout.start.size(), stream);
  upload(stream, s->start.data(), layout.start);
  s->layout = std::move(layout);
  return s;
}

}  // namespace

DeviceListStore::DeviceListStore(const DeviceContext& ctx, cudaStream_t stream, int64_t dim,
                                 std::shared_ptr<DeviceListStorage> storage, std::vector<int64_t> sizes)
    : ctx_(&ctx), dim_(dim), storage_(std::move(storage)), sizes_(std::move(sizes)),
      largest_prefix_(largest_lists_prefix(sizes_)), d_sizes_(ctx, sizes_.size(), stream),
      ntotal_(std::accumulate(sizes_.begin(), sizes_.end(), int64_t{0})) {
  upload(stream, d_sizes_.data(), sizes_);
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::shared_ptr<const DeviceListStore> DeviceListStore::empty(const DeviceContext& ctx, cudaStream_t stream,
                                                              int64_t dim, int64_t nlist) {
  auto storage = make_storage(ctx, stream, ListLayout::empty(nlist), dim);
  return std::shared_ptr<const DeviceListStore>(
      new DeviceListStore(ctx, stream, dim, std::move(storage), std::vector<int64_t>(static_cast<std::size_t>(nlist), 0)));
}

std::shared_ptr<const DeviceListStore> DeviceListStore::from_model(const DeviceContext& ctx, cudaStream_t stream,
                                                                   const HostModel& model) {
  std::vector<int64_t> sizes(static_cast<std::size_t>(model.nlist));
  for (int64_t l = 0; l < model.nlist; ++l) sizes[l] = model.list_size(l);
  auto storage = make_storage(ctx, stream, ListLayout::packed(sizes), model.dim);
  if (model.ntotal() > 0) {
    // The file's list order is the packed layout: one copy each, no sort.
    IVF_CUDA_CHECK(cudaMemcpyAsync(storage->vectors.data(), model.vectors.data(), storage->vectors.bytes(),
                                   cudaMemcpyHostToDevice, stream));
    IVF_CUDA_CHECK(cudaMemcpyAsync(storage->ids.data(), model.ids.data(), storage->ids.bytes(),
                                   cudaMemcpyHostToDevice, stream));
  }
  return std::shared_ptr<const DeviceListStore>(
      new DeviceListStore(ctx, stream, model.dim, std::move(storage), std::move(sizes)));
}

std::shared_ptr<const DeviceListStore> DeviceListStore::append(const DeviceContext& ctx, cudaStream_t stream,
                                                               const float* x, const int64_t* ids,
                                                               const int32_t* assign, int64_t n) const {
  if (n > limits::kMaxRowsPerDeviceAdd) fail(Errc::Unsupported, "add: more than 2^31 - 1 vectors in one call");
  const int64_t nlist = static_cast<int64_t>(sizes_.size()), dim = dim_;
  // 1. Rows per list.
  DeviceBuffer<int32_t> d_counts(ctx, nlist, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(d_counts.data(), 0, d_counts.bytes(), stream));
  count_lists_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(assign, n, d_counts.data());
  IVF_CUDA_CHECK_LAUNCH();
  std::vector<int32_t> counts(static_cast<std::size_t>(nlist));
  IVF_CUDA_CHECK(cudaMemcpyAsync(counts.data(), d_counts.data(), d_counts.bytes(), cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));

  // 2. The layout: this storage when every list has room, else a grown one.
  std::vector<int64_t> added(counts.begin(), counts.end()), first(static_cast<std::size_t>(nlist), 0);
  for (int64_t l = 1; l < nlist; ++l) first[l] = first[l - 1] + added[l - 1];
  const bool grow = !fits(storage_->layout, sizes_, added);

  // 3. Every allocation before any write: a failure here leaves everything untouched.
  std::shared_ptr<DeviceListStorage> target =
      grow ? make_storage(ctx, stream, grown(storage_->layout, sizes_, added), dim) : storage_;
  std::vector<int64_t> dst(static_cast<std::size_t>(nlist)), next_sizes(sizes_);
  for (int64_t l = 0; l < nlist; ++l) {
    dst[l] = target->layout.start[l] + sizes_[l];
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
  if (grow && ntotal_ > 0) {
    dim3 grid(static_cast<unsigned>(nlist), 16);
    copy_lists_kernel<<<grid, kDefaultThreads, 0, stream>>>(storage_->vectors.data(), storage_->ids.data(),
                                                            storage_->start.data(), d_sizes_.data(),
                                                            target->start.data(), dim, target->vectors.data(),
                                                            target->ids.data());
    IVF_CUDA_CHECK_LAUNCH();
  }
  iota_kernel<<<grid_for(n), kDefaultThreads, 0, stream>>>(rows_in.data(), n);
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data(), tmp_bytes, assign, lists_out.data(), rows_in.data(),
                                                 rows_out.data(), static_cast<int>(n), 0, end_bit, stream));
  scatter_rows_kernel<<<grid_for(n * 32), kDefaultThreads, 0, stream>>>(
      x, ids, ntotal_, lists_out.data(), rows_out.data(), n, dim, d_dst.data(), d_first.data(),
      target->vectors.data(), target->ids.data());
  IVF_CUDA_CHECK_LAUNCH();
  // The constructor synchronises the stream: the new store is complete when it returns.
  return std::shared_ptr<const DeviceListStore>(
      new DeviceListStore(ctx, stream, dim, std::move(target), std::move(next_sizes)));
}

ListView DeviceListStore::view() const {
  ListView v;
  v.nlist = static_cast<int64_t>(sizes_.size());
  v.dim = dim_;
  v.type = ElementType::F32;
  v.tier = MemoryTier::Device;
  v.ntotal = ntotal_;
  v.vectors = storage_->vectors.data();
  v.ids = storage_->ids.data();
  v.start = storage_->start.data();
  v.size = d_sizes_.data();
  v.host_start = storage_->layout.start.data();
  v.host_size = sizes_.data();
  v.largest_prefix = largest_prefix_.data();
  return v;
}

std::size_t DeviceListStore::bytes() const {
  return storage_->vectors.bytes() + storage_->ids.bytes() + storage_->start.bytes() + d_sizes_.bytes();
}

void DeviceListStore::export_lists(HostModel& model) const {
  const int64_t nlist = static_cast<int64_t>(sizes_.size()), dim = dim_;
  model.list_offsets.assign(static_cast<std::size_t>(nlist) + 1, 0);
  for (int64_t l = 0; l < nlist; ++l) model.list_offsets[l + 1] = model.list_offsets[l] + sizes_[l];
  model.vectors.resize(static_cast<std::size_t>(ntotal_ * dim));
  model.ids.resize(static_cast<std::size_t>(ntotal_));
  // A reader: it runs on a worker stream of its own, never behind a mutation's work.
  DeviceContext::Lease lease(*ctx_, nullptr);
  const cudaStream_t stream = lease.stream();
  for (int64_t l = 0; l < nlist; ++l) {
    const int64_t sz = sizes_[l];
    if (sz == 0) continue;
    const int64_t off = model.list_offsets[l], from = storage_->layout.start[l];
    IVF_CUDA_CHECK(cudaMemcpyAsync(model.vectors.data() + off * dim, storage_->vectors.data() + from * dim,
                                   sizeof(float) * sz * dim, cudaMemcpyDeviceToHost, stream));
    IVF_CUDA_CHECK(cudaMemcpyAsync(model.ids.data() + off, storage_->ids.data() + from, sizeof(int64_t) * sz,
                                   cudaMemcpyDeviceToHost, stream));
  }
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ivfgpu::cuda
