#include "scan.hpp"

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "../element_type.hpp"
#include "../errors.hpp"
#include "check.hpp"
#include "device_buffer.hpp"
#include "launch.cuh"
#include "scan_tensor.hpp"
#include "scan_tiles.hpp"

namespace ivfgpu::cuda {

namespace {

using scan_detail::kThreads;
using scan_detail::kTileV;
using scan_detail::kUnitTiles;

// Per query: exclusive prefix of its probed list sizes (its candidate row layout).
__global__ void candidate_offsets_kernel(const int32_t* probes, int64_t nq, int64_t nprobe, const int64_t* list_size,
                                         CandidateRows cand) {
  int64_t* cand_off = cand.offsets;
  int64_t* cand_len = cand.lengths;
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  for (int64_t q = blockIdx.x; q < nq; q += gridDim.x) {
    int64_t base = 0;
    for (int64_t p0 = 0; p0 < nprobe; p0 += kThreads) {
      const int64_t p = p0 + threadIdx.x;
      const int64_t v = p < nprobe ? list_size[probes[q * nprobe + p]] : 0;
      int64_t excl, total;
      Scan(tmp).ExclusiveSum(v, excl, total);
      if (p < nprobe) cand_off[q * (nprobe + 1) + p] = base + excl;
      base += total;
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      cand_off[q * (nprobe + 1) + nprobe] = base;
      cand_len[q] = base;
    }
  }
}

__global__ void count_pairs_kernel(const int32_t* probes, int64_t npairs, int32_t* count) {
  for (int64_t i = global_thread(); i < npairs; i += thread_stride()) atomicAdd(&count[probes[i]], 1);
}

// Pair i goes into its list's group. The order inside a group does not matter: every pair
// writes to its own place in the candidate rows.
__global__ void group_pairs_kernel(const int32_t* probes, int64_t npairs, int32_t* cursor, int32_t* grouped) {
  for (int64_t i = global_thread(); i < npairs; i += thread_stride())
    grouped[atomicAdd(&cursor[probes[i]], 1)] = static_cast<int32_t>(i);
}

// Work units per list: the SIMT scan's (tile_q queries x kUnitTiles vector tiles), or the
// tensor-core pass's (64 x 64 tiles).
__global__ void tiles_per_list_kernel(const int32_t* pair_count, const int64_t* list_size, int64_t nlist, int tile_q,
                                      bool tensor, int64_t* tiles) {
  for (int64_t l = global_thread(); l <= nlist; l += thread_stride()) {
    if (l == nlist) {
      tiles[l] = 0;
      continue;
    }
    if (tensor) {
      tiles[l] = scan_detail::tensor_tiles(pair_count[l], list_size[l]);
      continue;
    }
    const int64_t qt = (pair_count[l] + tile_q - 1) / tile_q;
    const int64_t vt = (list_size[l] + kTileV - 1) / kTileV;
    tiles[l] = qt * ((vt + kUnitTiles - 1) / kUnitTiles);
  }
}

// IVFGPU_SCAN=simt or =tensor pins the kernel of resident scans (A/B runs, and tests that compare
// the two in one process: read at every scan); unset, the dispatch below decides.
enum class ScanKernel { Auto, Simt, Tensor };
ScanKernel scan_kernel_override() {
  const char* e = std::getenv("IVFGPU_SCAN");
  if (e == nullptr) return ScanKernel::Auto;
  if (std::strcmp(e, "simt") == 0) return ScanKernel::Simt;
  if (std::strcmp(e, "tensor") == 0) return ScanKernel::Tensor;
  return ScanKernel::Auto;
}

}  // namespace

ScanGroups group_scan_pairs(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p) {
  const int64_t npairs = p.nq * p.nprobe;
  const int64_t nlist = p.lists.nlist;
  candidate_offsets_kernel<<<static_cast<unsigned>(std::min<int64_t>(p.nq, kMaxGridBlocks)), kThreads, 0, stream>>>(
      p.probes, p.nq, p.nprobe, p.lists.size, p.cand);
  IVF_CUDA_CHECK_LAUNCH();

  ScanGroups g;
  // Dispatch: the query tile follows the expected number of queries per probed list.
  const double per_list = static_cast<double>(npairs) / static_cast<double>(nlist);
  g.tile_q = per_list >= 24.0 ? 64 : 16;
  g.pair_count = DeviceBuffer<int32_t>(ctx, nlist, stream);
  g.pair_begin = DeviceBuffer<int32_t>(ctx, nlist, stream);
  g.grouped = DeviceBuffer<int32_t>(ctx, npairs, stream);
  DeviceBuffer<int32_t> cursor(ctx, nlist, stream);
  std::size_t bytes = 0;
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, g.pair_count.data(), g.pair_begin.data(),
                                               static_cast<int>(nlist), stream));
  DeviceBuffer<unsigned char> tmp(ctx, bytes, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(g.pair_count.data(), 0, g.pair_count.bytes(), stream));
  count_pairs_kernel<<<grid_for(npairs), kThreads, 0, stream>>>(p.probes, npairs, g.pair_count.data());
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp.data(), bytes, g.pair_count.data(), g.pair_begin.data(),
                                               static_cast<int>(nlist), stream));
  IVF_CUDA_CHECK(
      cudaMemcpyAsync(cursor.data(), g.pair_begin.data(), g.pair_begin.bytes(), cudaMemcpyDeviceToDevice, stream));
  group_pairs_kernel<<<grid_for(npairs), kThreads, 0, stream>>>(p.probes, npairs, cursor.data(), g.grouped.data());
  IVF_CUDA_CHECK_LAUNCH();
  return g;
}

int64_t scan_segment_tiles(int64_t pairs, int64_t rows, int tile_q) {
  const int64_t qt = (pairs + tile_q - 1) / tile_q;
  const int64_t vt = (rows + kTileV - 1) / kTileV;
  return qt * ((vt + kUnitTiles - 1) / kUnitTiles);
}

namespace {

template <class T>
scan_detail::TileArgs<T> tile_args(const ScanProblem& p, const ScanGroups& g, const ScanSegment* segments, int64_t nseg,
                                   const int64_t* tile_off) {
  // Four-element loads need whole loads per row and aligned bases (pool allocations are
  // 256-byte aligned; segments are placed on 256-byte boundaries).
  const bool vec4 = p.lists.dim % 4 == 0 && reinterpret_cast<uintptr_t>(p.queries) % 16 == 0 &&
                    (segments != nullptr || reinterpret_cast<uintptr_t>(p.lists.vectors) % 16 == 0);
  const int filter = p.filter == ScanProblem::Filter::None ? 0 : p.filter == ScanProblem::Filter::Allow ? 1 : 2;
  const uint64_t* removed = segments != nullptr ? nullptr : p.lists.removed;
  return scan_detail::TileArgs<T>{segments, nseg, p.queries, p.lists.dim, p.lists.nlist, p.nprobe, p.lists.rows<T>(),
                                  p.lists.start, p.lists.size, g.grouped.data(), g.pair_begin.data(),
                                  g.pair_count.data(), tile_off, p.cand, vec4, removed != nullptr || filter != 0,
                                  removed, p.lists.ids, filter, p.filter_set, p.excluded};
}

bool integer_arithmetic(const ScanProblem& p) { return p.integer_queries && is_integer(p.lists.type); }

// The SIMT scan over lists or segments: element type here; query tile, metric and integer
// arithmetic in launch_scan.
void scan_pass(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& g,
               const ScanSegment* segments, int64_t nseg, const int64_t* tile_off) {
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan_detail::launch_scan<T>(ctx, stream, g.tile_q, p.metric != Metric::L2, integer_arithmetic(p),
                                tile_args<T>(p, g, segments, nseg, tile_off));
  });
}

// The one place that picks the resident scan's kernel. Tensor cores need a full 64-query tile
// per list on average (fewer queries per list are the SIMT kernel's 16-query tiles), enough
// dimensions to outweigh the refinement, and a small k (every one of the k best is re-scored
// exactly). Measured on the H100, 1M rows, nlist 1024, 10,000 queries (bench/RESULTS.md):
// at d = 960 the tensor path is 1.5-1.7x faster for k 10 and 100 and 0.7x at k = 1000; at
// d = 128 the SIMT kernel is 1.1-1.2x faster. Crossover (linear in d between the two): ~160.
ScanKernel choose_scan_kernel(const ScanProblem& p, const ScanGroups& g) {
  const ScanKernel pinned = scan_kernel_override();
  if (pinned != ScanKernel::Auto) return pinned;
  return g.tile_q == 64 && p.lists.dim >= 192 && p.k <= 256 ? ScanKernel::Tensor : ScanKernel::Simt;
}

}  // namespace

void scan_segments(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanGroups& groups,
                   const ScanSegment* segments, const int64_t* tile_off, int64_t nseg) {
  if (nseg > 0) scan_pass(ctx, stream, p, groups, segments, nseg, tile_off);
}

ScanOutcome scan_lists(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p) {
  const int64_t nlist = p.lists.nlist;
  ScanGroups g = group_scan_pairs(ctx, stream, p);
  const ScanKernel kernel = choose_scan_kernel(p, g);
  const bool tensor = kernel != ScanKernel::Simt;
  DeviceBuffer<int64_t> tiles(ctx, nlist + 1, stream), tile_off(ctx, nlist + 1, stream);
  std::size_t bytes = 0;
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, tiles.data(), tile_off.data(),
                                               static_cast<int>(nlist + 1), stream));
  DeviceBuffer<unsigned char> tmp(ctx, bytes, stream);
  tiles_per_list_kernel<<<grid_for(nlist + 1), kThreads, 0, stream>>>(g.pair_count.data(), p.lists.size, nlist,
                                                                      g.tile_q, tensor, tiles.data());
  IVF_CUDA_CHECK_LAUNCH();
  IVF_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp.data(), bytes, tiles.data(), tile_off.data(),
                                               static_cast<int>(nlist + 1), stream));
  ScanOutcome out;
  if (!tensor) {
    scan_pass(ctx, stream, p, g, nullptr, 0, tile_off.data());
    return out;
  }
  out.needs_refine = true;
  out.list_norm = DeviceBuffer<float>(ctx, static_cast<std::size_t>(nlist), stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(out.list_norm.data(), 0, out.list_norm.bytes(), stream));
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scan_detail::launch_tensor_scan<T>(ctx, stream, p.metric != Metric::L2,
                                       tile_args<T>(p, g, nullptr, 0, tile_off.data()), out.list_norm.data());
  });
  return out;
}

void refine_candidates(const DeviceContext& ctx, cudaStream_t stream, const ScanProblem& p, const ScanOutcome& outcome,
                       const float* sel_key, const int32_t* sel_count, int64_t k) {
  dispatch_element_type(p.lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const scan_detail::RefineArgs<T> args{p.queries, p.nq, p.lists.dim, p.nprobe, k, p.probes, p.lists.rows<T>(),
                                          p.lists.start, p.lists.size, outcome.list_norm.data(), p.cand, sel_key,
                                          sel_count, p.excluded};
    scan_detail::launch_refine<T>(ctx, stream, p.metric != Metric::L2, integer_arithmetic(p), args);
  });
}

}  // namespace ivfgpu::cuda
