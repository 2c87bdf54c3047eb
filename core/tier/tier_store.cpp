#include "tier_store.hpp"

#include <atomic>
#include <cstring>
#include <numeric>

#include "../cpu/parallel.hpp"
#include "../errors.hpp"
#include "../list_layout.hpp"

namespace ivfgpu::tier {

namespace {
std::size_t ids_offset(int64_t cap, std::size_t row_bytes) {
  return (static_cast<std::size_t>(cap) * row_bytes + 63) / 64 * 64;
}
}  // namespace

uint64_t next_list_serial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

int64_t grown_capacity(int64_t rows) {
  const int64_t want = rows + rows / 8;
  return (want + 31) / 32 * 32;
}

TierStore::TierStore(std::shared_ptr<HostArenas> arenas, int64_t dim, ElementType type, std::vector<TierList> lists)
    : arenas_(std::move(arenas)), dim_(dim), type_(type), row_bytes_(static_cast<std::size_t>(dim) * element_size(type)),
      lists_(std::move(lists)) {
  sizes_.resize(lists_.size());
  for (std::size_t l = 0; l < lists_.size(); ++l) sizes_[l] = lists_[l].size;
  largest_prefix_ = largest_lists_prefix(sizes_);
  ntotal_ = std::accumulate(sizes_.begin(), sizes_.end(), int64_t{0});
}

TierStore::Ptr TierStore::empty(std::shared_ptr<HostArenas> arenas, int64_t dim, ElementType type, int64_t nlist) {
  return Ptr(new TierStore(std::move(arenas), dim, type, std::vector<TierList>(static_cast<std::size_t>(nlist))));
}

TierStore::Ptr TierStore::from_model(std::shared_ptr<HostArenas> arenas, HostModel& model) {
  // The model's two arrays, kept alive (and registered) as long as a list points into them.
  // Rows of any element type: f32 ones in `vectors`, compact ones in `packed`.
  struct Arrays {
    std::vector<float> vectors;
    std::vector<unsigned char> packed;
    std::vector<int64_t> ids;
  };
  const int64_t ntotal = model.ntotal();
  auto owner = std::make_shared<Arrays>();
  owner->vectors = std::move(model.vectors);
  owner->packed = std::move(model.packed);
  owner->ids = std::move(model.ids);
  const std::size_t row_bytes = model.row_bytes();
  void* rows = model.type == ElementType::F32 ? static_cast<void*>(owner->vectors.data()) : owner->packed.data();
  const auto vec_block = arenas->adopt(owner, rows, static_cast<std::size_t>(ntotal) * row_bytes);
  const auto id_block = arenas->adopt(owner, owner->ids.data(), owner->ids.size() * sizeof(int64_t));
  // One block per list would free nothing early (the arrays go with the last list): each list
  // keeps the vectors' block and the ids' block alive through one holder.
  auto both = std::make_shared<HostBlock>(*vec_block);
  std::shared_ptr<const HostBlock> holder(both.get(), [both, vec_block, id_block](const HostBlock*) {});
  std::vector<TierList> lists(static_cast<std::size_t>(model.nlist));
  for (int64_t l = 0; l < model.nlist; ++l) {
    TierList& t = lists[l];
    t.size = t.cap = model.list_size(l);
    if (t.size == 0) continue;
    const int64_t first = model.list_offsets[l];
    t.block = holder;
    t.serial = next_list_serial();
    t.rows = vec_block->host + static_cast<std::size_t>(first) * row_bytes;
    t.device_rows = vec_block->device + static_cast<std::size_t>(first) * row_bytes;
    t.ids = reinterpret_cast<int64_t*>(id_block->host) + first;
    t.device_ids = reinterpret_cast<const int64_t*>(id_block->device) + first;
  }
  return Ptr(new TierStore(std::move(arenas), model.dim, model.type, std::move(lists)));
}

TierList TierStore::new_list(int64_t cap) const {
  TierList t;
  t.cap = cap;
  t.serial = next_list_serial();
  const std::size_t off = ids_offset(cap, row_bytes_);
  t.block = arenas_->allocate(off + static_cast<std::size_t>(cap) * sizeof(int64_t));
  t.rows = t.block->host;
  t.device_rows = t.block->device;
  t.ids = reinterpret_cast<int64_t*>(t.block->host + off);
  t.device_ids = reinterpret_cast<const int64_t*>(t.block->device + off);
  return t;
}

TierStore::Ptr TierStore::append(const void* rows, const int64_t* ids, const int64_t* lists, int64_t n,
                                 int threads) const {
  const int64_t nlist = this->nlist();
  // Rows grouped by list, in input order within a list (a counting sort).
  std::vector<int64_t> begin(static_cast<std::size_t>(nlist) + 1, 0);
  for (int64_t i = 0; i < n; ++i) ++begin[lists[i] + 1];
  for (int64_t l = 0; l < nlist; ++l) begin[l + 1] += begin[l];
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  {
    std::vector<int64_t> cursor(begin.begin(), begin.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[cursor[lists[i]]++] = i;
  }
  // Every new block first: a failure here changes nothing.
  std::vector<TierList> next(lists_);
  std::vector<int64_t> moved;  // lists that got a new block
  for (int64_t l = 0; l < nlist; ++l) {
    const int64_t added = begin[l + 1] - begin[l];
    if (added == 0 || lists_[l].size + added <= lists_[l].cap) continue;
    TierList t = new_list(grown_capacity(lists_[l].size + added));
    t.size = lists_[l].size;
    next[l] = std::move(t);
    moved.push_back(l);
  }
  // Then the copies, list by list in parallel: a moved list's old rows, then every new row past
  // the list's size (no published state reads there).
  const auto* src = static_cast<const char*>(rows);
  parallel_for(nlist, threads, 16, [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t added = begin[l + 1] - begin[l];
      if (added == 0) continue;
      TierList& t = next[l];
      const TierList& old = lists_[l];
      if (t.block != old.block && old.size > 0) {
        std::memcpy(t.rows, old.rows, static_cast<std::size_t>(old.size) * row_bytes_);
        std::memcpy(t.ids, old.ids, static_cast<std::size_t>(old.size) * sizeof(int64_t));
      }
      for (int64_t j = begin[l]; j < begin[l + 1]; ++j) {
        const int64_t i = order[j];
        std::memcpy(t.rows + static_cast<std::size_t>(t.size) * row_bytes_, src + static_cast<std::size_t>(i) * row_bytes_,
                    row_bytes_);
        t.ids[t.size++] = ids[i];
      }
    }
  });
  return Ptr(new TierStore(arenas_, dim_, type_, std::move(next)));
}

std::pair<TierStore::Ptr, int64_t> TierStore::remove_if(const std::function<bool(int64_t)>& match,
                                                         int threads) const {
  const int64_t nlist = this->nlist();
  // First pass: which rows go, per list (read only).
  std::vector<int64_t> gone(static_cast<std::size_t>(nlist), 0);
  parallel_for(nlist, threads, 16, [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l)
      for (int64_t r = 0; r < lists_[l].size; ++r) gone[l] += match(lists_[l].ids[r]) ? 1 : 0;
  });
  const int64_t total = std::accumulate(gone.begin(), gone.end(), int64_t{0});
  if (total == 0) return {Ptr(new TierStore(arenas_, dim_, type_, lists_)), 0};
  // New blocks for the touched lists (allocated before anything is written), then the copies.
  std::vector<TierList> next(lists_);
  for (int64_t l = 0; l < nlist; ++l) {
    if (gone[l] == 0) continue;
    const int64_t keep = lists_[l].size - gone[l];
    next[l] = keep == 0 ? TierList{} : new_list(grown_capacity(keep));
  }
  parallel_for(nlist, threads, 16, [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      if (gone[l] == 0 || next[l].block == nullptr) continue;
      TierList& t = next[l];
      const TierList& old = lists_[l];
      for (int64_t r = 0; r < old.size; ++r) {
        if (match(old.ids[r])) continue;
        std::memcpy(t.rows + static_cast<std::size_t>(t.size) * row_bytes_,
                    old.rows + static_cast<std::size_t>(r) * row_bytes_, row_bytes_);
        t.ids[t.size++] = old.ids[r];
      }
    }
  });
  return {Ptr(new TierStore(arenas_, dim_, type_, std::move(next))), total};
}

ListView TierStore::view() const {
  ListView v;
  v.nlist = nlist();
  v.dim = dim_;
  v.type = type_;
  v.tier = MemoryTier::Host;
  v.ntotal = ntotal_;
  v.size = v.host_size = sizes_.data();
  v.largest_prefix = largest_prefix_.data();
  // Lists are not in one array: vectors, ids and start stay null; readers use list(l).
  return v;
}

std::size_t TierStore::bytes() const {
  std::size_t b = 0;
  for (const TierList& t : lists_)
    b += static_cast<std::size_t>(t.cap) * (row_bytes_ + sizeof(int64_t));
  return b + sizes_.size() * 3 * sizeof(int64_t);
}

void TierStore::export_lists(HostModel& model) const {
  if (type_ != ElementType::F32) fail(Errc::Unsupported, "host tier: only f32 lists can be exported");
  const int64_t nlist = this->nlist();
  model.list_offsets.assign(static_cast<std::size_t>(nlist) + 1, 0);
  for (int64_t l = 0; l < nlist; ++l) model.list_offsets[l + 1] = model.list_offsets[l] + sizes_[l];
  model.vectors.resize(static_cast<std::size_t>(ntotal_ * dim_));
  model.ids.resize(static_cast<std::size_t>(ntotal_));
  for (int64_t l = 0; l < nlist; ++l) {
    const TierList& t = lists_[l];
    if (t.size == 0) continue;
    std::memcpy(model.vectors.data() + model.list_offsets[l] * dim_, t.rows, list_bytes(l));
    std::memcpy(model.ids.data() + model.list_offsets[l], t.ids, static_cast<std::size_t>(t.size) * sizeof(int64_t));
  }
}

}  // namespace ivfgpu::tier
