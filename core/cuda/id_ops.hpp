// The CUDA backend's id operations on a published state: its id map (id -> the slot of the
// row that comes first in list order, kept in the state beside the list store and replaced by
// a modified clone on every mutation, so a state's map never changes), and the device kernels
// of get and count. The slot of a row names both its list and its place in the list.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "device_context.hpp"
#include "device_list_store.hpp"
#include "id_map.hpp"

namespace ivfgpu::cuda {

using IdMapPtr = std::shared_ptr<const IdMap>;

// The map of every live row of a store.
IdMapPtr build_id_map(const DeviceContext& ctx, cudaStream_t stream, const DeviceListStore& store);
// `old` plus n new rows (device ids and slots); a new row replaces the mapped row of its id only
// when it comes earlier in list order.
IdMapPtr map_with_rows(const DeviceContext& ctx, cudaStream_t stream, const IdMap& old, const int64_t* ids,
                       const int64_t* slots, int64_t n);
// `old` without the n ids (device).
IdMapPtr map_without(const DeviceContext& ctx, cudaStream_t stream, const IdMap& old, const int64_t* ids, int64_t n);

// out[i] (dim floats, device) = the mapped row of ids[i], or zeros; found[i] = 1 / 0.
void gather_by_id(const DeviceContext& ctx, cudaStream_t stream, const IdMap& map, const ListView& lists,
                  const int64_t* ids, int64_t n, float* out, uint8_t* found);
// counts[i] = live rows with id ids[i] (device arrays); unique ids: from the map, else one pass
// over the store's rows.
void count_by_id(const DeviceContext& ctx, cudaStream_t stream, const IdMap& map, bool unique, const ListView& lists,
                 const int64_t* ids, int64_t n, int64_t* counts);

}  // namespace ivfgpu::cuda
