// One index over several backends (IVF_PARAM_SHARDS, issue 15): the same handle and calls,
// nothing for the caller to merge. Each part is an ordinary backend (a CUDA device, or the CPU),
// so the placement, merge, save/load and failure logic is the same on every kind and the CPU
// runs it in CI.
//
// - Sharded: rows are dealt to the parts in turn (row i of the index's add stream to part
//   i mod G), so every list is split about evenly whatever its size; a search runs on every
//   part with the full k and the per-part top-k lists are merged into the single-index result:
//   on the first part's device for CUDA parts (part_exchange.hpp), on the host for CPU parts.
//   A part that fails makes the call fail; a lost device makes the index lost.
// - Replicated: every part holds every row; a search's queries are split among the live parts
//   (a part whose device is lost is dropped and its share retried on the others).
//
// Centroids are trained once (part 0) and given to the others; a save writes one model (the
// parts' lists concatenated, list by list), which loads on any number of parts.
#pragma once

#include <memory>

#include "backend.hpp"
#include "part_exchange.hpp"

namespace ivfgpu {

enum class ShardMode : int32_t { Split = 0, Replicate = 1 };

// parts: one backend per shard (made by the caller with the right device each); exchange: for
// CUDA parts (device-memory searches, merging on a device), null for CPU parts.
std::unique_ptr<Backend> make_sharded_backend(int64_t dim, const BuildParams& params,
                                              std::vector<std::unique_ptr<Backend>> parts,
                                              std::unique_ptr<PartExchange> exchange);

}  // namespace ivfgpu
