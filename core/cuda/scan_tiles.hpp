// The SIMT kernels of stage C (scan.hpp) and their arguments, instantiated once per storage
// type in scan_tiles_<type>.cu so that the types compile in parallel. scan.cu chooses the
// launch (query tile, metric, integer arithmetic) in one place and calls launch_scan<T>.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "candidates.cuh"
#include "device_context.hpp"
#include "id_bitset.cuh"
#include "scan.hpp"

namespace ivfgpu::cuda::scan_detail {

constexpr int kThreads = 256;
constexpr int kTileV = 64;     // vectors per tile
constexpr int kTileD = 32;     // dimensions staged per step
constexpr int kUnitTiles = 4;  // vector tiles per work unit (amortises the unit's set-up)

template <class T>
struct TileArgs {
  const ScanSegment* segments;  // null: one unit per list, rows at vectors + list_start
  int64_t nseg;
  const float* queries;
  int64_t dim, nlist, nprobe;
  const T* vectors;
  const int64_t* list_start;
  const int64_t* list_size;
  const int32_t* grouped;     // pair ids grouped by list
  const int32_t* pair_begin;  // nlist: first grouped entry of each list
  const int32_t* pair_count;  // nlist
  const int64_t* tile_off;    // nlist + 1
  CandidateRows cand;
  bool vec4;  // dim % 4 == 0 and aligned bases: four-element loads
  // Exclusion of rows inside the scan: removed bits by slot, and a filter on ids.
  bool check_rows;            // removed != nullptr || filter != 0
  const uint64_t* removed;
  const int64_t* ids;
  int filter;                 // 0 none, 1 allow, 2 deny
  IdSetView filter_set;
  float excluded;
  const float* centroids;  // nlist * dim, or nullptr (the pruned tensor pass centres L2 on them)
  bool simt_resident = false;  // list_tile_kernel keeps the unit's query tile (set by its launch)
  // The tensor passes' queries a work unit (tensor_tiles, mma_unit): kMmaTile (64, in
  // scan_tensor.hpp; each tensor launch checks the value against its kernel), or two or four
  // tiles' worth where the resident bf16 and int8 passes group them (pruned_unit_query_tiles).
  int unit_queries = 64;
  // Integer queries packed once a search as the rows' bytes (nq * dim, dim % 16 == 0) with their
  // exact squared norms (pack_integer_queries): what the int8 seed and pass stage their query
  // tiles from. Null for every other scan.
  const uint8_t* query_bytes = nullptr;
  const int32_t* query_sq = nullptr;
  // The tensor kernels' work units (seed_unit, mma_unit, next_block_unit): unit_list[i] is the
  // list whose units come i-th in tile_off (null: list i), and next_unit counts the units
  // claimed past the first wave (zeroed before the launch; null: a block takes every
  // gridDim-th unit). Both are set together (tensor_units, scan.cu) or not at all.
  const int32_t* unit_list = nullptr;
  unsigned long long* next_unit = nullptr;
  // The SIMT kernels' rows are row_step storage slots apart (ScanProblem::row_step): a list's
  // row r is at vectors + (list_start + r * row_step) * dim, its id at ids[list_start + r *
  // row_step]. 1 for every tensor kernel.
  int64_t row_step = 1;
};

// tile_q: 16 (list_rows_kernel: a thread per row) or 64 (list_tile_kernel: a register tile of
// queries x rows) queries per tile; both sum each distance in dimension order, to the same bits.
// integer: integer rows against integer-valued queries, summed exactly in integers (only for
// integer T).
template <class T>
void launch_scan(const DeviceContext& ctx, cudaStream_t stream, int tile_q, bool ip, bool integer,
                 const TileArgs<T>& args);

}  // namespace ivfgpu::cuda::scan_detail
