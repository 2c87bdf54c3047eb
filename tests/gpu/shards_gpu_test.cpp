// Several parts on CUDA (IVF_PARAM_SHARDS): with one GPU the two parts share it, with two each
// has its own; either way results equal one part's (host or device memory, merged through
// peer copies or host memory), ids work the same, and files move between part counts. The
// CPU twin (tests/capi/shards_test.cpp) runs in CI.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "common/id_workload.hpp"
#include "common/shards_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {
// A device copy of a host vector (cudaMalloc: what most callers hold).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : n_(host.size()) {
    EXPECT_EQ(cudaMalloc(&p_, sizeof(T) * n_), cudaSuccess);
    fill(host);
  }
  ~DeviceArray() { (void)cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }
  void fill(const std::vector<T>& host) {
    EXPECT_EQ(cudaMemcpy(p_, host.data(), sizeof(T) * n_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    EXPECT_EQ(cudaMemcpy(h.data(), p_, sizeof(T) * n_, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  std::size_t n_;
  T* p_ = nullptr;
};

// One CUDA part holding base (sequential ids); trained: its file before the add.
IndexPtr trained_one_part(int64_t dim, int64_t nlist, const std::vector<float>& base, std::vector<unsigned char>& trained) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}});
  IndexPtr one = make_index(dim, p.get());
  const int64_t n = static_cast<int64_t>(base.size()) / dim;
  EXPECT_EQ(ivf_train(one.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  trained = bytes_of(one.get());
  EXPECT_EQ(ivf_add(one.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  return one;
}

IndexPtr open_as(const std::vector<unsigned char>& bytes, int64_t shards, int64_t mode) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_SHARDS, shards}, {IVF_PARAM_SHARD_MODE, mode}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_deserialize(bytes.data(), bytes.size(), p.get(), &raw), IVF_OK) << ivf_last_error_message();
  return IndexPtr(raw);
}
}  // namespace

TEST(GpuShards, SplitAndReplicatedEqualOnePart) {
  IVFTEST_REQUIRE_GPU();
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
    const int64_t dim = 64, nlist = 128, n = 100000;
    const auto base = clustered_vectors(n, dim, 4 * nlist, 1);
    const auto q = clustered_vectors(5000, dim, 4 * nlist, 2);
    auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, metric}});
    IndexPtr one = make_index(dim, p.get());
    ASSERT_EQ(ivf_train(one.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    const auto trained = bytes_of(one.get());
    IndexPtr split = open_as(trained, 2, IVF_SHARD_SPLIT), replicated = open_as(trained, 2, IVF_SHARD_REPLICATE);
    for (ivf_index* idx : {one.get(), split.get(), replicated.get()})
      ASSERT_EQ(ivf_add(idx, base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
    for (int64_t nprobe : {int64_t{1}, int64_t{16}, nlist})
      for (int64_t k : {int64_t{10}, int64_t{1000}, int64_t{4096}})
        for (int64_t nq : {int64_t{1}, int64_t{5000}}) {
          if (k == 4096 && nq > 1) continue;
          const Searched a = search_all(one.get(), q, nq, dim, k, nprobe);
          for (ivf_index* idx : {split.get(), replicated.get()}) {
            const Searched b = search_all(idx, q, nq, dim, k, nprobe);
            EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, nq, k), "")
                << "metric " << metric << " nprobe " << nprobe << " k " << k << " nq " << nq;
          }
        }
    const auto saved = bytes_of(split.get());
    IndexPtr back = open_as(saved, 1, IVF_SHARD_SPLIT);
    const Searched a = search_all(one.get(), q, 5000, dim, 10, 16), b = search_all(back.get(), q, 5000, dim, 10, 16);
    EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, 5000, 10), "");
  }
}

TEST(GpuShards, IdsWorkTheSame) {
  IVFTEST_REQUIRE_GPU();
  run_id_workload(IVF_BACKEND_CUDA, false, 200, 61, 0, 2, IVF_SHARD_SPLIT);
  run_id_workload(IVF_BACKEND_CUDA, true, 200, 62, 0, 2, IVF_SHARD_REPLICATE);
}

// Device memory lives on the first part's device: queries and results of searches (plain and
// on a caller's stream), and added rows and ids, on split and replicated indexes, equal the
// one-part index fed the same host arrays.
TEST(GpuShards, DeviceMemoryWorksOnEveryMode) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 32, nlist = 64, n = 20000, nq = 3000, k = 50;
  const auto base = clustered_vectors(n, dim, 2 * nlist, 5);
  const auto q = clustered_vectors(nq, dim, 2 * nlist, 6);
  std::vector<int64_t> ids(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = 3 * i + 7;
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}});
  IndexPtr one = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(one.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  const auto trained = bytes_of(one.get());
  ASSERT_EQ(ivf_add(one.get(), base.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK);
  const Searched want = search_all(one.get(), q, nq, dim, k, 8);

  DeviceArray<float> d_base(base), d_q(q);
  DeviceArray<int64_t> d_ids(ids), d_out_ids(std::vector<int64_t>(nq * k, -7));
  DeviceArray<float> d_out_d(std::vector<float>(nq * k, 0.0f));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (int64_t mode : {int64_t{IVF_SHARD_SPLIT}, int64_t{IVF_SHARD_REPLICATE}}) {
    IndexPtr idx = open_as(trained, 2, mode);
    auto dev = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
    ASSERT_EQ(ivf_add_ex(idx.get(), dev.get(), d_base.get(), IVF_DTYPE_F32, n, dim, d_ids.get()), IVF_OK)
        << ivf_last_error_message();
    int64_t ntotal = 0;
    ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_NTOTAL, &ntotal), IVF_OK);
    EXPECT_EQ(ntotal, n);
    for (bool on_stream : {false, true}) {
      auto sp = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}, {IVF_PARAM_NPROBE, 8}});
      if (on_stream) ASSERT_EQ(ivf_params_set_ptr(sp.get(), IVF_PARAM_CUDA_STREAM, stream), IVF_OK);
      ASSERT_EQ(ivf_search(idx.get(), sp.get(), d_q.get(), IVF_DTYPE_F32, nq, dim, k, d_out_ids.get(), d_out_d.get()),
                IVF_OK)
          << ivf_last_error_message();
      if (on_stream) ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      const std::vector<int64_t> got_ids = d_out_ids.to_host();
      const std::vector<float> got_d = d_out_d.to_host();
      EXPECT_EQ(same_results(want.ids, want.dists, got_ids, got_d, nq, k), "")
          << "mode " << mode << (on_stream ? " on a caller's stream" : "");
      d_out_ids.fill(std::vector<int64_t>(nq * k, -7));
    }
    // Host queries give the same answer.
    const Searched host = search_all(idx.get(), q, nq, dim, k, 8);
    EXPECT_EQ(same_results(want.ids, want.dists, host.ids, host.dists, nq, k), "") << "mode " << mode;
  }
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// A device-memory search that runs as blocks (a block a replica; split blocks of bounded
// gathered results: k 4096 on two parts takes 5,461 queries a block) refuses a bad query by its
// row in the whole call, and writes none of the caller's results, whichever block holds it.
TEST(GpuShards, BadDeviceQueriesAreRefusedByTheirRowInTheWholeCall) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 16, nlist = 32, n = 12000, nq = 6000, k = 4096;
  const auto base = clustered_vectors(n, dim, 2 * nlist, 13);
  std::vector<unsigned char> trained;
  const IndexPtr one = trained_one_part(dim, nlist, base, trained);
  const std::vector<int64_t> ids_before(static_cast<std::size_t>(nq * k), -7);
  const std::vector<float> dists_before(static_cast<std::size_t>(nq * k), 0.5f);
  DeviceArray<int64_t> d_ids(ids_before);
  DeviceArray<float> d_dists(dists_before);
  for (int64_t mode : {int64_t{IVF_SHARD_SPLIT}, int64_t{IVF_SHARD_REPLICATE}}) {
    IndexPtr idx = open_as(trained, 2, mode);
    ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
    for (const int64_t bad : {int64_t{2}, nq - 3}) {
      for (const float value : {std::numeric_limits<float>::quiet_NaN(), 1e20f}) {
        auto q = clustered_vectors(nq, dim, 2 * nlist, 14);
        q[static_cast<std::size_t>(bad * dim + 5)] = value;
        DeviceArray<float> d_q(q);
        auto sp = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}, {IVF_PARAM_NPROBE, 4}});
        const std::string where = "mode " + std::to_string(mode) + ", bad row " + std::to_string(bad) + " = " +
                                  std::to_string(value);
        EXPECT_EQ(ivf_search(idx.get(), sp.get(), d_q.get(), IVF_DTYPE_F32, nq, dim, k, d_ids.get(), d_dists.get()),
                  IVF_ERR_INVALID_ARGUMENT)
            << where;
        const std::string message = ivf_last_error_message();
        EXPECT_NE(message.find("query row " + std::to_string(bad) + " "), std::string::npos)
            << where << ": " << message;
        EXPECT_TRUE(d_ids.to_host() == ids_before) << where << ": ids written";
        EXPECT_TRUE(d_dists.to_host() == dists_before) << where << ": distances written";
      }
    }
  }
}

// Results reach the merging device through host memory when peer access is off (forced here:
// the route taken where devices have no peer access), and the answers are the same.
TEST(GpuShards, TheHostStagedMergeGivesTheSameResults) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 48, nlist = 128, n = 60000, nq = 2000;
  const auto base = clustered_vectors(n, dim, 2 * nlist, 11);
  const auto q = clustered_vectors(nq, dim, 2 * nlist, 12);
  std::vector<unsigned char> trained;
  const IndexPtr one = trained_one_part(dim, nlist, base, trained);
  IndexPtr peer = open_as(trained, 2, IVF_SHARD_SPLIT);
  ASSERT_EQ(setenv("IVFGPU_DISABLE_PEER_ACCESS", "1", 1), 0);
  IndexPtr staged = open_as(trained, 2, IVF_SHARD_SPLIT);
  ASSERT_EQ(unsetenv("IVFGPU_DISABLE_PEER_ACCESS"), 0);
  int64_t peer_merge = -1, devices[2] = {-1, -1};
  ASSERT_EQ(ivf_index_info(staged.get(), IVF_INFO_PEER_MERGE, &peer_merge), IVF_OK);
  EXPECT_EQ(peer_merge, 0);
  ASSERT_EQ(ivf_index_info(peer.get(), IVF_INFO_PART_DEVICE(0), &devices[0]), IVF_OK);
  ASSERT_EQ(ivf_index_info(peer.get(), IVF_INFO_PART_DEVICE(1), &devices[1]), IVF_OK);
  ASSERT_EQ(ivf_index_info(peer.get(), IVF_INFO_PEER_MERGE, &peer_merge), IVF_OK);
  std::printf("parts on devices %lld and %lld; peer merge %lld\n", static_cast<long long>(devices[0]),
              static_cast<long long>(devices[1]), static_cast<long long>(peer_merge));
  for (ivf_index* idx : {peer.get(), staged.get()})
    ASSERT_EQ(ivf_add(idx, base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK) << ivf_last_error_message();
  for (int64_t k : {int64_t{1}, int64_t{100}, int64_t{2048}}) {
    const Searched a = search_all(one.get(), q, nq, dim, k, 16);
    for (ivf_index* idx : {peer.get(), staged.get()}) {
      const Searched b = search_all(idx, q, nq, dim, k, 16);
      EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, nq, k), "") << "k " << k;
    }
  }
  int64_t merge_ns = 0;
  ASSERT_EQ(ivf_index_info(staged.get(), IVF_INFO_MERGE_NANOSECONDS, &merge_ns), IVF_OK);
  EXPECT_GT(merge_ns, 0);
}

// 70,000 queries in one call (several gather blocks at k 4096), a file of one part opened on
// two and the reverse, and each part's device and memory reported.
TEST(GpuShards, LargeBatchesFilesBothWaysAndPartInfo) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 16, nlist = 256, n = 200000, nq = 70000;
  const auto base = clustered_vectors(n, dim, 2 * nlist, 21);
  const auto q = clustered_vectors(nq, dim, 2 * nlist, 22);
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, IVF_METRIC_INNER_PRODUCT}});
  IndexPtr one = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(one.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(one.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  IndexPtr two = open_as(bytes_of(one.get()), 2, IVF_SHARD_SPLIT);  // one part's file on two
  IndexPtr back = open_as(bytes_of(two.get()), 1, IVF_SHARD_SPLIT);  // and back
  for (int64_t k : {int64_t{10}, int64_t{4096}}) {
    const int64_t rows = k == 10 ? nq : 3000;  // 3000 x 4096 results: over one gather block
    const Searched a = search_all(one.get(), q, rows, dim, k, 4);
    for (ivf_index* idx : {two.get(), back.get()}) {
      const Searched b = search_all(idx, q, rows, dim, k, 4);
      EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, rows, k), "") << "k " << k << " nq " << rows;
    }
  }
  int32_t gpus = 0;
  ASSERT_EQ(ivf_cuda_device_count(&gpus), IVF_OK);
  int64_t total = 0, sum = 0, dev = -1, bytes = 0;
  ASSERT_EQ(ivf_index_info(two.get(), IVF_INFO_DEVICE_MEMORY_BYTES, &total), IVF_OK);
  for (int64_t part = 0; part < 2; ++part) {
    ASSERT_EQ(ivf_index_info(two.get(), IVF_INFO_PART_DEVICE(part), &dev), IVF_OK);
    EXPECT_EQ(dev, part % gpus);
    ASSERT_EQ(ivf_index_info(two.get(), IVF_INFO_PART_DEVICE_MEMORY_BYTES(part), &bytes), IVF_OK);
    EXPECT_GT(bytes, 0);
    sum += bytes;
  }
  EXPECT_EQ(sum, total);
  EXPECT_EQ(ivf_index_info(two.get(), IVF_INFO_PART_DEVICE(2), &dev), IVF_ERR_INVALID_ARGUMENT);
  // The k = 4096 searches gathered hundreds of MB of results; a reset hands the exchange's
  // cached blocks back with the parts' (a chunk or two per pool may stay).
  int64_t cached = -1;
  ASSERT_EQ(ivf_index_info(two.get(), IVF_INFO_POOL_BYTES, &cached), IVF_OK);
  EXPECT_GT(cached, int64_t{256} << 20);
  ASSERT_EQ(ivf_reset(two.get()), IVF_OK);
  ASSERT_EQ(ivf_index_info(two.get(), IVF_INFO_POOL_BYTES, &cached), IVF_OK);
  EXPECT_LE(cached, int64_t{128} << 20) << "the pools kept " << cached << " bytes after a reset";
}

// IVF_PARAM_SHARD_DEVICE places parts: two parts on one device (results stay there), and with
// two GPUs the parts in reverse order (the merge runs on device 1); results equal one part's.
TEST(GpuShards, ShardDeviceKeysPlaceParts) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 24, nlist = 64, n = 30000, nq = 500, k = 20;
  const auto base = clustered_vectors(n, dim, 2 * nlist, 41);
  const auto q = clustered_vectors(nq, dim, 2 * nlist, 42);
  std::vector<unsigned char> trained;
  const IndexPtr one = trained_one_part(dim, nlist, base, trained);
  const Searched want = search_all(one.get(), q, nq, dim, k, 8);
  int32_t gpus = 0;
  ASSERT_EQ(ivf_cuda_device_count(&gpus), IVF_OK);
  std::vector<std::vector<int64_t>> placements = {{0, 0}};
  if (gpus > 1) placements.push_back({1, 0});
  for (const auto& place : placements) {
    auto op = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_SHARDS, 2},
                           {IVF_PARAM_SHARD_DEVICE(0), place[0]}, {IVF_PARAM_SHARD_DEVICE(1), place[1]}});
    ivf_index* raw = nullptr;
    ASSERT_EQ(ivf_deserialize(trained.data(), trained.size(), op.get(), &raw), IVF_OK) << ivf_last_error_message();
    IndexPtr idx(raw);
    ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
    int64_t d0 = -1, d1 = -1, peer = -1;
    ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_PART_DEVICE(0), &d0), IVF_OK);
    ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_PART_DEVICE(1), &d1), IVF_OK);
    ASSERT_EQ(ivf_index_info(idx.get(), IVF_INFO_PEER_MERGE, &peer), IVF_OK);
    EXPECT_EQ(d0, place[0]);
    EXPECT_EQ(d1, place[1]);
    if (place[0] == place[1]) EXPECT_EQ(peer, 0);
    const Searched got = search_all(idx.get(), q, nq, dim, k, 8);
    EXPECT_EQ(same_results(want.ids, want.dists, got.ids, got.dists, nq, k), "")
        << "parts on " << place[0] << " and " << place[1];
  }
}

// Concurrency: 16 threads on a replicated index, and on a split one (their exchange of
// queries and results between devices), equal a serial replay.
TEST(GpuShards, SixteenThreadsEqualASerialReplay) {
  IVFTEST_REQUIRE_GPU();
  sixteen_threads_equal_a_serial_replay(IVF_BACKEND_CUDA, IVF_SHARD_REPLICATE);
  sixteen_threads_equal_a_serial_replay(IVF_BACKEND_CUDA, IVF_SHARD_SPLIT);
}

// Filters and device budgets pass through the exchange (more than 64 queries): a filtered
// search of two split parts, unbudgeted and with each part's lists in its host tier, equals
// the one-part search of only the permitted rows.
TEST(GpuShards, FiltersAndBudgetsWorkThroughTheExchange) {
  IVFTEST_REQUIRE_GPU();
  run_filter_workload(IVF_BACKEND_CUDA, 40000, 32, 64, 300, 20, {0.02, 0.5}, true, 0, 2);
  run_filter_workload(IVF_BACKEND_CUDA, 40000, 32, 64, 300, 20, {0.3}, false, int64_t{256} << 20, 2);
}
