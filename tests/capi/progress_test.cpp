// Progress and cancellation (ivf_params_set_progress): the callback is called on the calling
// thread from 0 to 1 without going back; any non-zero return cancels with IVF_ERR_CANCELLED and
// the index exactly as it was, at the first call, half way, at 99% and at the last call; a load
// that is cancelled returns no handle; a search is cancelled by another thread through the
// callback. Runs on the backend given by IVFTEST_BACKEND (CPU in CI).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/id_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {

// Every step of the library's loops calls the callback (not only every ~50 ms), so that a
// cancel asked for at a fraction lands at the first step that reaches it, whatever the speed of
// the machine. Set before main, before the library reads it.
[[maybe_unused]] const bool every_step = [] { return setenv("IVFGPU_PROGRESS_EVERY_MS", "0", 1) == 0; }();

int32_t backend() {
  const char* b = std::getenv("IVFTEST_BACKEND");
  return b != nullptr && std::strcmp(b, "cuda") == 0 ? IVF_BACKEND_CUDA : IVF_BACKEND_CPU;
}

struct Recorder {
  std::vector<std::pair<int32_t, double>> calls;
  std::thread::id thread = std::this_thread::get_id();
  bool other_thread = false;
  // Cancel (return `code`) at the first call whose fraction reaches cancel_from (timing
  // decides how many calls a run makes; the fractions 0 and 1 are always reported).
  double cancel_from = 2.0;
  int32_t code = 1;
  double cancelled_at = -1.0;  // the fraction of the call that cancelled
  static int32_t fn(ivf_progress_stage stage, double fraction, void* user) {
    auto* r = static_cast<Recorder*>(user);
    if (std::this_thread::get_id() != r->thread) r->other_thread = true;
    r->calls.emplace_back(stage, fraction);
    if (fraction < r->cancel_from) return 0;
    r->cancelled_at = fraction;
    return r->code;
  }
};

// Where a cancel asked for at `at` landed: at the first step that reached it. Half way it must
// land before the end (the loops report between 50% and 100%), so the work really stopped
// part-way; at 99% it may land at the last call.
void expect_cancelled_at(const Recorder& r, double at) {
  EXPECT_GE(r.cancelled_at, at) << "cancel from " << at;
  EXPECT_LE(r.cancelled_at, 1.0) << "cancel from " << at;
  if (at > 0.0 && at <= 0.5) EXPECT_LT(r.cancelled_at, 1.0) << "a cancel half way landed at the end";
}

ParamsPtr params_with(Recorder& r) {
  auto p = make_params({});
  EXPECT_EQ(ivf_params_set_progress(p.get(), &Recorder::fn, &r), IVF_OK);
  return p;
}

void expect_well_formed(const Recorder& r, ivf_progress_stage stage) {
  ASSERT_GE(r.calls.size(), 2u);
  EXPECT_FALSE(r.other_thread);
  EXPECT_EQ(r.calls.front().second, 0.0);
  EXPECT_EQ(r.calls.back().second, 1.0);
  for (std::size_t i = 0; i < r.calls.size(); ++i) {
    EXPECT_EQ(r.calls[i].first, stage);
    if (i > 0) EXPECT_GE(r.calls[i].second, r.calls[i - 1].second);
  }
}

struct Fixture {
  int64_t dim = 16, nlist = 64, n = 60000;
  std::vector<float> x = clustered_vectors(n, dim, 256, 3);
  IndexPtr make() const {
    auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_KMEANS_ITERS, 20}});
    return make_index(dim, p.get());
  }
  // Trained and holding every row.
  IndexPtr filled() const {
    IndexPtr idx = make();
    EXPECT_EQ(ivf_train(idx.get(), x.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    EXPECT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
    return idx;
  }
};

int64_t version(const ivf_index* idx) {
  int64_t v = -1;
  EXPECT_EQ(ivf_index_info(idx, IVF_INFO_STATE_VERSION, &v), IVF_OK);
  return v;
}

}  // namespace

TEST(Progress, TrainAddSearchAndLoadReportFromZeroToOne) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  Fixture f;
  IndexPtr idx = f.make();
  Recorder t;
  ASSERT_EQ(ivf_train_ex(idx.get(), params_with(t).get(), f.x.data(), IVF_DTYPE_F32, f.n, f.dim), IVF_OK);
  expect_well_formed(t, IVF_PROGRESS_TRAIN);
  Recorder a;
  ASSERT_EQ(ivf_add_ex(idx.get(), params_with(a).get(), f.x.data(), IVF_DTYPE_F32, f.n, f.dim, nullptr), IVF_OK);
  expect_well_formed(a, IVF_PROGRESS_ADD);
  Recorder s;
  std::vector<int64_t> ids(100 * 10);
  std::vector<float> d(ids.size());
  ASSERT_EQ(ivf_search(idx.get(), params_with(s).get(), f.x.data(), IVF_DTYPE_F32, 100, f.dim, 10, ids.data(), d.data()),
            IVF_OK);
  expect_well_formed(s, IVF_PROGRESS_SEARCH);
  const auto bytes = bytes_of(idx.get());
  Recorder l;
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), params_with(l).get(), &raw), IVF_OK);
  IndexPtr loaded(raw);
  expect_well_formed(l, IVF_PROGRESS_LOAD);
  // Clearing the callback: no more calls.
  auto p = params_with(l);
  ASSERT_EQ(ivf_params_set_progress(p.get(), nullptr, &l), IVF_OK);
  const std::size_t before = l.calls.size();
  ASSERT_EQ(ivf_search(idx.get(), p.get(), f.x.data(), IVF_DTYPE_F32, 100, f.dim, 10, ids.data(), d.data()), IVF_OK);
  EXPECT_EQ(l.calls.size(), before);
  EXPECT_EQ(ivf_params_set_progress(nullptr, &Recorder::fn, nullptr), IVF_ERR_INVALID_ARGUMENT);
}

// Cancel at the first call, half way, at 99% and at the last call (fraction 1) of a train and an
// add: the call returns IVF_ERR_CANCELLED and the index is the one before it (version, content,
// results).
TEST(Progress, CancelLeavesTheIndexExactlyAsItWas) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  Fixture f;
  IndexPtr idx = f.make();
  for (double at : {0.0, 0.5, 0.99, 1.0}) {
    Recorder r;
    r.cancel_from = at;
    EXPECT_EQ(ivf_train_ex(idx.get(), params_with(r).get(), f.x.data(), IVF_DTYPE_F32, f.n, f.dim), IVF_ERR_CANCELLED)
        << "cancel from " << at;
    expect_cancelled_at(r, at);
    EXPECT_NE(std::string(ivf_last_error_message()).find("cancelled"), std::string::npos);
    EXPECT_EQ(version(idx.get()), 0);
    int64_t trained = -1;
    ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_IS_TRAINED, &trained), IVF_OK);
    EXPECT_EQ(trained, 0);
  }
  ASSERT_EQ(ivf_train(idx.get(), f.x.data(), IVF_DTYPE_F32, f.n, f.dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), f.x.data(), IVF_DTYPE_F32, f.n / 2, f.dim, nullptr), IVF_OK);
  const auto before = bytes_of(idx.get());
  const Searched base = search_all(idx.get(), f.x, 50, f.dim, 10, 8);
  for (double at : {0.0, 0.5, 0.99, 1.0}) {
    Recorder r;
    r.cancel_from = at;
    const int64_t v = version(idx.get());
    EXPECT_EQ(ivf_add_ex(idx.get(), params_with(r).get(), f.x.data(), IVF_DTYPE_F32, f.n, f.dim, nullptr),
              IVF_ERR_CANCELLED);
    expect_cancelled_at(r, at);
    EXPECT_EQ(version(idx.get()), v);
    EXPECT_EQ(bytes_of(idx.get()), before) << "cancel from " << at;
    const Searched again = search_all(idx.get(), f.x, 50, f.dim, 10, 8);
    EXPECT_EQ(again.ids, base.ids);
  }
}

// Any non-zero return cancels, whatever the value.
TEST(Progress, GarbageReturnCodesCancel) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  Fixture f;
  IndexPtr idx = f.make();
  ASSERT_EQ(ivf_train(idx.get(), f.x.data(), IVF_DTYPE_F32, f.n, f.dim), IVF_OK);
  for (int32_t code : {-1, 2, 0x7fffffff, static_cast<int32_t>(0x80000000u)}) {
    Recorder r;
    r.cancel_from = 0.0;
    r.code = code;
    EXPECT_EQ(ivf_add_ex(idx.get(), params_with(r).get(), f.x.data(), IVF_DTYPE_F32, 1000, f.dim, nullptr),
              IVF_ERR_CANCELLED)
        << code;
    int64_t n = -1;
    ASSERT_EQ(ivf_ntotal(idx.get(), &n), IVF_OK);
    EXPECT_EQ(n, 0);
  }
  EXPECT_STREQ(ivf_status_string(IVF_ERR_CANCELLED), "cancelled");
}

TEST(Progress, ACancelledLoadReturnsNoHandle) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  Fixture f;
  IndexPtr idx = f.filled();
  const std::string path = ::testing::TempDir() + "progress_load.ivf";
  ASSERT_EQ(ivf_save(idx.get(), path.c_str()), IVF_OK);
  ivf_index* raw = nullptr;
  for (double at : {0.0, 0.5, 0.99, 1.0}) {
    Recorder r;
    r.cancel_from = at;
    raw = reinterpret_cast<ivf_index*>(0x1);
    EXPECT_EQ(ivf_load(path.c_str(), params_with(r).get(), &raw), IVF_ERR_CANCELLED) << "cancel from " << at;
    expect_cancelled_at(r, at);
    EXPECT_EQ(raw, reinterpret_cast<ivf_index*>(0x1)) << "no handle is written";
  }
  std::remove(path.c_str());
}

TEST(Progress, ACancelledSearchSaysSo) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  Fixture f;
  IndexPtr idx = f.filled();
  Recorder r;
  r.cancel_from = 0.0;
  std::vector<int64_t> ids(f.n * 5);
  std::vector<float> d(ids.size());
  EXPECT_EQ(ivf_search(idx.get(), params_with(r).get(), f.x.data(), IVF_DTYPE_F32, f.n, f.dim, 5, ids.data(), d.data()),
            IVF_ERR_CANCELLED);
  // The index still serves.
  EXPECT_EQ(ivf_search(idx.get(), nullptr, f.x.data(), IVF_DTYPE_F32, 10, f.dim, 5, ids.data(), d.data()), IVF_OK);
}

// Another thread cancels a running search: the callback returns what that thread decided. The
// search's second report (its first step past the start) waits until the other thread has
// decided, so the cancel lands inside the search on every machine. The call returns
// IVF_ERR_CANCELLED, and the index still serves the same results as before.
TEST(Progress, AnotherThreadCancelsARunningSearch) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  Fixture f;
  IndexPtr idx = f.filled();
  const Searched base = search_all(idx.get(), f.x, 50, f.dim, 10, 8);

  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    int calls = 0;
    bool decided = false;
    std::atomic<int32_t> stop{0};
    std::thread::id searcher;
    bool wrong_thread = false;
    double fraction_when_stopped = -1.0;
    static int32_t fn(ivf_progress_stage, double fraction, void* user) {
      auto* s = static_cast<Shared*>(user);
      std::unique_lock<std::mutex> lock(s->m);
      if (std::this_thread::get_id() != s->searcher) s->wrong_thread = true;
      if (++s->calls == 2) {
        s->cv.notify_all();
        s->cv.wait(lock, [&] { return s->decided; });
      }
      const int32_t r = s->stop.load();
      if (r != 0 && s->fraction_when_stopped < 0) s->fraction_when_stopped = fraction;
      return r;
    }
  } shared;
  auto p = make_params({{IVF_PARAM_NPROBE, 8}});
  ASSERT_EQ(ivf_params_set_progress(p.get(), &Shared::fn, &shared), IVF_OK);
  std::vector<int64_t> ids(static_cast<std::size_t>(f.n) * 10, -7);
  std::vector<float> d(ids.size());
  ivf_status status = IVF_OK;
  std::thread searcher([&] {
    shared.searcher = std::this_thread::get_id();
    status = ivf_search(idx.get(), p.get(), f.x.data(), IVF_DTYPE_F32, f.n, f.dim, 10, ids.data(), d.data());
  });
  {
    std::unique_lock<std::mutex> lock(shared.m);
    shared.cv.wait(lock, [&] { return shared.calls >= 2; });
    shared.stop = 1;  // this thread's decision
    shared.decided = true;
    shared.cv.notify_all();
  }
  searcher.join();
  EXPECT_EQ(status, IVF_ERR_CANCELLED);
  EXPECT_FALSE(shared.wrong_thread) << "the callback runs on the searching thread only";
  EXPECT_GE(shared.fraction_when_stopped, 0.0);
  EXPECT_LT(shared.fraction_when_stopped, 1.0) << "the cancel landed inside the search";
  const Searched again = search_all(idx.get(), f.x, 50, f.dim, 10, 8);
  EXPECT_EQ(again.ids, base.ids);
  EXPECT_EQ(again.dists, base.dists);
}
