#include "list_store.hpp"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <functional>
#include <numeric>

#include "../errors.hpp"
#include "check.hpp"

namespace ivfgpu::cuda {

namespace {

constexpr int64_t kRowAlign = 32;

int64_t round_rows(int64_t n) { return (n + kRowAlign - 1) / kRowAlign * kRowAlign; }

__global__ void count_lists_kernel(const int32_t* assign, int64_t n, int32_t* counts) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    atomicAdd(&counts[assign[i]], 1);
}

__global__ void iota_kernel(int32_t* v, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    v[i] = static_cast<int32_t>(i);
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
__global__ void scatter_rows_kernel(const float* x, const int64_t* ids, const int32_t* sorted_list,
                                    const int32_t* sorted_row, int64_t n, int64_t dim, const int64_t* dst,
                                    const int64_t* first, float* out_v, int64_t* out_ids) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t s = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; s < n; s += warps) {
    const int32_t l = sorted_list[s];
    const int64_t row = sorted_row[s];
    const int64_t slot = dst[l] + (s - first[l]);
    for (int64_t j = lane; j < dim; j += 32) out_v[slot * dim + j] = x[row * dim + j];
    if (lane == 0) out_ids[slot] = ids[row];
  }
}

unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, 1 << 20)));
}

void upload(cudaStream_t stream, int64_t* dst, const std::vector<int64_t>& src) {
  IVF_CUDA_CHECK(cudaMemcpyAsync(dst, src.data(), src.size() * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
}

std::vector<int64_t> largest_prefix_of(const std::vector<int64_t>& size) {
  std::vector<int64_t> sorted(size);
  std::sort(sorted.begin(), sorted.end(), std::greater<int64_t>());
  std::vector<int64_t> prefix(sorted.size() + 1, 0);
  for (std::size_t i = 0; i < sorted.size(); ++i) prefix[i + 1] = prefix[i] + sorted[i];
  return prefix;
}

}  // namespace

ListStore make_empty_store(const DeviceContext& ctx, cudaStream_t stream, int64_t dim, int64_t nlist) {
  ListStore s;
  s.dim = dim;
  s.nlist = nlist;
  s.start.assign(nlist, 0);
  s.size.assign(nlist, 0);
  s.cap.assign(nlist, 0);
  s.largest_prefix.assign(nlist + 1, 0);
  s.d_start = DeviceBuffer<int64_t>(ctx, nlist, stream);
  s.d_size = DeviceBuffer<int64_t>(ctx, nlist, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(s.d_start.data(), 0, s.d_start.bytes(), stream));
  IVF_CUDA_CHECK(cudaMemsetAsync(s.d_size.data(), 0, s.d_size.bytes(), stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  return s;
}

void store_append(const DeviceContext& ctx, cudaStream_t stream, ListStore& store, const float* x,
                  const int64_t* ids, const int32_t* assign, int64_t n) {
  if (n == 0) return;
  if (n >= (int64_t{1} << 31)) fail(Errc::Unsupported, "add: more than 2^31 - 1 vectors in one call");
  const int64_t nlist = store.nlist, dim = store.dim;
  // 1. Rows per list.
  DeviceBuffer<int32_t> d_counts(ctx, nlist, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(d_counts.data(), 0, d_counts.bytes(), stream));
  count_lists_kernel<<<grid_for(n, 256), 256, 0, stream>>>(assign, n, d_counts.data());
  IVF_CUDA_CHECK_LAUNCH();
  std::vector<int32_t> counts(nlist);
  IVF_CUDA_CHECK(cudaMemcpyAsync(counts.data(), d_counts.data(), d_counts.bytes(), cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));

  // 2. The new host layout.
  std::vector<int64_t> need(nlist), first(nlist), new_size(nlist);
  bool rebuild = false;
  for (int64_t l = 0; l < nlist; ++l) {
    need[l] = new_size[l] = store.size[l] + counts[l];
    rebuild = rebuild || need[l] > store.cap[l];
    first[l] = l == 0 ? 0 : first[l - 1] + counts[l - 1];
  }
  std::vector<int64_t> new_cap = store.cap, new_start = store.start;
  int64_t new_capacity = store.capacity;
  if (rebuild) {
    new_capacity = 0;
    for (int64_t l = 0; l < nlist; ++l) {
      if (need[l] > new_cap[l]) new_cap[l] = round_rows(need[l] + need[l] / 8);
      new_start[l] = new_capacity;
      new_capacity += new_cap[l];
    }
  }
  std::vector<int64_t> dst(nlist);
  for (int64_t l = 0; l < nlist; ++l) dst[l] = new_start[l] + store.size[l];

  // 3. Every allocation before any write: a failure here leaves the store untouched.
  DeviceBuffer<float> new_v;
  DeviceBuffer<int64_t> new_ids;
  if (rebuild) {
    new_v = DeviceBuffer<float>(ctx, static_cast<std::size_t>(new_capacity * dim), stream);
    new_ids = DeviceBuffer<int64_t>(ctx, static_cast<std::size_t>(new_capacity), stream);
  }
  DeviceBuffer<int64_t> d_new_start(ctx, nlist, stream), d_new_size(ctx, nlist, stream);
  DeviceBuffer<int64_t> d_dst(ctx, nlist, stream), d_first(ctx, nlist, stream);
  DeviceBuffer<int32_t> rows_in(ctx, n, stream), rows_out(ctx, n, stream), lists_out(ctx, n, stream);
  int end_bit = 1;
  while ((int64_t{1} << end_bit) < nlist) ++end_bit;
  std::size_t tmp_bytes = 0;
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, tmp_bytes, assign, lists_out.data(), rows_in.data(),
                                                 rows_out.data(), static_cast<int>(n), 0, end_bit, stream));
  DeviceBuffer<unsigned char> tmp(ctx, tmp_bytes, stream);

  // 4. Device work.
  upload(stream, d_new_start.data(), new_start);
  upload(stream, d_new_size.data(), new_size);
  upload(stream, d_dst.data(), dst);
  upload(stream, d_first.data(), first);
  float* out_v = rebuild ? new_v.data() : store.vectors.data();
  int64_t* out_ids = rebuild ? new_ids.data() : store.ids.data();
  if (rebuild && store.ntotal > 0) {
    dim3 grid(static_cast<unsigned>(nlist), 16);
    copy_lists_kernel<<<grid, 256, 0, stream>>>(store.vectors.data(), store.ids.data(), store.d_start.data(),
                                                store.d_size.data(), d_new_start.data(), dim, out_v, out_ids);
    IVF_CUDA_CHECK_LAUNCH();
  }
  iota_kernel<<<grid_for(n, 256), 256, 0, stream>>>(rows_in.data(), n);
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data(), tmp_bytes, assign, lists_out.data(), rows_in.data(),
                                                 rows_out.data(), static_cast<int>(n), 0, end_bit, stream));
  scatter_rows_kernel<<<grid_for(n * 32, 256), 256, 0, stream>>>(x, ids, lists_out.data(), rows_out.data(), n,
                                                                 dim, d_dst.data(), d_first.data(), out_v,
                                                                 out_ids);
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));

  // 5. Commit: nothing below throws.
  if (rebuild) {
    store.vectors = std::move(new_v);
    store.ids = std::move(new_ids);
    store.cap.swap(new_cap);
    store.capacity = new_capacity;
  }
  store.d_start = std::move(d_new_start);
  store.d_size = std::move(d_new_size);
  store.start.swap(new_start);
  store.size.swap(new_size);
  store.ntotal += n;
  store.largest_prefix = largest_prefix_of(store.size);
}

ListStore store_from_model(const DeviceContext& ctx, cudaStream_t stream, const HostModel& model) {
  ListStore s = make_empty_store(ctx, stream, model.dim, model.nlist);
  const int64_t n = model.ntotal();
  if (n == 0) return s;
  std::vector<int32_t> lists(n);
  for (int64_t l = 0; l < model.nlist; ++l)
    for (int64_t i = model.list_offsets[l]; i < model.list_offsets[l + 1]; ++i) lists[i] = static_cast<int32_t>(l);
  DeviceBuffer<float> x(ctx, static_cast<std::size_t>(n * model.dim), stream);
  DeviceBuffer<int64_t> ids(ctx, n, stream);
  DeviceBuffer<int32_t> assign(ctx, n, stream);
  IVF_CUDA_CHECK(cudaMemcpyAsync(x.data(), model.vectors.data(), x.bytes(), cudaMemcpyHostToDevice, stream));
  IVF_CUDA_CHECK(cudaMemcpyAsync(ids.data(), model.ids.data(), ids.bytes(), cudaMemcpyHostToDevice, stream));
  IVF_CUDA_CHECK(cudaMemcpyAsync(assign.data(), lists.data(), assign.bytes(), cudaMemcpyHostToDevice, stream));
  store_append(ctx, stream, s, x.data(), ids.data(), assign.data(), n);
  return s;
}

void store_to_model(cudaStream_t stream, const ListStore& store, HostModel& model) {
  const int64_t dim = store.dim;
  model.list_offsets.assign(store.nlist + 1, 0);
  for (int64_t l = 0; l < store.nlist; ++l) model.list_offsets[l + 1] = model.list_offsets[l] + store.size[l];
  model.vectors.resize(static_cast<std::size_t>(store.ntotal * dim));
  model.ids.resize(static_cast<std::size_t>(store.ntotal));
  for (int64_t l = 0; l < store.nlist; ++l) {
    const int64_t sz = store.size[l];
    if (sz == 0) continue;
    const int64_t off = model.list_offsets[l];
    IVF_CUDA_CHECK(cudaMemcpyAsync(model.vectors.data() + off * dim, store.vectors.data() + store.start[l] * dim,
                                   sizeof(float) * sz * dim, cudaMemcpyDeviceToHost, stream));
    IVF_CUDA_CHECK(cudaMemcpyAsync(model.ids.data() + off, store.ids.data() + store.start[l],
                                   sizeof(int64_t) * sz, cudaMemcpyDeviceToHost, stream));
  }
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ivfgpu::cuda
