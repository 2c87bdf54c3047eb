#include "host_list_store.hpp"

#include <cstring>
#include <numeric>
#include <utility>

namespace ivfgpu::cpu {

HostListStore::HostListStore(int64_t dim, ElementType type, std::shared_ptr<HostListStorage> storage,
                             std::vector<int64_t> sizes, std::shared_ptr<const RemovedRows> removed)
    : dim_(dim), type_(type), row_bytes_(static_cast<std::size_t>(dim) * element_size(type)), storage_(std::move(storage)), sizes_(std::move(sizes)),
      largest_prefix_(largest_lists_prefix(sizes_)), removed_(std::move(removed)),
      ntotal_(std::accumulate(sizes_.begin(), sizes_.end(), int64_t{0}) - (removed_ ? removed_->count : 0)) {}

HostListStore::Ptr HostListStore::empty(int64_t dim, int64_t nlist, ElementType type) {
  auto storage = std::make_shared<HostListStorage>();
  storage->layout = ListLayout::empty(nlist);
  return Ptr(new HostListStore(dim, type, std::move(storage), std::vector<int64_t>(static_cast<std::size_t>(nlist), 0),
                               nullptr));
}

HostListStore::Ptr HostListStore::from_model(HostModel& model) {
  std::vector<int64_t> sizes(static_cast<std::size_t>(model.nlist));
  for (int64_t l = 0; l < model.nlist; ++l) sizes[l] = model.list_size(l);
  auto storage = std::make_shared<HostListStorage>();
  storage->layout = ListLayout::packed(sizes);
  storage->f32 = std::move(model.vectors);  // taken over: no copy
  storage->packed = std::move(model.packed);
  storage->ids = std::move(model.ids);
  return Ptr(new HostListStore(model.dim, model.type, std::move(storage), std::move(sizes), nullptr));
}

std::shared_ptr<HostListStorage> HostListStore::copy_live(const ListLayout& layout) const {
  // Every allocation happens before anything is published, so a failure (bad_alloc) leaves the
  // current state as it was.
  auto out = std::make_shared<HostListStorage>();
  out->layout = layout;
  out->resize_rows(type_, static_cast<std::size_t>(layout.capacity) * row_bytes_);
  out->ids.resize(static_cast<std::size_t>(layout.capacity));
  std::vector<int64_t> cursor(layout.start);
  for_each_live([&](int64_t slot, int64_t l) {
    const int64_t to = cursor[l]++;
    std::memcpy(out->rows() + to * row_bytes_, storage_->rows() + slot * row_bytes_, row_bytes_);
    out->ids[to] = storage_->ids[slot];
  });
  return out;
}

HostListStore::Ptr HostListStore::append(const void* x, const int64_t* ids, const int64_t* lists, int64_t n) const {
  const int64_t nlist = static_cast<int64_t>(sizes_.size());
  const auto* src = static_cast<const unsigned char*>(x);
  std::vector<int64_t> added(static_cast<std::size_t>(nlist), 0);
  for (int64_t i = 0; i < n; ++i) ++added[lists[i]];
  std::shared_ptr<HostListStorage> target = storage_;
  std::shared_ptr<const RemovedRows> removed = removed_;
  std::vector<int64_t> next_sizes(sizes_);
  if (!fits(storage_->layout, sizes_, added)) {
    next_sizes = live_list_sizes(view());
    target = copy_live(grown(ListLayout::empty(nlist), next_sizes, added));
    removed = nullptr;
  }
  // New rows go past the used sizes: no published state reads them.
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = lists[i];
    const int64_t slot = target->layout.start[l] + next_sizes[l]++;
    std::memcpy(target->rows() + slot * row_bytes_, src + i * row_bytes_, row_bytes_);
    target->ids[slot] = ids[i];
  }
  return Ptr(new HostListStore(dim_, type_, std::move(target), std::move(next_sizes), std::move(removed)));
}

std::pair<HostListStore::Ptr, int64_t> HostListStore::remove_if(const std::function<bool(int64_t)>& match) const {
  auto next = std::make_shared<RemovedRows>();
  if (removed_)
    *next = *removed_;
  else
    next->bits.assign(RemovedRows::words_for(storage_->layout.capacity), 0);
  int64_t hits = 0;
  for_each_live([&](int64_t slot, int64_t) {
    if (!match(storage_->ids[slot])) return;
    next->bits[slot >> 6] |= uint64_t{1} << (slot & 63);
    ++hits;
  });
  next->count += hits;
  return {Ptr(new HostListStore(dim_, type_, storage_, sizes_, std::move(next))), hits};
}

HostListStore::Ptr HostListStore::compacted() const {
  const std::vector<int64_t> live = live_list_sizes(view());
  const int64_t nlist = static_cast<int64_t>(live.size());
  auto storage = copy_live(grown(ListLayout::empty(nlist), live, std::vector<int64_t>(live.size(), 0)));
  return Ptr(new HostListStore(dim_, type_, std::move(storage), live, nullptr));
}

void HostListStore::for_each_live(const std::function<void(int64_t, int64_t)>& fn) const {
  const ListView v = view();
  for (int64_t l = 0; l < v.nlist; ++l)
    for (int64_t s = v.host_start[l], e = s + sizes_[l]; s < e; ++s)
      if (!v.host_removed_at(s)) fn(s, l);
}

ListView HostListStore::view() const {
  ListView v;
  v.nlist = static_cast<int64_t>(sizes_.size());
  v.dim = dim_;
  v.type = type_;
  v.tier = MemoryTier::Host;
  v.ntotal = ntotal_;
  v.vectors = storage_->rows();
  v.ids = storage_->ids.data();
  v.start = v.host_start = storage_->layout.start.data();
  v.size = v.host_size = sizes_.data();
  v.removed = v.host_removed = removed_ ? removed_->bits.data() : nullptr;
  v.removed_count = removed_ ? removed_->count : 0;
  v.largest_prefix = largest_prefix_.data();
  return v;
}

std::size_t HostListStore::bytes() const {
  return storage_->row_bytes_held() + storage_->ids.size() * sizeof(int64_t) +
         (storage_->layout.start.size() + storage_->layout.cap.size() + 2 * sizes_.size()) * sizeof(int64_t) +
         (removed_ ? removed_->bits.size() * sizeof(uint64_t) : 0);
}

void HostListStore::export_lists(HostModel& model) const {
  const std::vector<int64_t> live = live_list_sizes(view());
  const int64_t nlist = static_cast<int64_t>(live.size());
  model.list_offsets.assign(static_cast<std::size_t>(nlist) + 1, 0);
  for (int64_t l = 0; l < nlist; ++l) model.list_offsets[l + 1] = model.list_offsets[l] + live[l];
  model.type = type_;
  unsigned char* out;
  if (type_ == ElementType::F32) {
    model.vectors.resize(static_cast<std::size_t>(ntotal_ * dim_));
    model.packed.clear();
    out = reinterpret_cast<unsigned char*>(model.vectors.data());
  } else {
    model.vectors.clear();
    model.packed.resize(static_cast<std::size_t>(ntotal_) * row_bytes_);
    out = model.packed.data();
  }
  model.ids.resize(static_cast<std::size_t>(ntotal_));
  std::vector<int64_t> cursor(model.list_offsets.begin(), model.list_offsets.end() - 1);
  for_each_live([&](int64_t slot, int64_t l) {
    const int64_t to = cursor[l]++;
    std::memcpy(out + to * row_bytes_, storage_->rows() + slot * row_bytes_, row_bytes_);
    model.ids[to] = storage_->ids[slot];
  });
}

}  // namespace ivfgpu::cpu
