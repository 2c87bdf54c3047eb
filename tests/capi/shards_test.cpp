// One index over several parts (IVF_PARAM_SHARDS) on the CPU backend, so CI covers the
// placement, merge, save/load and id logic the GPU parts share: sharded and replicated results
// equal one part's (the results contract), for both metrics, k up to 4096, nprobe up to nlist;
// ids work the same; a file written by G parts opens on any number; 16 threads equal a serial
// replay. (A lost part is covered by the engine test with a failing part.)
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/id_workload.hpp"
#include "common/shards_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {

IndexPtr open_as(const std::vector<unsigned char>& bytes, int64_t shards, int64_t mode) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_SHARDS, shards}, {IVF_PARAM_SHARD_MODE, mode}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_deserialize(bytes.data(), bytes.size(), p.get(), &raw), IVF_OK) << ivf_last_error_message();
  return IndexPtr(raw);
}

int64_t info(const ivf_index* idx, ivf_info_key key) {
  int64_t v = -1;
  EXPECT_EQ(ivf_index_info(idx, key, &v), IVF_OK);
  return v;
}

}  // namespace

TEST(Shards, SplitAndReplicatedEqualOnePart) {
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
    const int64_t dim = 20, nlist = 32, n = 12000;
    const auto base = clustered_vectors(n, dim, 4 * nlist, 1);
    const auto more = clustered_vectors(n / 2, dim, 4 * nlist, 2);
    const auto q = clustered_vectors(600, dim, 4 * nlist, 3);
    auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, metric}});
    IndexPtr one = make_index(dim, p.get());
    ASSERT_EQ(ivf_train(one.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    const auto trained = bytes_of(one.get());
    std::vector<IndexPtr> many;
    many.push_back(open_as(trained, 2, IVF_SHARD_SPLIT));
    many.push_back(open_as(trained, 3, IVF_SHARD_SPLIT));
    many.push_back(open_as(trained, 2, IVF_SHARD_REPLICATE));
    for (ivf_index* idx : {one.get(), many[0].get(), many[1].get(), many[2].get()}) {
      ASSERT_EQ(ivf_add(idx, base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
      ASSERT_EQ(ivf_add(idx, more.data(), IVF_DTYPE_F32, n / 2, dim, nullptr), IVF_OK);
    }
    EXPECT_EQ(info(many[1].get(), IVF_INFO_SHARDS), 3);
    EXPECT_EQ(info(many[1].get(), IVF_INFO_NTOTAL), n + n / 2);
    EXPECT_EQ(info(many[2].get(), IVF_INFO_NTOTAL), n + n / 2);
    for (int64_t nprobe : {int64_t{1}, int64_t{7}, nlist})
      for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{500}, int64_t{4096}})
        for (int64_t nq : {int64_t{1}, int64_t{600}}) {
          if (k == 4096 && nq > 1 && nprobe < nlist) continue;
          const Searched a = search_all(one.get(), q, nq, dim, k, nprobe);
          for (std::size_t m = 0; m < many.size(); ++m) {
            const Searched b = search_all(many[m].get(), q, nq, dim, k, nprobe);
            EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, nq, k), "")
                << "metric " << metric << " index " << m << " nprobe " << nprobe << " k " << k << " nq " << nq;
          }
        }
    // Sharded parts hold about 1/G of every list: the rows were dealt in turn.
    // A file written by 3 parts opens on 1 and on 2 with the same results.
    const auto saved = bytes_of(many[1].get());
    IndexPtr back1 = open_as(saved, 1, IVF_SHARD_SPLIT), back2 = open_as(saved, 2, IVF_SHARD_REPLICATE);
    const Searched a = search_all(one.get(), q, 600, dim, 20, 5);
    for (ivf_index* idx : {back1.get(), back2.get()}) {
      const Searched b = search_all(idx, q, 600, dim, 20, 5);
      EXPECT_EQ(same_results(a.ids, a.dists, b.ids, b.dists, 600, 20), "");
    }
  }
}

TEST(Shards, IdsWorkTheSameSplit) { run_id_workload(IVF_BACKEND_CPU, false, 500, 51, 0, 2, IVF_SHARD_SPLIT); }
TEST(Shards, UniqueIdsWorkTheSameSplit) { run_id_workload(IVF_BACKEND_CPU, true, 500, 52, 0, 3, IVF_SHARD_SPLIT); }
TEST(Shards, IdsWorkTheSameReplicated) { run_id_workload(IVF_BACKEND_CPU, false, 500, 53, 0, 2, IVF_SHARD_REPLICATE); }

TEST(Shards, SixteenThreadsOnAReplicatedIndexEqualASerialReplay) {
  sixteen_threads_equal_a_serial_replay(IVF_BACKEND_CPU, IVF_SHARD_REPLICATE);
}

TEST(Shards, BadKeysAndDeviceMemoryAreRefused) {
  auto p = make_params({});
  EXPECT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_SHARDS, 0), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_SHARD_MODE, 2), IVF_ERR_INVALID_ARGUMENT);
  int64_t lo = 0, hi = 0;
  ASSERT_EQ(ivf_param_bounds(IVF_PARAM_SHARDS, &lo, &hi), IVF_OK);
  EXPECT_EQ(lo, 1);
  // One part is a plain index.
  auto one = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NLIST, 4}, {IVF_PARAM_SHARDS, 1}});
  IndexPtr idx = make_index(8, one.get());
  EXPECT_EQ(info(idx.get(), IVF_INFO_SHARDS), 1);
  EXPECT_EQ(info(idx.get(), IVF_INFO_LIVE_SHARDS), 1);
}

// The merge's cost and the parts' placement are reported: merge time grows with split searches
// (replicas do not merge), no peer copies on the CPU, each part's device (-1) and memory, and
// per-part keys beyond the parts or past the key ranges are refused.
TEST(Shards, MergeTimeAndPartsAreReported) {
  const int64_t dim = 16, nlist = 16, n = 4000, nq = 200, k = 10;
  const auto base = clustered_vectors(n, dim, 2 * nlist, 31);
  const auto q = clustered_vectors(nq, dim, 2 * nlist, 32);
  for (int64_t mode : {int64_t{IVF_SHARD_SPLIT}, int64_t{IVF_SHARD_REPLICATE}}) {
    auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_SHARDS, 3},
                          {IVF_PARAM_SHARD_MODE, mode}});
    IndexPtr idx = make_index(dim, p.get());
    ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
    EXPECT_EQ(info(idx.get(), IVF_INFO_MERGE_NANOSECONDS), 0);
    (void)search_all(idx.get(), q, nq, dim, k, 4);
    if (mode == IVF_SHARD_SPLIT)
      EXPECT_GT(info(idx.get(), IVF_INFO_MERGE_NANOSECONDS), 0);
    else
      EXPECT_EQ(info(idx.get(), IVF_INFO_MERGE_NANOSECONDS), 0);
    EXPECT_EQ(info(idx.get(), IVF_INFO_PEER_MERGE), 0);
    for (int64_t part = 0; part < 3; ++part) {
      EXPECT_EQ(info(idx.get(), IVF_INFO_PART_DEVICE(part)), -1);
      EXPECT_EQ(info(idx.get(), IVF_INFO_PART_DEVICE_MEMORY_BYTES(part)), 0);
    }
    int64_t v = 0;
    EXPECT_EQ(ivf_index_info(idx.get(), IVF_INFO_PART_DEVICE(3), &v), IVF_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ivf_index_info(idx.get(), IVF_INFO_PART_DEVICE_MEMORY_BYTES(3), &v), IVF_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(ivf_index_info(idx.get(), IVF_INFO_PART_DEVICE_MEMORY_BYTES(4096), &v), IVF_ERR_UNSUPPORTED);
    EXPECT_EQ(ivf_index_info(idx.get(), 4095, &v), IVF_ERR_UNSUPPORTED);
  }
  // One part answers for itself.
  auto one = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NLIST, 4}});
  IndexPtr plain = make_index(8, one.get());
  EXPECT_EQ(info(plain.get(), IVF_INFO_PART_DEVICE(0)), -1);
  EXPECT_EQ(info(plain.get(), IVF_INFO_MERGE_NANOSECONDS), 0);
  int64_t v = 0;
  EXPECT_EQ(ivf_index_info(plain.get(), IVF_INFO_PART_DEVICE(1), &v), IVF_ERR_INVALID_ARGUMENT);
}

// IVF_PARAM_SHARD_DEVICE(part): set, read back, bounded; on the CPU backend the parts stay on
// the CPU whatever devices are named; with AUTO and a device that does not exist every part
// runs on the CPU, with CUDA the index is refused.
TEST(Shards, ShardDeviceKeysPlaceParts) {
  auto p = make_params({{IVF_PARAM_SHARDS, 3}});
  int64_t v = 7, lo = 0, hi = 0;
  ASSERT_EQ(ivf_params_get_int(p.get(), IVF_PARAM_SHARD_DEVICE(2), &v), IVF_OK);
  EXPECT_EQ(v, -1);
  ASSERT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_SHARD_DEVICE(2), 0), IVF_OK);
  ASSERT_EQ(ivf_params_get_int(p.get(), IVF_PARAM_SHARD_DEVICE(2), &v), IVF_OK);
  EXPECT_EQ(v, 0);
  ASSERT_EQ(ivf_params_get_int(p.get(), IVF_PARAM_SHARD_DEVICE(1), &v), IVF_OK);
  EXPECT_EQ(v, -1);
  ASSERT_EQ(ivf_param_bounds(IVF_PARAM_SHARD_DEVICE(1023), &lo, &hi), IVF_OK);
  EXPECT_EQ(lo, -1);
  EXPECT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_SHARD_DEVICE(0), -2), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_SHARD_DEVICE(0), hi + 1), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_SHARD_DEVICE(1024), 0), IVF_ERR_UNSUPPORTED);

  const int64_t dim = 8;
  auto cpu = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CPU}, {IVF_PARAM_NLIST, 4}, {IVF_PARAM_SHARDS, 2},
                          {IVF_PARAM_SHARD_DEVICE(0), 0}, {IVF_PARAM_SHARD_DEVICE(1), 0}});
  IndexPtr idx = make_index(dim, cpu.get());
  EXPECT_EQ(info(idx.get(), IVF_INFO_PART_DEVICE(0)), -1);
  EXPECT_EQ(info(idx.get(), IVF_INFO_PART_DEVICE(1)), -1);

  int32_t gpus = 0;
  ASSERT_EQ(ivf_cuda_device_count(&gpus), IVF_OK);
  const int64_t missing = std::min<int64_t>(gpus + 3, hi);  // a device this machine lacks
  auto autop = make_params({{IVF_PARAM_NLIST, 4}, {IVF_PARAM_SHARDS, 2}, {IVF_PARAM_SHARD_DEVICE(1), missing}});
  IndexPtr fallback = make_index(dim, autop.get());
  EXPECT_EQ(info(fallback.get(), IVF_INFO_BACKEND), IVF_BACKEND_CPU);
  EXPECT_EQ(info(fallback.get(), IVF_INFO_PART_DEVICE(0)), -1);
  auto cuda = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, 4}, {IVF_PARAM_SHARDS, 2},
                           {IVF_PARAM_SHARD_DEVICE(1), missing}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_create(&raw, dim, cuda.get()), IVF_ERR_UNSUPPORTED);
  EXPECT_EQ(raw, nullptr);
}

// Filters reach every part: a filtered split search equals the one-part search of only the
// permitted rows.
TEST(Shards, FiltersWorkOnSplitParts) {
  run_filter_workload(IVF_BACKEND_CPU, 6000, 12, 16, 100, 10, {0.05, 0.6}, true, 0, 3);
}
