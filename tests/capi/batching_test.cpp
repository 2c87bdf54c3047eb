// Dynamic batching (IVF_PARAM_DYNAMIC_BATCHING): 64 threads of small searches with mixed k and
// nprobe each get exactly the answer they get alone; calls are really merged; a window of 0
// (or the option off) merges nothing. Runs on IVFTEST_BACKEND (the CPU in CI).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/id_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {

int32_t backend() {
  const char* b = std::getenv("IVFTEST_BACKEND");
  return b != nullptr && std::strcmp(b, "cuda") == 0 ? IVF_BACKEND_CUDA : IVF_BACKEND_CPU;
}

int64_t merged(const ivf_index* idx) {
  int64_t v = -1;
  EXPECT_EQ(ivf_index_info(idx, IVF_INFO_MERGED_SEARCHES, &v), IVF_OK);
  return v;
}

struct Call {
  int64_t n, k, nprobe, first;
};

}  // namespace

TEST(DynamicBatching, SixtyFourClientsGetTheirSoloAnswers) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const int64_t dim = 24, nlist = 32, nbase = 20000;
  const auto base = clustered_vectors(nbase, dim, 128, 1);
  const auto queries = clustered_vectors(4000, dim, 128, 2);
  auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_DYNAMIC_BATCHING, 1}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim, nullptr), IVF_OK);

  // Each client's calls: 1..3 queries, k from {1, 10, 37}, nprobe from {1, 4} (few shapes, so
  // calls with the same shape meet).
  constexpr int kClients = 64, kCalls = 12;
  std::vector<std::vector<Call>> calls(kClients);
  int64_t next = 0;
  for (int c = 0; c < kClients; ++c)
    for (int i = 0; i < kCalls; ++i) {
      const int64_t n = 1 + (c + i) % 3;
      calls[c].push_back(Call{n, (c % 3 == 0) ? 1 : (c % 3 == 1 ? 10 : 37), 1 + 3 * ((c + i) % 2), next % 3900});
      next += 7;
    }
  auto run = [&](const Call& call, int64_t window, std::vector<int64_t>& ids, std::vector<float>& d) {
    auto sp = make_params({{IVF_PARAM_NPROBE, call.nprobe}, {IVF_PARAM_BATCH_WINDOW_US, window}});
    ids.assign(static_cast<std::size_t>(call.n * call.k), -7);
    d.assign(ids.size(), 0.0f);
    return ivf_search(idx.get(), sp.get(), queries.data() + call.first * dim, IVF_DTYPE_F32, call.n, dim, call.k,
                      ids.data(), d.data());
  };
  // Solo answers (window 0: never merged).
  std::vector<std::vector<Searched>> solo(kClients);
  for (int c = 0; c < kClients; ++c)
    for (const Call& call : calls[c]) {
      Searched s;
      ASSERT_EQ(run(call, 0, s.ids, s.dists), IVF_OK);
      solo[c].push_back(std::move(s));
    }
  EXPECT_EQ(merged(idx.get()), 0);

  std::atomic<int> differ{0}, failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c)
    threads.emplace_back([&, c] {
      std::vector<int64_t> ids;
      std::vector<float> d;
      for (std::size_t i = 0; i < calls[c].size(); ++i) {
        if (run(calls[c][i], 5000, ids, d) != IVF_OK) {
          ++failed;
          continue;
        }
        const Call& call = calls[c][i];
        if (!same_results(ids, d, solo[c][i].ids, solo[c][i].dists, call.n, call.k).empty()) ++differ;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(differ.load(), 0);
  EXPECT_GT(merged(idx.get()), 0) << "64 clients within a 5 ms window should meet";
}

TEST(DynamicBatching, OffOrAWindowOfZeroMergesNothing) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const int64_t dim = 8, nlist = 8, nbase = 2000;
  const auto base = clustered_vectors(nbase, dim, 16, 3);
  for (int64_t option : {0, 1}) {
    auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_DYNAMIC_BATCHING, option}});
    IndexPtr idx = make_index(dim, p.get());
    ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim), IVF_OK);
    ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim, nullptr), IVF_OK);
    const int64_t window = option == 1 ? 0 : 5000;
    std::vector<std::thread> threads;
    for (int t = 0; t < 16; ++t)
      threads.emplace_back([&, t] {
        auto sp = make_params({{IVF_PARAM_BATCH_WINDOW_US, window}});
        std::vector<int64_t> ids(5);
        std::vector<float> d(5);
        for (int i = 0; i < 20; ++i)
          EXPECT_EQ(ivf_search(idx.get(), sp.get(), base.data() + (t * 20 + i) * dim, IVF_DTYPE_F32, 1, dim, 5,
                               ids.data(), d.data()),
                    IVF_OK);
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(merged(idx.get()), 0) << "option " << option << " window " << window;
  }
  int64_t lo = -1, hi = -1;
  ASSERT_EQ(ivf_param_bounds(IVF_PARAM_BATCH_WINDOW_US, &lo, &hi), IVF_OK);
  EXPECT_EQ(lo, 0);
  auto p = make_params({});
  EXPECT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_BATCH_WINDOW_US, -1), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_DYNAMIC_BATCHING, 2), IVF_ERR_INVALID_ARGUMENT);
}

// A bad call in a batch fails alone? Bad input is refused before batching (checks run first):
// a NaN query fails its own call and the others in the window still succeed.
TEST(DynamicBatching, ABadCallDoesNotFailItsNeighbours) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const int64_t dim = 8, nlist = 8, nbase = 2000;
  const auto base = clustered_vectors(nbase, dim, 16, 4);
  auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_DYNAMIC_BATCHING, 1}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim, nullptr), IVF_OK);
  std::vector<float> bad(base.begin(), base.begin() + dim);
  bad[3] = std::numeric_limits<float>::quiet_NaN();
  std::atomic<int> ok{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      auto sp = make_params({{IVF_PARAM_BATCH_WINDOW_US, 5000}});
      std::vector<int64_t> ids(5);
      std::vector<float> d(5);
      const float* q = t == 7 ? bad.data() : base.data() + t * dim;
      const ivf_status s = ivf_search(idx.get(), sp.get(), q, IVF_DTYPE_F32, 1, dim, 5, ids.data(), d.data());
      (s == IVF_OK ? ok : refused)++;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 15);
  EXPECT_EQ(refused.load(), 1);
}

// The small-batch path and the batch path agree: nq 1..64 searched alone equal the same rows
// inside one large batch, for k up to 1024 and every kind of nprobe (issue 14's latency test;
// on the GPU the small path is where launch-bound work goes).
TEST(DynamicBatching, SmallBatchesEqualTheBatchPath) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  const int64_t dim = 32, nlist = 64, nbase = 30000, nq = 64;
  const auto base = clustered_vectors(nbase, dim, 256, 5);
  const auto q = clustered_vectors(nq, dim, 256, 6);
  auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend()}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim, nullptr), IVF_OK);
  for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{100}, int64_t{1024}})
    for (int64_t nprobe : {int64_t{1}, int64_t{7}, nlist}) {
      const Searched all = search_all(idx.get(), q, nq, dim, k, nprobe);
      for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{16}, int64_t{64}}) {
        for (int64_t q0 = 0; q0 + n <= nq; q0 += std::max<int64_t>(n, 13)) {
          const std::vector<float> part(q.begin() + q0 * dim, q.begin() + (q0 + n) * dim);
          const Searched s = search_all(idx.get(), part, n, dim, k, nprobe);
          const std::vector<int64_t> ai(all.ids.begin() + q0 * k, all.ids.begin() + (q0 + n) * k);
          const std::vector<float> ad(all.dists.begin() + q0 * k, all.dists.begin() + (q0 + n) * k);
          EXPECT_EQ(same_results(s.ids, s.dists, ai, ad, n, k), "")
              << "n " << n << " from " << q0 << " k " << k << " nprobe " << nprobe;
        }
      }
    }
}

// Callers' progress callbacks while they wait in a batch (ivfgpu.h): a follower reports while
// it waits for its leader; the count of followers that have reported from inside the batch
// tells the tests when everyone has joined, whatever the machine's speed.
struct BatchReports {
  std::atomic<int> joined{0};  // followers that reported while waiting in the batch
  std::atomic<int> cancel_follower{-1};  // this follower cancels once it has joined
  std::atomic<int> leader_calls_after_cancel{0};
  bool leader_cancelled = false;
  int leader_reports = 0;
  double leader_cancelled_at = -1.0;  // the fraction of its cancelling report: < 1 while waiting
};
struct Follower {
  BatchReports* shared;
  int index;
  int reports = 0;
  double cancelled_at = -1.0;
  static int32_t fn(ivf_progress_stage, double fraction, void* user) {
    auto* f = static_cast<Follower*>(user);
    if (++f->reports == 2) f->shared->joined++;  // the first report is the call's start
    if (f->reports < 2 || f->shared->cancel_follower.load() != f->index) return 0;
    if (f->cancelled_at < 0) f->cancelled_at = fraction;
    return 1;
  }
};

struct BatchOfTwelve {
  int64_t dim = 8, nlist = 8, nbase = 4000;
  std::vector<float> base = clustered_vectors(nbase, dim, 16, 7);
  IndexPtr idx;
  BatchOfTwelve() {
    auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend()}, {IVF_PARAM_DYNAMIC_BATCHING, 1}});
    idx = make_index(dim, p.get());
    EXPECT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim), IVF_OK);
    EXPECT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim, nullptr), IVF_OK);
  }
  // Query row t, alone (no batching), for comparison.
  Searched solo(int t) const { return search_all(idx.get(), std::vector<float>(base.begin() + t * dim, base.begin() + (t + 1) * dim), 1, dim, 5, 8); }
  // One call of query row `row` with a window long enough for everyone to join.
  ivf_status search(int row, int64_t window_us, ivf_progress_fn fn, void* user, std::vector<int64_t>& ids,
                    std::vector<float>& d) const {
    auto sp = make_params({{IVF_PARAM_BATCH_WINDOW_US, window_us}});
    EXPECT_EQ(ivf_params_set_progress(sp.get(), fn, user), IVF_OK);
    ids.assign(5, -7);
    d.assign(5, 0.0f);
    return ivf_search(idx.get(), sp.get(), base.data() + row * dim, IVF_DTYPE_F32, 1, dim, 5, ids.data(), d.data());
  }
  struct Outcome {
    std::vector<Follower> followers;   // followers[t - 1]: row t's
    std::vector<ivf_status> status;    // [0]: the leader's
    std::vector<std::vector<int64_t>> ids;
    std::vector<std::vector<float>> d;
  };
  // The leader (row 0, leader_fn on `shared`, the window given) opens a batch; 20 ms later the
  // 11 followers (rows 1-11, Follower::fn, a 5 s window) join it.
  Outcome run(ivf_progress_fn leader_fn, BatchReports& shared, int64_t window_us) const {
    Outcome o;
    o.status.assign(12, IVF_ERR_INTERNAL);
    o.ids.resize(12);
    o.d.resize(12);
    for (int t = 1; t < 12; ++t) o.followers.push_back(Follower{&shared, t});
    std::thread lead([&] { o.status[0] = search(0, window_us, leader_fn, &shared, o.ids[0], o.d[0]); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the leader opens the batch first
    std::vector<std::thread> followers;
    for (int t = 1; t < 12; ++t)
      followers.emplace_back([&, t] {
        o.status[t] = search(t, 5000000, &Follower::fn, &o.followers[t - 1], o.ids[t], o.d[t]);
      });
    lead.join();
    for (auto& th : followers) th.join();
    return o;
  }
};

// A leader that cancels while its window is open fails alone: the batch closes, the callers
// who joined are answered (each as alone), and the merged search it runs for them never
// reports to it. The leader cancels only once all 11 followers have reported from inside the
// batch, so the test does not depend on the machine's speed.
TEST(DynamicBatching, ACancellingLeaderFailsAlone) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  BatchOfTwelve b;
  BatchReports shared;
  const auto leader_fn = [](ivf_progress_stage, double fraction, void* user) -> int32_t {
    auto* s = static_cast<BatchReports*>(user);
    ++s->leader_reports;
    if (s->leader_cancelled) {
      s->leader_calls_after_cancel++;
      return 1;
    }
    if (s->leader_reports > 1 && s->joined.load() == 11) {
      s->leader_cancelled = true;
      s->leader_cancelled_at = fraction;
    }
    return s->leader_cancelled ? 1 : 0;
  };
  const BatchOfTwelve::Outcome o = b.run(leader_fn, shared, 5000000);
  EXPECT_EQ(o.status[0], IVF_ERR_CANCELLED);
  EXPECT_TRUE(shared.leader_cancelled);
  EXPECT_LT(shared.leader_cancelled_at, 1.0) << "the leader cancelled while its window was open";
  EXPECT_EQ(shared.leader_calls_after_cancel.load(), 0) << "nothing reports to the leader after its cancel";
  for (int t = 1; t < 12; ++t) {
    EXPECT_EQ(o.status[t], IVF_OK) << "follower " << t;
    const Searched alone = b.solo(t);
    EXPECT_EQ(same_results(o.ids[t], o.d[t], alone.ids, alone.dists, 1, 5), "") << "follower " << t;
  }
  EXPECT_GE(merged(b.idx.get()), 12) << "the followers joined the leader's batch";
}

// A follower that cancels while it waits in a batch is answered when the batch is done (the
// leader writes its rows then, so it cannot leave earlier): IVF_ERR_CANCELLED for it, the
// answer it would get alone for everyone else.
TEST(DynamicBatching, AFollowerThatCancelsIsAnsweredAfterItsBatch) {
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU();
  BatchOfTwelve b;
  BatchReports shared;
  shared.cancel_follower = 3;
  // The leader only reports; its 1.5 s window outlasts the followers' arrival.
  const auto leader_fn = [](ivf_progress_stage, double, void*) -> int32_t { return 0; };
  const BatchOfTwelve::Outcome o = b.run(leader_fn, shared, 1500000);
  EXPECT_GE(shared.joined.load(), 11) << "every follower reported while it waited";
  for (int t = 0; t < 12; ++t) {
    if (t == 3) {
      EXPECT_EQ(o.status[t], IVF_ERR_CANCELLED);
      EXPECT_GE(o.followers[t - 1].cancelled_at, 0.0);
      EXPECT_LT(o.followers[t - 1].cancelled_at, 1.0) << "it cancelled while it waited, not at its end";
      continue;
    }
    EXPECT_EQ(o.status[t], IVF_OK) << "caller " << t;
    const Searched alone = b.solo(t);
    EXPECT_EQ(same_results(o.ids[t], o.d[t], alone.ids, alone.dists, 1, 5), "") << "caller " << t;
  }
  EXPECT_GE(merged(b.idx.get()), 12) << "the followers joined the leader's batch";
}
