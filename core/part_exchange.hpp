// How an index of several CUDA parts (IVF_PARAM_SHARDS) moves a search's queries and results
// between its parts' devices, and merges the parts' top-k on one of them (issue 15). The
// sharded backend runs the parts and their threads; everything CUDA is behind this interface
// (cuda/part_exchange.cu), so sharded_backend.cpp stays plain C++ and its CPU twin runs in CI.
//
// The merging device is the first part's (IVF_PARAM_DEVICE): device-memory queries and results
// of a search live there, as they do for a one-part index. Results cross between devices by
// peer copies where the devices have peer access (NVLink or PCIe peer-to-peer), else through
// host memory (IVFGPU_DISABLE_PEER_ACCESS=1 forces that route, for tests and diagnosis).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "search_request.hpp"

namespace ivfgpu {

// One search, or one block of its queries, through the exchange. request(p) and collect(p) run
// on part p's thread (parts in parallel), finish() once after every part has collected.
class ExchangeCall {
 public:
  virtual ~ExchangeCall() = default;
  // Part p's share of the call: its queries staged on its device, its results going to
  // buffers there (device memory, no stream: the part's search returns when done).
  virtual SearchRequest request(std::size_t p) = 0;
  // Part p's results moved on: to the merging device (a split search) or into the caller's
  // results (a replica's block).
  virtual void collect(std::size_t p) = 0;
  // A split search: the parts' top-k merged into the caller's results in the order of the
  // host merge (distance, then part, then rank; padding last). A replica's block: nothing.
  virtual void finish() = 0;
};

class PartExchange {
 public:
  virtual ~PartExchange() = default;
  // A split search of req on every part.
  virtual std::unique_ptr<ExchangeCall> split(const SearchRequest& req, bool larger_is_better) const = 0;
  // Part p's block of a replicated search whose queries and results are in device memory.
  virtual std::unique_ptr<ExchangeCall> replica(const SearchRequest& block, std::size_t p) const = 0;
  // A device-memory search's queries checked on the merging device as one index checks them
  // (NaN or Inf; the norm bound but under cosine): fails naming the request's first bad row.
  // Run before a search cut into blocks, whose parts would each name a row of their block and
  // whose first blocks' results would reach the caller before a later one is refused.
  virtual void reject_unusable_queries(const SearchRequest& req, Metric metric) const = 0;
  // Queries per split call: the gathered results of a call stay under a fixed bound.
  virtual int64_t block_rows(int64_t k) const = 0;
  // true when some part lives on another device than the first and results cross by peer
  // copies; false when they go through host memory or every part shares one device.
  virtual bool peer_copies() const = 0;
  // Device memory the exchange's pools keep for the next call, and giving it back (ivf_reset).
  virtual std::size_t cached_bytes() const noexcept = 0;
  virtual void trim() noexcept = 0;
};

}  // namespace ivfgpu
