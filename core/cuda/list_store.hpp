// The inverted lists on the device (seed 002 §1): one contiguous row-major vector array and a
// parallel int64 id array, list by list. Each list l occupies [start[l], start[l] + cap[l]) of
// which the first size[l] rows are live; cap is a multiple of 32 rows, so every list begins on
// a 128-byte boundary when dim % 4 == 0. An add that fits every list's spare room writes into
// the gaps; otherwise the whole layout is rebuilt once with 1/8 spare per grown list
// (amortised growth, never 2x per list).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "../host_model.hpp"
#include "device_buffer.hpp"

namespace ivfgpu::cuda {

struct ListStore {
  int64_t dim = 0;
  int64_t nlist = 0;
  DeviceBuffer<float> vectors;      // capacity * dim
  DeviceBuffer<int64_t> ids;        // capacity
  DeviceBuffer<int64_t> d_start;    // nlist
  DeviceBuffer<int64_t> d_size;     // nlist
  std::vector<int64_t> start, size, cap;  // host mirrors
  std::vector<int64_t> largest_prefix;    // nlist + 1: sum of the p largest list sizes
  int64_t capacity = 0;
  int64_t ntotal = 0;

  std::size_t device_bytes() const {
    return vectors.bytes() + ids.bytes() + d_start.bytes() + d_size.bytes();
  }
};

// An empty store of nlist lists (small device arrays only).
ListStore make_empty_store(const DeviceContext& ctx, cudaStream_t stream, int64_t dim, int64_t nlist);

// Append n device rows x with device ids, already assigned (device assign[n]) to lists. The
// caller has synchronised the device; on any exception `store` is unchanged.
void store_append(const DeviceContext& ctx, cudaStream_t stream, ListStore& store, const float* x,
                  const int64_t* ids, const int32_t* assign, int64_t n);

// A store holding exactly the lists of a host model.
ListStore store_from_model(const DeviceContext& ctx, cudaStream_t stream, const HostModel& model);

// Copies the live rows, list by list, into model.vectors / ids / list_offsets.
void store_to_model(cudaStream_t stream, const ListStore& store, HostModel& model);

}  // namespace ivfgpu::cuda
