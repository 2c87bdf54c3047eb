// Id sets for filtered search: a bitset when the ids are dense, else a hash set (an IdMap).
// The choice is made in one place, choose_id_filter(). Device side: id_bitset.cuh (IdSetView).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "device_buffer.hpp"
#include "device_context.hpp"
#include "id_map.hpp"

namespace ivfgpu::cuda {

struct IdSetView;  // id_bitset.cuh: device code only

enum class IdFilterKind { Bitset, HashSet };

// Dense (a bitset over [min_id, max_id]) when the range is at most 64 ids per member: the
// bitset then costs at most 8 bytes per member against ~19 for the hash set at load 0.875, and
// a test is one word load instead of two digest sectors. count = distinct ids (an upper bound
// is fine). An empty set is a bitset of no bits.
IdFilterKind choose_id_filter(int64_t count, int64_t min_id, int64_t max_id);

class IdSet {
 public:
  // From n device ids (repeats allowed; any int64). Synchronises `stream`.
  static IdSet build(const DeviceContext& ctx, const int64_t* ids, int64_t n, cudaStream_t stream);

  IdFilterKind kind() const { return kind_; }
  IdSetView view() const;
  std::size_t bytes() const;

  // out[i] = 1 when ids[i] is in the set, else 0 (device arrays; runs IdSetView::contains).
  void contains(const int64_t* ids, int64_t n, uint8_t* out, cudaStream_t stream) const;

 private:
  IdSet(const DeviceContext& ctx) : ctx_(&ctx) {}
  const DeviceContext* ctx_ = nullptr;
  IdFilterKind kind_ = IdFilterKind::Bitset;
  DeviceBuffer<uint32_t> words_;
  int64_t base_ = 0;
  uint64_t nbits_ = 0;
  std::optional<IdMap> map_;
};

}  // namespace ivfgpu::cuda
