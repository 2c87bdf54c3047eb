#include "host_list_store.hpp"

#include <cstring>
#include <numeric>
#include <utility>

namespace ivfgpu::cpu {

HostListStore::HostListStore(int64_t dim, std::shared_ptr<HostListStorage> storage, std::vector<int64_t> sizes)
    : dim_(dim), storage_(std::move(storage)), sizes_(std::move(sizes)),
      largest_prefix_(largest_lists_prefix(sizes_)),
      ntotal_(std::accumulate(sizes_.begin(), sizes_.end(), int64_t{0})) {}

std::shared_ptr<const HostListStore> HostListStore::empty(int64_t dim, int64_t nlist) {
  auto storage = std::make_shared<HostListStorage>();
  storage->layout = ListLayout::empty(nlist);
  return std::shared_ptr<const HostListStore>(
      new HostListStore(dim, std::move(storage), std::vector<int64_t>(static_cast<std::size_t>(nlist), 0)));
}

std::shared_ptr<const HostListStore> HostListStore::from_model(HostModel& model) {
  std::vector<int64_t> sizes(static_cast<std::size_t>(model.nlist));
  for (int64_t l = 0; l < model.nlist; ++l) sizes[l] = model.list_size(l);
  auto storage = std::make_shared<HostListStorage>();
  storage->layout = ListLayout::packed(sizes);
  storage->vectors = std::move(model.vectors);
  storage->ids = std::move(model.ids);
  return std::shared_ptr<const HostListStore>(new HostListStore(model.dim, std::move(storage), std::move(sizes)));
}

std::shared_ptr<const HostListStore> HostListStore::append(const float* x, const int64_t* ids, const int64_t* lists,
                                                           int64_t n) const {
  const int64_t nlist = static_cast<int64_t>(sizes_.size()), dim = dim_;
  std::vector<int64_t> added(static_cast<std::size_t>(nlist), 0);
  for (int64_t i = 0; i < n; ++i) ++added[lists[i]];
  std::shared_ptr<HostListStorage> target = storage_;
  if (!fits(storage_->layout, sizes_, added)) {
    // A grown storage: every allocation happens before anything is published, so a failure
    // (bad_alloc) leaves the current state as it was.
    auto grown_storage = std::make_shared<HostListStorage>();
    grown_storage->layout = grown(storage_->layout, sizes_, added);
    grown_storage->vectors.resize(static_cast<std::size_t>(grown_storage->layout.capacity * dim));
    grown_storage->ids.resize(static_cast<std::size_t>(grown_storage->layout.capacity));
    for (int64_t l = 0; l < nlist; ++l) {
      const int64_t from = storage_->layout.start[l], to = grown_storage->layout.start[l], size = sizes_[l];
      if (size == 0) continue;  // an empty storage's arrays may be NULL: memcpy(NULL, 0) is UB
      std::memcpy(grown_storage->vectors.data() + to * dim, storage_->vectors.data() + from * dim,
                  sizeof(float) * size * dim);
      std::memcpy(grown_storage->ids.data() + to, storage_->ids.data() + from, sizeof(int64_t) * size);
    }
    target = std::move(grown_storage);
  }
  // New rows go past the live sizes: no published state reads them.
  std::vector<int64_t> next_sizes(sizes_);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = lists[i];
    const int64_t slot = target->layout.start[l] + next_sizes[l]++;
    std::memcpy(target->vectors.data() + slot * dim, x + i * dim, sizeof(float) * dim);
    target->ids[slot] = ids[i];
  }
  return std::shared_ptr<const HostListStore>(new HostListStore(dim, std::move(target), std::move(next_sizes)));
}

ListView HostListStore::view() const {
  ListView v;
  v.nlist = static_cast<int64_t>(sizes_.size());
  v.dim = dim_;
  v.type = ElementType::F32;
  v.tier = MemoryTier::Host;
  v.ntotal = ntotal_;
  v.vectors = storage_->vectors.data();
  v.ids = storage_->ids.data();
  v.start = v.host_start = storage_->layout.start.data();
  v.size = v.host_size = sizes_.data();
  v.largest_prefix = largest_prefix_.data();
  return v;
}

std::size_t HostListStore::bytes() const {
  return storage_->vectors.size() * sizeof(float) + storage_->ids.size() * sizeof(int64_t) +
         (storage_->layout.start.size() + storage_->layout.cap.size() + 2 * sizes_.size()) * sizeof(int64_t);
}

void HostListStore::export_lists(HostModel& model) const {
  const int64_t nlist = static_cast<int64_t>(sizes_.size()), dim = dim_;
  model.list_offsets.assign(static_cast<std::size_t>(nlist) + 1, 0);
  for (int64_t l = 0; l < nlist; ++l) model.list_offsets[l + 1] = model.list_offsets[l] + sizes_[l];
  model.vectors.resize(static_cast<std::size_t>(ntotal_ * dim));
  model.ids.resize(static_cast<std::size_t>(ntotal_));
  for (int64_t l = 0; l < nlist; ++l) {
    if (sizes_[l] == 0) continue;
    const int64_t from = storage_->layout.start[l], to = model.list_offsets[l];
    std::memcpy(model.vectors.data() + to * dim, storage_->vectors.data() + from * dim, sizeof(float) * sizes_[l] * dim);
    std::memcpy(model.ids.data() + to, storage_->ids.data() + from, sizeof(int64_t) * sizes_[l]);
  }
}

}  // namespace ivfgpu::cpu
