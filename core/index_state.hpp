// One published state of an index: immutable once published, shared by every search that
// loaded it, replaced as a whole by each mutation (published.hpp). Each backend derives its
// own state (its centroids and list store in its memory); the Index only numbers them.
#pragma once

#include <cstdint>
#include <memory>

#include "list_store.hpp"

namespace ivfgpu {

class IndexState {
 public:
  virtual ~IndexState() = default;
  virtual bool trained() const = 0;
  virtual const ListStore& lists() const = 0;
  int64_t ntotal() const { return lists().ntotal(); }

  uint64_t version = 0;       // set by the Index before it publishes the state
  int64_t next_free_id = 0;   // unique-ids indexes: one past the largest id ever held
};

using StatePtr = std::shared_ptr<const IndexState>;
// A state being built by a mutation: still private to it, so still mutable.
using NewState = std::shared_ptr<IndexState>;

}  // namespace ivfgpu
