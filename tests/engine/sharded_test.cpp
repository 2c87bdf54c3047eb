// A part that loses its device, on the CPU: a split index fails the call (and stays failed,
// as its part does), a replicated one drops the part and keeps answering, with the same results.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <vector>

#include "common/test_util.hpp"
#include "core/cpu/cpu_backend.hpp"
#include "core/errors.hpp"
#include "core/sharded_backend.hpp"

using namespace ivfgpu;

namespace {

// A CPU backend whose "device" can be lost: from then on every call fails with DeviceLost.
class Flaky final : public Backend {
 public:
  Flaky(int64_t dim, const BuildParams& p, std::shared_ptr<std::atomic<bool>> lost)
      : inner_(cpu::make_cpu_backend(dim, p)), lost_(std::move(lost)) {}
  NewState initial_state() override { return inner_->initial_state(); }
  NewState train(const IndexState& s, const MatrixView& x) override { check(); return inner_->train(s, x); }
  NewState add(const IndexState& s, const MatrixView& x, const int64_t* ids, MemoryKind m) override {
    check();
    return inner_->add(s, x, ids, m);
  }
  NewState reset(const IndexState& s) override { check(); return inner_->reset(s); }
  std::pair<NewState, int64_t> remove(const IndexState& s, const int64_t* ids, int64_t n) override {
    check();
    return inner_->remove(s, ids, n);
  }
  void get(const IndexState& s, const int64_t* ids, int64_t n, float* out, uint8_t* found) const override {
    check();
    inner_->get(s, ids, n, out, found);
  }
  void count_ids(const IndexState& s, const int64_t* ids, int64_t n, int64_t* c) const override {
    check();
    inner_->count_ids(s, ids, n, c);
  }
  NewState restore(HostModel m) override { check(); return inner_->restore(std::move(m)); }
  void search(const StatePtr& s, const SearchRequest& r) const override { check(); inner_->search(s, r); }
  HostModel export_model(const IndexState& s) const override { check(); return inner_->export_model(s); }
  std::vector<float> host_copy(const MatrixView& x) const override { return inner_->host_copy(x); }
  std::vector<int64_t> host_copy_ids(const int64_t* ids, int64_t n) const override { return inner_->host_copy_ids(ids, n); }
  BackendKind kind() const override { return BackendKind::Cpu; }
  BackendInfo info(const IndexState& s) const override { return inner_->info(s); }

 private:
  void check() const {
    if (lost_->load()) fail(Errc::DeviceLost, "test: this part's device is lost");
  }
  std::unique_ptr<Backend> inner_;
  std::shared_ptr<std::atomic<bool>> lost_;
};

struct TwoParts {
  int64_t dim = 8, nlist = 8, n = 3000, nq = 50, k = 5;
  std::vector<float> x = ivftest::clustered_vectors(n, dim, 32, 1);
  std::shared_ptr<std::atomic<bool>> lost = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<Backend> backend;
  StatePtr state;

  // The part at `flaky` (0 or 1) loses its device when `lost` is set.
  explicit TwoParts(ShardMode mode, int flaky = 1) {
    BuildParams p;
    p.nlist = nlist;
    p.shards = 2;
    p.shard_mode = static_cast<int64_t>(mode);
    p.num_threads = 1;
    std::vector<std::unique_ptr<Backend>> parts;
    for (int i = 0; i < 2; ++i)
      parts.push_back(std::make_unique<Flaky>(dim, p, i == flaky ? lost : std::make_shared<std::atomic<bool>>(false)));
    backend = make_sharded_backend(dim, p, std::move(parts), nullptr);
    auto s0 = backend->initial_state();
    auto s1 = backend->train(*s0, MatrixView::host_f32(x.data(), n, dim));
    state = backend->add(*s1, MatrixView::host_f32(x.data(), n, dim), nullptr, MemoryKind::Host);
  }
  std::pair<std::vector<int64_t>, std::vector<float>> search() const {
    std::vector<int64_t> ids(static_cast<std::size_t>(nq * k));
    std::vector<float> d(ids.size());
    SearchRequest r;
    r.queries = MatrixView::host_f32(x.data(), nq, dim);
    r.k = k;
    r.nprobe = 3;
    r.ids = ids.data();
    r.dists = d.data();
    backend->search(state, r);
    return {ids, d};
  }
};

}  // namespace

TEST(ShardedBackend, ALostPartFailsASplitIndex) {
  TwoParts s(ShardMode::Split);
  EXPECT_EQ(s.state->ntotal(), s.n);
  s.search();
  s.lost->store(true);
  try {
    s.search();
    FAIL() << "expected DeviceLost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::DeviceLost);
  }
}

TEST(ShardedBackend, AReplicatedIndexKeepsServingOnTheOtherPart) {
  TwoParts s(ShardMode::Replicate);
  const auto before = s.search();
  EXPECT_EQ(s.backend->info(*s.state).live_parts, 2);
  s.lost->store(true);
  const auto after = s.search();  // part 1's block fails, is answered again by part 0
  EXPECT_EQ(after.first, before.first);
  EXPECT_EQ(after.second, before.second);
  EXPECT_EQ(s.backend->info(*s.state).live_parts, 1);
  // Mutations go on with the live part.
  const float row[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t id = 424242;
  const NewState next = s.backend->add(*s.state, MatrixView::host_f32(row, 1, 8), &id, MemoryKind::Host);
  EXPECT_EQ(next->ntotal(), s.n + 1);
}

// The first part lost: the index's size and content come from the part still serving.
TEST(ShardedBackend, AReplicatedIndexSurvivesItsFirstPart) {
  TwoParts s(ShardMode::Replicate, 0);
  const auto before = s.search();
  s.lost->store(true);
  EXPECT_EQ(s.search(), before);
  const float row[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t id = 7;
  const NewState next = s.backend->add(*s.state, MatrixView::host_f32(row, 1, 8), &id, MemoryKind::Host);
  EXPECT_EQ(next->ntotal(), s.n + 1);
  EXPECT_EQ(s.backend->export_model(*next).ntotal(), s.n + 1);
}
