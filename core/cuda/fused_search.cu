#include "fused_search.hpp"

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cstring>
#include <utility>

#include "../element_convert.hpp"
#include "../element_type.hpp"
#include "../vector_ops.hpp"
#include "check.hpp"
#include "element_traits.cuh"
#include "ordered_key.cuh"
#include "search_stages.hpp"
#include "small_batch.hpp"
#include "warp_sort.cuh"

namespace ivfgpu::cuda {

namespace {

constexpr int kCoarseThreads = 256;
constexpr int kMinSlice = 64;      // centroids per coarse block: at least this many ...
constexpr int kMaxSlices = 64;     // ... and at most this many blocks per query
constexpr int kGroup = 8;          // centroids a warp scores at once: independent loads in flight
constexpr std::size_t kCoarseNearBytes = 32 << 10;  // a slice's centroids up to this size are fetched into L1
constexpr int kTileRows = 128;     // list rows per scan block, a thread each
constexpr int kScanThreads = kTileRows;
constexpr int kMergeThreads = 1024;   // the merge for k > 32: a block per query
constexpr int kMergeLoads = 4;        // candidates a lane loads at once in the merge
constexpr int kMergeCap = 4096;       // candidates the merge for k > 32 holds on chip
constexpr int kSliceMergeThreads = 256;  // the merge for k <= 32: blocks per query ...
constexpr int kSliceMergeEntries = kSliceMergeThreads * kMergeLoads;  // ... each over this many candidates
constexpr int kMaxMergeSlices = 32;      // ... and at most this many blocks per query
constexpr uint32_t kNoKey = 0xffffffffu;
constexpr unsigned long long kNoEntry = ~0ull;

enum : int { kL2 = 0, kIP = 1, kCosine = 2 };

// The 32 smallest of keys[0, n) (shared memory, padded with kNoEntry to a whole number of
// warps' batches: the callers' arrays are), sorted across warp 0's lanes. Warps take 32 keys at
// a time; then their lists merge (block_merge_sorted32), reusing keys as its scratch once every
// warp has read its batches. The caller has synchronised after writing keys.
__device__ unsigned long long block_smallest32(unsigned long long* keys, int n) {
  const int lane = threadIdx.x % 32;
  unsigned long long mine = kNoEntry;
  for (int b = static_cast<int>(threadIdx.x / 32) * 32; b < n; b += blockDim.x)
    mine = warp_merge32(mine, keys[b + lane]);
  __syncthreads();
  return block_merge_sorted32(mine, keys);
}

// The same for the 64 smallest (keys padded to whole batches of 64; 2 * blockDim.x of them).
__device__ WarpList64 block_smallest64(unsigned long long* keys, int n) {
  const int lane = threadIdx.x % 32;
  WarpList64 mine{kNoEntry, kNoEntry};
  for (int b = static_cast<int>(threadIdx.x / 32) * 64; b < n; b += 2 * blockDim.x)
    mine = warp_merge_sorted64(mine, warp_sort64(WarpList64{keys[b + lane], keys[b + 32 + lane]}));
  __syncthreads();
  return block_merge_sorted64(mine, keys);
}

// The m smallest of keys[0, n), sorted, into keys[0, m): warp lists for m <= 64 (keys padded
// with kNoEntry to whole batches, as above), else a bitonic sort of keys[0, p2) (p2: a power of
// two, padded). The one place the coarse kernel chooses how it selects, for its slices and for
// their merge. Every thread of the block calls it; the block is synchronised on return.
__device__ void block_smallest_sorted(unsigned long long* keys, int n, int m, int p2) {
  const int tid = threadIdx.x;
  if (m <= 32) {
    const unsigned long long mine = block_smallest32(keys, n);
    if (tid < 32) keys[tid] = mine;
  } else if (m <= 64) {
    const WarpList64 mine = block_smallest64(keys, n);
    if (tid < 32) {
      keys[tid] = mine.lo;
      keys[32 + tid] = mine.hi;
    }
  } else {
    block_bitonic_sort(keys, p2);
    return;
  }
  __syncthreads();
}

// Whether this block is the last of `blocks` to arrive at counter *done (every thread gets the
// answer; `flag`: a shared bool). What the blocks wrote before is visible to the last one. The
// last block resets the counter when it is done with it. Every thread of the block calls it.
__device__ __forceinline__ bool last_to_arrive(int32_t* done, int blocks, bool& flag) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) flag = atomicAdd(done, 1) == blocks - 1;
  __syncthreads();
  if (!flag) return false;
  __threadfence();
  return true;
}

// Programmatic dependent launch (Hopper): a kernel lets the next one launch as it starts, and
// the next waits here, before its first read of what this one wrote, for it to finish and
// flush. The launch latency of kernels 2 and 3 then overlaps the work of 1 and 2.
__device__ __forceinline__ void let_next_kernel_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

struct CoarseArgs {
  const void* queries;   // n x dim of the query type (device-readable: device or mapped host)
  int64_t dim, nlist, nprobe;
  int slice_len, slices, per_slice;  // slice_len: a power of two
  int metric;
  const float* centroids;
  bool vec4;  // centroid rows 16-byte aligned (dim a multiple of 4)
  const float* centroid_norms;
  const int64_t* list_size;
  float* q_out;                    // n x dim: decoded, normalised queries for the scan
  unsigned long long* slice_best;  // n x slices x per_slice
  int32_t* done;                   // n, zero between calls
  int32_t* probes;                 // n x nprobe
  int32_t* tile_off;               // n x (nprobe + 1)
  // Device-memory queries: each query's verdict (query_verdict) into status (device, for the
  // merge) and status_host (mapped, for the caller after its synchronisation); null: no check.
  int32_t* status;
  int32_t* status_host;
  bool bounded;  // the norm bound applies (not under cosine)
};

enum : int32_t { kUsable = 0, kNonFinite = 1, kOverBound = 2 };

// The check Index::search gives host queries (vector_ops.cpp first_unusable_row), on query q's
// decoded values in shared memory: every thread of the block calls it, thread 0 gets the
// verdict. The block sums in any order first; only a sum near the bound (the orders differ by
// under dim * 2^-23 relative, all terms being non-negative) is summed again in the host's order
// (rounded multiplies and adds, dimension by dimension), so both refuse exactly the same rows
// while a usual query costs one reduction.
__device__ int32_t query_verdict(const float* qs, int64_t dim, bool bounded) {
  __shared__ float partial[kCoarseThreads / 32];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  float s = 0.0f;
  bool finite = true;
  for (int64_t j = tid; j < dim; j += blockDim.x) {
    const float v = qs[j];
    finite = finite && isfinite(v);
    s = fmaf(v, v, s);
  }
  s = warp_sum(s);
  finite = __all_sync(0xffffffffu, finite);
  if (lane == 0) partial[warp] = finite ? s : -1.0f;
  __syncthreads();
  if (tid != 0) return kUsable;
  float approx = 0.0f;
  for (int w = 0; w < kCoarseThreads / 32; ++w) {
    if (partial[w] < 0.0f) return kNonFinite;
    approx += partial[w];
  }
  if (!bounded || approx <= kMaxSquaredNorm * 0.99f) return kUsable;
  float exact = 0.0f;
  for (int64_t j = 0; j < dim; ++j) exact = __fadd_rn(exact, __fmul_rn(qs[j], qs[j]));
  return exact <= kMaxSquaredNorm ? kUsable : kOverBound;
}

// Whether any of the call's n queries was refused (a warp's answer; every lane calls it).
__device__ __forceinline__ bool call_refused(const int32_t* status, int64_t n) {
  bool bad = false;
  for (int64_t i = threadIdx.x % 32; i < n; i += 32) bad = bad || __ldcg(status + i) != kUsable;
  return __any_sync(0xffffffffu, bad);
}

// Asks for [p, p + bytes) to be brought into L1 (`near`) or L2 by the block's threads, a line
// each, without waiting for it: the coarse kernel's centroids travel while its query does.
__device__ __forceinline__ void prefetch_bytes(const void* p, std::size_t bytes, bool near) {
  const char* base = static_cast<const char*>(p);
  for (std::size_t at = static_cast<std::size_t>(threadIdx.x) * 128; at < bytes; at += std::size_t{blockDim.x} * 128) {
    const std::size_t g = __cvta_generic_to_global(base + at);
    if (near) asm volatile("prefetch.global.L1 [%0];" ::"l"(g));
    else asm volatile("prefetch.global.L2 [%0];" ::"l"(g));
  }
}

// Block (s, q): centroids [s * slice_len, ...) for query q, whose best per_slice keys it writes
// out (sorted, or every key unsorted when per_slice is the whole slice: the merge sorts them
// anyway); then, in the last block of q to finish, the merge of every slice's keys into q's
// probes and tile offsets.
template <class Q>
__global__ void __launch_bounds__(kCoarseThreads) coarse_probe_kernel(CoarseArgs a) {
  __shared__ __align__(16) float qs[kFusedMaxDim];
  __shared__ unsigned long long keys[kFusedMaxMerge];
  __shared__ double partial[kCoarseThreads / 32];
  __shared__ bool last;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t q = blockIdx.y, dim = a.dim;
  let_next_kernel_launch();
  const int slice = a.slice_len;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * slice;
  const int count = static_cast<int>(a.nlist - c0 < slice ? a.nlist - c0 : slice);
  const std::size_t slice_bytes = sizeof(float) * static_cast<std::size_t>(count * dim);
  prefetch_bytes(a.centroids + c0 * dim, slice_bytes, slice_bytes <= kCoarseNearBytes);
  const Q* raw = static_cast<const Q*>(a.queries) + q * dim;
  for (int64_t j = tid; j < dim; j += blockDim.x) qs[j] = DeviceElement<Q>::load1(raw + j);
  __syncthreads();
  if (a.status != nullptr && blockIdx.x == 0) {
    const int32_t verdict = query_verdict(qs, dim, a.bounded);
    if (tid == 0) {
      a.status[q] = verdict;
      a.status_host[q] = verdict;
    }
  }
  if (a.metric == kCosine) {
    // As normalize_rows: the squared norm in double, one reciprocal, rounded multiplies.
    double s = 0.0;
    for (int64_t j = tid; j < dim; j += blockDim.x) s = __dadd_rn(s, __dmul_rn(qs[j], qs[j]));
    s = warp_sum(s);
    if (lane == 0) partial[warp] = s;
    __syncthreads();
    double total = 0.0;
    for (int w = 0; w < kCoarseThreads / 32; ++w) total = __dadd_rn(total, partial[w]);
    if (total > 0.0) {
      const float inv = __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(total)));
      for (int64_t j = tid; j < dim; j += blockDim.x) qs[j] = __fmul_rn(qs[j], inv);
    }
    __syncthreads();
  }
  if (blockIdx.x == 0)
    for (int64_t j = tid; j < dim; j += blockDim.x) a.q_out[q * dim + j] = qs[j];

  // This block's slice: a warp scores kGroup centroids at once, lanes across the dimensions
  // (four at a time where rows are 16-byte aligned); lane r ends with centroid g + r's key.
  const bool every_key = a.per_slice == slice;
  unsigned long long* slice_out = a.slice_best + (q * a.slices + blockIdx.x) * a.per_slice;
  for (int g = warp * kGroup; g < slice; g += kCoarseThreads / 32 * kGroup) {
    float dot[kGroup];
#pragma unroll
    for (int r = 0; r < kGroup; ++r) dot[r] = 0.0f;
    const float norm = a.metric == kL2 && lane < kGroup && g + lane < count ? a.centroid_norms[c0 + g + lane] : 0.0f;
    const float* c = a.centroids + (c0 + g) * dim;
    if (a.vec4) {
      for (int64_t j = 4 * lane; j < dim; j += 128) {
        const float4 qv = *reinterpret_cast<const float4*>(qs + j);
#pragma unroll
        for (int r = 0; r < kGroup; ++r)
          if (g + r < count) {
            const float4 cv = __ldg(reinterpret_cast<const float4*>(c + r * dim + j));
            dot[r] = fmaf(qv.x, cv.x, dot[r]);
            dot[r] = fmaf(qv.y, cv.y, dot[r]);
            dot[r] = fmaf(qv.z, cv.z, dot[r]);
            dot[r] = fmaf(qv.w, cv.w, dot[r]);
          }
      }
    } else {
      for (int64_t j = lane; j < dim; j += 32) {
        const float qj = qs[j];
#pragma unroll
        for (int r = 0; r < kGroup; ++r)
          if (g + r < count) dot[r] = fmaf(qj, c[r * dim + j], dot[r]);
      }
    }
    unsigned long long mine = kNoEntry;
#pragma unroll
    for (int r = 0; r < kGroup; ++r) {
      const float d = warp_sum(dot[r]);
      const float nr = __shfl_sync(0xffffffffu, norm, r);
      if (lane == r && g + r < count) {
        const float key = a.metric == kL2 ? -2.0f * d + nr : -d;
        mine = (static_cast<unsigned long long>(to_ordered(key)) << 32) | static_cast<uint32_t>(c0 + g + r);
      }
    }
    if (lane < kGroup) {
      if (every_key) slice_out[g + lane] = mine;
      else keys[g + lane] = mine;
    }
  }
  if (!every_key) {
    __syncthreads();
    block_smallest_sorted(keys, slice, a.per_slice, slice);
    for (int i = tid; i < a.per_slice; i += blockDim.x) slice_out[i] = keys[i];
  }

  // The last block of this query merges the slices' keys into its probes, best first.
  if (!last_to_arrive(&a.done[q], a.slices, last)) return;
  const int total = a.slices * a.per_slice, m = pow2_at_least(total);
  const unsigned long long* all = a.slice_best + q * a.slices * a.per_slice;
  // Padded to a power of two for the sort, and to whole batches for block_smallest32/64.
  for (int i = tid; i < (m > 64 ? m : 64); i += blockDim.x) keys[i] = i < total ? __ldcg(all + i) : kNoEntry;
  __syncthreads();
  block_smallest_sorted(keys, total, static_cast<int>(a.nprobe), m);
  // Probes (best first) and the exclusive prefix of their tile counts.
  using Scan = cub::BlockScan<int32_t, kCoarseThreads>;
  __shared__ typename Scan::TempStorage scan_tmp;
  const int64_t np = a.nprobe;
  int32_t* probes = a.probes + q * np;
  int32_t* off = a.tile_off + q * (np + 1);
  int32_t tiles = 0;
  if (tid < np) {
    const int32_t list = static_cast<int32_t>(keys[tid] & 0xffffffffu);
    probes[tid] = list;
    tiles = static_cast<int32_t>((a.list_size[list] + kTileRows - 1) / kTileRows);
  }
  int32_t excl = 0, sum = 0;
  Scan(scan_tmp).ExclusiveSum(tiles, excl, sum);
  if (tid < np) off[tid] = excl;
  if (tid == 0) {
    off[np] = sum;
    a.done[q] = 0;  // ready for the next call
  }
}

template <class T>
struct TileScanArgs {
  const float* queries;  // n x dim (q_out)
  int64_t dim, nprobe;
  const int32_t* probes;
  const int32_t* tile_off;
  const T* vectors;
  const int64_t* list_start;
  const int64_t* list_size;
  const uint64_t* removed;  // null: none
  int kk, max_tiles;
  bool vec4;
  uint32_t* cand_key;   // n x max_tiles x kk
  int64_t* cand_pos;    // storage slot of each candidate
};

// Dimensions staged per step of the tile scan, as the list-major scan stages them
// (scan_tiles.hpp kTileD), zero-padded past dim the same way: the sums are then the same
// chain of fmas, so the same bits.
constexpr int kChunk = 32;
static_assert(kFusedMaxDim % kChunk == 0, "queries are zero-padded to whole chunks");

template <bool INT>
__device__ __forceinline__ float staged_value(float v) {
  if constexpr (INT) return __int_as_float(__float2int_rn(v));
  else return v;
}

// The query's probes as a block sees them in shared memory: tile offsets (np + 1) and each
// probed list's first storage slot and size.
struct ProbeExtents {
  const int32_t* off;
  const int64_t* start;
  const int64_t* size;
};

// Tile t of query q: the rows it covers (first storage slot, count; count 0 past the last tile).
template <class T>
struct TileRows {
  const T* rows;
  int64_t first;
  int count;
};

template <class T>
__device__ TileRows<T> locate_tile(const TileScanArgs<T>& a, const ProbeExtents& pe, int64_t t, int64_t tiles) {
  if (t >= tiles) return TileRows<T>{a.vectors, 0, 0};
  int64_t lo = 0, hi = a.nprobe;  // off[lo] <= t < off[hi]
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (pe.off[mid] <= t) lo = mid; else hi = mid;
  }
  const int64_t r0 = (t - pe.off[lo]) * kTileRows;
  const int64_t first = pe.start[lo] + r0;
  const int64_t left = pe.size[lo] - r0;
  return TileRows<T>{a.vectors + first * a.dim, first, static_cast<int>(left < kTileRows ? left : kTileRows)};
}

// Aligned rows: a thread's share of one chunk of a tile, loaded into registers while the chunk
// before is staged and summed (zeros past the tile's rows and past dim).
constexpr int kChunkLoads = kTileRows * (kChunk / 4) / kScanThreads;

template <class T>
__device__ __forceinline__ void load_chunk(float4 (&pending)[kChunkLoads], const TileRows<T>& tile, int64_t j0,
                                           int64_t dim) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int u = 0; u < kChunkLoads; ++u) {
    const int e = tid + u * kScanThreads, rr = e / (kChunk / 4), jj = (e % (kChunk / 4)) * 4;
    pending[u] = (rr < tile.count && j0 + jj < dim) ? DeviceElement<T>::load4(tile.rows + rr * dim + j0 + jj)
                                                    : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// Tile t of query q (rows `tile`): its rows' distances, sorted on chip, the best min(k, 128)
// written out. The rows are staged through shared memory a chunk of dimensions at a time
// (coalesced reads, transposed so each thread reads its own row without bank conflicts); then a
// thread per row sums in dimension order exactly as the list-major scan does (one fma per
// dimension into one fp32 total), so a query's distances are the same bits whichever path
// answers it. Integer rows with integer queries: the exact integer, rounded once.
// Aligned rows (a.vec4): `pending` holds the tile's first chunk on entry, and the last chunk's
// turn loads the first chunk of `next` (the block's next tile) into it, so a block keeps rows
// in flight across its tiles' sorts and writes.
template <class T, bool IP, bool INT>
__device__ void scan_tile(const TileScanArgs<T>& a, const float* qs, const TileRows<T>& tile, const TileRows<T>& next,
                          float4 (&pending)[kChunkLoads], unsigned long long* keys, float (*xs)[kTileRows + 1],
                          int64_t q, int64_t t) {
  using E = DeviceElement<T>;
  const int tid = threadIdx.x;
  const int64_t dim = a.dim;
  const int count = tile.count;
  const int64_t first = tile.first;
  const int r = tid;
  bool ok = r < count;
  if (ok) ok = !slot_removed(a.removed, first + r);
  const T* rows = tile.rows;
  float acc = 0.0f;
  long long iacc = 0;
  for (int64_t j0 = 0; j0 < dim; j0 += kChunk) {
    __syncthreads();  // the previous chunk is consumed
    if (a.vec4) {
#pragma unroll
      for (int u = 0; u < kChunkLoads; ++u) {
        const int e = tid + u * kScanThreads, rr = e / (kChunk / 4), jj = (e % (kChunk / 4)) * 4;
        xs[jj][rr] = staged_value<INT>(pending[u].x);
        xs[jj + 1][rr] = staged_value<INT>(pending[u].y);
        xs[jj + 2][rr] = staged_value<INT>(pending[u].z);
        xs[jj + 3][rr] = staged_value<INT>(pending[u].w);
      }
      if (j0 + kChunk < dim) load_chunk(pending, tile, j0 + kChunk, dim);
      else if (next.count > 0) load_chunk(pending, next, 0, dim);
    } else {
#pragma unroll 4
      for (int e = tid; e < kTileRows * kChunk; e += kScanThreads) {
        const int rr = e / kChunk, jj = e % kChunk;
        xs[jj][rr] = staged_value<INT>((rr < count && j0 + jj < dim) ? E::load1(rows + rr * dim + j0 + jj) : 0.0f);
      }
    }
    __syncthreads();
    if (ok) {
#pragma unroll 8
      for (int jj = 0; jj < kChunk; ++jj) {
        const float qv = qs[j0 + jj];  // zero past dim, as the staged rows
        const float xv = xs[jj][r];
        if constexpr (INT) {
          const int qi = __float2int_rn(qv), xi = __float_as_int(xv);
          iacc += IP ? qi * xi : (qi - xi) * (qi - xi);
        } else if constexpr (IP) {
          acc = fmaf(qv, xv, acc);
        } else {
          const float e = qv - xv;
          acc = fmaf(e, e, acc);
        }
      }
    }
  }
  unsigned long long entry = kNoEntry;
  if (ok) {
    const float d = INT ? __ll2float_rn(iacc) : acc;
    entry = (static_cast<unsigned long long>(cost_key(d, IP)) << 32) | static_cast<uint32_t>(r);
  }
  const int64_t slot = (q * a.max_tiles + t) * a.kk;
  if (a.kk <= 32) {
    // Each warp sorts its rows' entries in registers; the four lists merge in two rounds.
    const unsigned long long best = block_merge_sorted32<unsigned long long>(warp_sort32(entry), keys);
    if (tid < a.kk) {
      a.cand_key[slot + tid] = best == kNoEntry ? kNoKey : static_cast<uint32_t>(best >> 32);
      a.cand_pos[slot + tid] = first + static_cast<int64_t>(best & 0xffffffffu);
    }
    return;
  }
  keys[r] = entry;
  __syncthreads();
  block_bitonic_sort(keys, kTileRows);
  for (int i = tid; i < a.kk; i += blockDim.x) {
    const unsigned long long e = keys[i];
    a.cand_key[slot + i] = e == kNoEntry ? kNoKey : static_cast<uint32_t>(e >> 32);
    a.cand_pos[slot + i] = first + static_cast<int64_t>(e & 0xffffffffu);
  }
}

// Blocks (b, q) take tiles b, b + gridDim.x, ... of query q's probed rows (tiles numbered
// probe after probe). The grid is sized from a bound on the tiles (the nprobe largest lists)
// and capped, so a skewed index does not launch thousands of blocks with nothing to do.
template <class T, bool IP, bool INT>
__global__ void __launch_bounds__(kScanThreads) tile_scan_kernel(TileScanArgs<T> a) {
  __shared__ float qs[kFusedMaxDim];
  __shared__ unsigned long long keys[kTileRows];
  __shared__ float xs[kChunk][kTileRows + 1];
  __shared__ int32_t off_s[kFusedMaxNprobe + 1];
  __shared__ int64_t start_s[kFusedMaxNprobe], size_s[kFusedMaxNprobe];
  const int64_t q = blockIdx.y, np = a.nprobe, dim = a.dim;
  let_next_kernel_launch();
  wait_for_previous_kernel();
  // The query's tile offsets and probed lists, read once per block in one round of loads: a
  // tile's search over them in global memory was a chain of dependent loads.
  for (int64_t i = threadIdx.x; i <= np; i += blockDim.x) {
    off_s[i] = a.tile_off[q * (np + 1) + i];
    if (i < np) {
      const int32_t list = a.probes[q * np + i];
      start_s[i] = a.list_start[list];
      size_s[i] = a.list_size[list];
    }
  }
  const int64_t padded = (dim + kChunk - 1) / kChunk * kChunk;
  for (int64_t j = threadIdx.x; j < padded; j += blockDim.x) qs[j] = j < dim ? a.queries[q * dim + j] : 0.0f;
  __syncthreads();
  const int64_t tiles = off_s[np];
  const ProbeExtents pe{off_s, start_s, size_s};
  float4 pending[kChunkLoads];
  TileRows<T> tile = locate_tile(a, pe, blockIdx.x, tiles);
  if (a.vec4 && tile.count > 0) load_chunk(pending, tile, 0, dim);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TileRows<T> next = locate_tile(a, pe, t + gridDim.x, tiles);
    __syncthreads();  // the previous tile's keys are written out
    scan_tile<T, IP, INT>(a, qs, tile, next, pending, keys, xs, q, t);
    tile = next;
  }
}

struct MergeArgs {
  const int32_t* tile_off;
  int64_t nprobe, k;
  int kk, max_tiles;
  const uint32_t* cand_key;
  const int64_t* cand_pos;
  const int64_t* ids;
  bool larger;
  float pad;
  int64_t* out_ids;   // n x k (device-writable: device or mapped host)
  float* out_dists;
  unsigned long long* slice_best;  // k <= 32: n x slices x 32, each slice's k best
  int32_t* done;                   // k <= 32: n completion counters, zero between calls
  const int32_t* status;           // the coarse kernel's verdicts (null: not checked) ...
  int64_t n;                       // ... on this many queries: any refusal, and nothing is written
};

// Sorts buf[0, count) and keeps the first min(count, k); returns the new count and sets thr
// to the k-th key once k are held (later candidates must be below it to matter).
__device__ int keep_best(unsigned long long* buf, int count, int64_t k, uint32_t& thr) {
  const int m = pow2_at_least(max(count, 1));
  for (int i = count + threadIdx.x; i < m; i += blockDim.x) buf[i] = kNoEntry;
  __syncthreads();
  block_bitonic_sort(buf, m);
  if (count >= k) {
    thr = static_cast<uint32_t>(buf[k - 1] >> 32);
    return static_cast<int>(k);
  }
  return count;
}

// Candidate i of a query's row (which starts at base) as an entry: key << 32 | i, or kNoEntry
// past end or where the tile scan left no candidate.
__device__ __forceinline__ unsigned long long candidate_entry(const MergeArgs& a, int64_t base, int64_t i,
                                                              int64_t end) {
  const uint32_t kv = i < end ? __ldcg(a.cand_key + base + i) : kNoKey;
  return kv == kNoKey ? kNoEntry : (static_cast<unsigned long long>(kv) << 32) | static_cast<uint32_t>(i);
}

__device__ void write_result(const MergeArgs& a, int64_t q, int64_t j, unsigned long long e, int64_t base) {
  int64_t id = -1;
  float dist = a.pad;
  if (e != kNoEntry) {
    id = a.ids[a.cand_pos[base + static_cast<int64_t>(e & 0xffffffffu)]];
    const float v = from_ordered(static_cast<uint32_t>(e >> 32));
    dist = a.larger ? -v : v;
  }
  a.out_ids[q * a.k + j] = id;
  a.out_dists[q * a.k + j] = dist;
}

// k <= 32: block (s, q) keeps the k best of slice s of query q's candidates, each warp in its
// registers (WarpBest) and then the block's warps merged; the last block of q to finish merges
// the slices' lists and writes q's results. A single block per query (the form before) ran
// instruction-bound on one SM: 19 us at nprobe 64 for 10.5K candidates (ncu, H200), a quarter
// of a batch-1 search.
__global__ void __launch_bounds__(kSliceMergeThreads) merge_small_k_kernel(MergeArgs a) {
  __shared__ unsigned long long buf[kMaxMergeSlices * 32];
  __shared__ bool last;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t q = blockIdx.y, k = a.k, slices = gridDim.x;
  wait_for_previous_kernel();
  // The blocks share the most candidates a query can have (the host's bound), not the count
  // the coarse kernel wrote: a block's first loads then go out with that count's and the
  // verdicts', not after them; candidates past the count are dropped once it arrives.
  const int64_t cap = static_cast<int64_t>(a.max_tiles) * a.kk, base = q * cap;
  const int64_t per = (cap + slices - 1) / slices;
  const int64_t lo = blockIdx.x * per, hi = lo + per < cap ? lo + per : cap;
  const int64_t first = lo + static_cast<int64_t>(warp) * 32 * kMergeLoads;
  constexpr int64_t kStride = static_cast<int64_t>(kSliceMergeThreads) * kMergeLoads;
  unsigned long long e[kMergeLoads];
  const auto load = [&](int64_t i0) {
#pragma unroll
    for (int u = 0; u < kMergeLoads; ++u) e[u] = candidate_entry(a, base, i0 + u * 32 + lane, hi);
  };
  load(first);
  const int64_t total = static_cast<int64_t>(a.tile_off[q * (a.nprobe + 1) + a.nprobe]) * a.kk;
  if (a.status != nullptr && call_refused(a.status, a.n)) return;  // every block alike: counters stay zero
  WarpBest best;
  for (int64_t i0 = first; i0 < hi && i0 < total; i0 += kStride) {
    if (i0 != first) load(i0);
#pragma unroll
    for (int u = 0; u < kMergeLoads; ++u) best.offer(i0 + u * 32 + lane < total ? e[u] : kNoEntry, static_cast<int>(k));
  }
  // A warp list's entries past k are dropped first: they are not among its k best.
  const unsigned long long mine = block_merge_sorted32(lane < k ? best.mine : kNoEntry, buf);
  if (slices == 1) {
    if (warp == 0 && lane < k) write_result(a, q, lane, mine, base);
    return;
  }
  unsigned long long* lists = a.slice_best + q * slices * 32;
  if (warp == 0) lists[blockIdx.x * 32 + lane] = mine;
  // The last block of this query merges.
  if (!last_to_arrive(&a.done[q], static_cast<int>(slices), last)) return;
  for (int64_t i = tid; i < slices * 32; i += blockDim.x) buf[i] = __ldcg(lists + i);
  __syncthreads();
  const unsigned long long all = block_smallest32(buf, static_cast<int>(slices * 32));
  if (warp == 0 && lane < k) write_result(a, q, lane, all, base);
  if (tid == 0) a.done[q] = 0;  // ready for the next call
}

// k > 32: a block per query. Candidates below the k-th kept so far gather in shared memory; a
// sort keeps the k best whenever the buffer could overflow, and as soon as k are held (to set
// the bar).
__global__ void __launch_bounds__(kMergeThreads) merge_topk_kernel(MergeArgs a) {
  __shared__ unsigned long long buf[kMergeCap];
  __shared__ int count;
  const int tid = threadIdx.x, lane = tid % 32;
  const int64_t q = blockIdx.x, k = a.k;
  wait_for_previous_kernel();
  if (a.status != nullptr && call_refused(a.status, a.n)) return;
  const int64_t total = static_cast<int64_t>(a.tile_off[q * (a.nprobe + 1) + a.nprobe]) * a.kk;
  const int64_t base = q * a.max_tiles * a.kk;

  uint32_t thr = kNoKey;  // a candidate enters when its key is below thr (ties with the k-th may be left out)
  if (tid == 0) count = 0;
  __syncthreads();
  for (int64_t i0 = 0; i0 < total; i0 += blockDim.x) {
    const int held = count;
    __syncthreads();  // every thread has read count before any warp adds to it
    if (held + static_cast<int>(blockDim.x) > kMergeCap || (thr == kNoKey && held >= k)) {
      const int kept = keep_best(buf, held, k, thr);
      if (tid == 0) count = kept;
      __syncthreads();
    }
    const unsigned long long e = candidate_entry(a, base, i0 + tid, total);
    const bool want = static_cast<uint32_t>(e >> 32) < thr && e != kNoEntry;
    const unsigned mask = __ballot_sync(0xffffffffu, want);
    int at = 0;
    if (lane == 0 && mask != 0) at = atomicAdd(&count, __popc(mask));
    at = __shfl_sync(0xffffffffu, at, 0);
    if (want) buf[at + __popc(mask & ((1u << lane) - 1u))] = e;
    __syncthreads();
  }
  const int kept = keep_best(buf, count, k, thr);
  for (int64_t j = tid; j < k; j += blockDim.x) write_result(a, q, j, j < kept ? buf[j] : kNoEntry, base);
}

// Pieces of one call's scratch, laid out in the arena (256-byte aligned).
struct FusedLayout {
  std::size_t q_out = 0, slice_best = 0, probes = 0, tile_off = 0, cand_key = 0, cand_pos = 0, merge_best = 0,
              bytes = 0;
  FusedLayout(int64_t n, int64_t dim, int64_t slices, int64_t per_slice, int64_t nprobe, int64_t max_tiles,
              int64_t kk, int64_t merge_slices) {
    const auto put = [&](std::size_t b) {
      const std::size_t at = bytes;
      bytes += (b + 255) / 256 * 256;
      return at;
    };
    q_out = put(sizeof(float) * n * dim);
    slice_best = put(sizeof(unsigned long long) * n * slices * per_slice);
    probes = put(sizeof(int32_t) * n * nprobe);
    tile_off = put(sizeof(int32_t) * n * (nprobe + 1));
    cand_key = put(sizeof(uint32_t) * n * max_tiles * kk);
    cand_pos = put(sizeof(int64_t) * n * max_tiles * kk);
    merge_best = put(sizeof(unsigned long long) * n * merge_slices * 32);
  }
};

// Launches kernel<<<grid, threads>>>(args) on stream, allowed to start before the previous
// kernel on the stream ends when `early` (it waits in wait_for_previous_kernel).
template <class... Params, class... Args>
void launch(bool early, void (*kernel)(Params...), dim3 grid, int threads, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  if (early) {
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  IVF_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace

void FusedSmallSearch::release_device_memory() noexcept {
  arena_.release();
  done_.reset();
}

bool FusedSmallSearch::run(const DeviceContext& ctx, const DeviceContext::Lease& lease, const SearchIndexView& index,
                           const SearchRequest& req, const SearchPlan& plan, bool check_queries) {
  const int64_t n = req.n(), dim = plan.dim, nlist = plan.nlist, nprobe = plan.nprobe, k = plan.k;
  if (dim > kFusedMaxDim || nprobe > kFusedMaxNprobe || nprobe > nlist || n > kSmallBatchMax) return false;
  if (index.list_ids != nullptr || index.scanner != nullptr) return false;  // ids not in lists.ids
  // Enough blocks per query to spread the centroids over SMs, few enough to merge on chip.
  int64_t slice_len = kMinSlice;
  while (slice_len * kMaxSlices < nlist && slice_len < kFusedMaxMerge) slice_len *= 2;
  const int64_t slices = (nlist + slice_len - 1) / slice_len;
  const int64_t per_slice = std::min<int64_t>(nprobe, slice_len);
  if (slices * per_slice > kFusedMaxMerge || slices > kMaxSlices) return false;
  const int64_t max_tiles = (plan.bound + kTileRows - 1) / kTileRows + nprobe;
  const int64_t kk = std::min<int64_t>(k, kTileRows);
  if (max_tiles * kk >= (int64_t{1} << 31)) return false;
  // k <= 32: the merge's blocks per query, from the most candidates a query can have.
  const int64_t merge_slices =
      k <= 32 ? std::clamp<int64_t>((max_tiles * kk + kSliceMergeEntries - 1) / kSliceMergeEntries, 1, kMaxMergeSlices)
              : 1;
  const FusedLayout lay(n, dim, slices, per_slice, nprobe, max_tiles, kk, merge_slices);
  if (lay.bytes > kMaxArena) return false;

  cudaStream_t stream = lease.stream();
  const bool host = req.memory == MemoryKind::Host;
  const AdmissionGate::Pass pass(ctx.small_search_gate());
  const std::size_t in_bytes = static_cast<std::size_t>(n * dim) * element_size(plan.qtype);
  const std::size_t result_count = static_cast<std::size_t>(n * k);
  // Under a device budget the arena must leave the batch path most of the scratch share.
  if (index.scratch_budget > 0 && lay.bytes > index.scratch_budget / 4) return false;
  try {
    if (host) {
      // The kernels read and write the staging through its device mapping (asked once per buffer).
      if (in_.reserve(in_bytes) || in_device_ == nullptr)
        IVF_CUDA_CHECK(cudaHostGetDevicePointer(&in_device_, in_.data(), 0));
      if (out_.reserve(result_count * (sizeof(int64_t) + sizeof(float))) || out_device_ == nullptr)
        IVF_CUDA_CHECK(cudaHostGetDevicePointer(&out_device_, out_.data(), 0));
    }
    if (check_queries && status_device_ == nullptr) {
      (void)status_.reserve(sizeof(int32_t) * kSmallBatchMax);
      IVF_CUDA_CHECK(cudaHostGetDevicePointer(&status_device_, status_.data(), 0));
    }
    (void)arena_.reserve(ctx, lay.bytes, stream);
    if (done_.data() == nullptr) {  // the coarse kernel's counters, then the merge's, then the verdicts
      done_ = DeviceBuffer<int32_t>(ctx, static_cast<std::size_t>(3 * kSmallBatchMax), stream);
      IVF_CUDA_CHECK(cudaMemsetAsync(done_.data(), 0, done_.bytes(), stream));
    }
  } catch (const Error& e) {
    // No room for the arena or the staging (a budget, a full device): the batch path, which
    // sizes its chunks to what is free, serves the call.
    if (e.code() != Errc::OutOfDeviceMemory && e.code() != Errc::OutOfHostMemory) throw;
    return false;
  }
  unsigned char* scratch = static_cast<unsigned char*>(arena_.base());
  const void* queries = req.queries.data;
  int64_t* out_ids = req.ids;
  float* out_dists = req.dists;
  if (host) {
    std::memcpy(in_.data(), req.queries.data, in_bytes);
    queries = in_device_;
    out_ids = static_cast<int64_t*>(out_device_);
    out_dists = reinterpret_cast<float*>(out_ids + result_count);
  }

  const ListView& lists = index.lists;
  const int metric = plan.metric == Metric::L2 ? kL2 : plan.metric == Metric::Cosine ? kCosine : kIP;
  CoarseArgs ca{queries, dim, nlist, nprobe, static_cast<int>(slice_len), static_cast<int>(slices),
                static_cast<int>(per_slice), metric,
                index.centroids, dim % 4 == 0 && reinterpret_cast<uintptr_t>(index.centroids) % 16 == 0,
                index.centroid_norms, lists.size,
                reinterpret_cast<float*>(scratch + lay.q_out),
                reinterpret_cast<unsigned long long*>(scratch + lay.slice_best), done_.data(),
                reinterpret_cast<int32_t*>(scratch + lay.probes), reinterpret_cast<int32_t*>(scratch + lay.tile_off),
                check_queries ? done_.data() + 2 * kSmallBatchMax : nullptr,
                check_queries ? static_cast<int32_t*>(status_device_) : nullptr, plan.metric != Metric::Cosine};
  dispatch_element_type(plan.qtype, [&](auto tag) {
    using Q = typename decltype(tag)::type;
    coarse_probe_kernel<Q><<<dim3(static_cast<unsigned>(slices), static_cast<unsigned>(n)), kCoarseThreads, 0,
                             stream>>>(ca);
  });
  IVF_CUDA_CHECK_LAUNCH();

  auto* cand_key = reinterpret_cast<uint32_t*>(scratch + lay.cand_key);
  auto* cand_pos = reinterpret_cast<int64_t*>(scratch + lay.cand_pos);
  const bool ip = plan.metric != Metric::L2;
  const bool early = ctx.limits().major >= 9;
  // As the batch scan: integer queries against rows of their own type stay integers (an
  // integer index has no cosine metric).
  const bool integer = is_integer(plan.qtype) && plan.qtype == lists.type;
  dispatch_element_type(lists.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool vec4 = dim % 4 == 0 && reinterpret_cast<uintptr_t>(lists.vectors) % 16 == 0;
    TileScanArgs<T> sa{ca.q_out, dim, nprobe, ca.probes, ca.tile_off, lists.rows<T>(), lists.start, lists.size,
                       lists.removed, static_cast<int>(kk), static_cast<int>(max_tiles), vec4, cand_key, cand_pos};
    // At most 8 blocks per SM over all queries (resident at once); blocks loop over the rest.
    const int64_t cap = std::max<int64_t>(1, int64_t{8} * ctx.limits().sm_count / n);
    const dim3 grid(static_cast<unsigned>(std::min(max_tiles, cap)), static_cast<unsigned>(n));
    if constexpr (DeviceElement<T>::kInteger) {
      if (integer) {
            launch(early, ip ? tile_scan_kernel<T, true, true> : tile_scan_kernel<T, false, true>, grid, kScanThreads,
               stream, sa);
        return;
      }
    }
    launch(early, ip ? tile_scan_kernel<T, true, false> : tile_scan_kernel<T, false, false>, grid, kScanThreads,
           stream, sa);
  });

  MergeArgs ma{ca.tile_off, nprobe, k, static_cast<int>(kk), static_cast<int>(max_tiles), cand_key, cand_pos,
               lists.ids, plan.larger, plan.pad, out_ids, out_dists,
               reinterpret_cast<unsigned long long*>(scratch + lay.merge_best), done_.data() + kSmallBatchMax,
               ca.status, n};
  if (k <= 32)
    launch(early, merge_small_k_kernel, dim3(static_cast<unsigned>(merge_slices), static_cast<unsigned>(n)),
           kSliceMergeThreads, stream, ma);
  else
    launch(early, merge_topk_kernel, dim3(static_cast<unsigned>(n)), kMergeThreads, stream, ma);
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (check_queries) {
    const auto* verdict = reinterpret_cast<const int32_t*>(status_.data());
    for (int64_t i = 0; i < n; ++i)
      if (verdict[i] != kUsable) fail_unusable_row("search: query", i, verdict[i] == kNonFinite);
  }
  if (host) {
    std::memcpy(req.ids, out_.data(), sizeof(int64_t) * result_count);
    std::memcpy(req.dists, out_.data() + sizeof(int64_t) * result_count, sizeof(float) * result_count);
  }
  ctx.count_fused_search();
  return true;
}

}  // namespace ivfgpu::cuda
