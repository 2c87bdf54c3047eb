// The latency path (core/cuda/small_batch.hpp: searches of at most 64 queries replayed from a
// captured CUDA graph, opt-in with IVFGPU_SEARCH_GRAPH=1) against the direct path, and
// a large host-memory batch against device-memory queries. "The
// same results" is shared/docs/results-contract.md (same_results). IVF_INFO_GRAPH_SEARCHES
// shows that the graph path really answered.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/id_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {

// The graph path is opt-in (IVFGPU_SEARCH_GRAPH=1): on for this whole program, off inside a
// DirectPath scope.
const bool graphs_on = [] { return setenv("IVFGPU_SEARCH_GRAPH", "1", 1) == 0; }();

struct DirectPath {
  DirectPath() { setenv("IVFGPU_SEARCH_GRAPH", "0", 1); }
  ~DirectPath() { setenv("IVFGPU_SEARCH_GRAPH", "1", 1); }
};

int64_t graph_searches(const ivf_index* idx) {
  int64_t v = -1;
  EXPECT_EQ(ivf_index_info(idx, IVF_INFO_GRAPH_SEARCHES, &v), IVF_OK);
  return v;
}

Searched search_raw(const ivf_index* idx, const void* q, ivf_dtype qtype, int64_t nq, int64_t dim, int64_t k,
                    int64_t nprobe) {
  Searched s;
  s.ids.assign(static_cast<std::size_t>(nq * k), -7);
  s.dists.assign(s.ids.size(), -7.0f);
  auto sp = make_params({{IVF_PARAM_NPROBE, nprobe}});
  EXPECT_EQ(ivf_search(idx, sp.get(), q, qtype, nq, dim, k, s.ids.data(), s.dists.data()), IVF_OK)
      << ivf_last_error_message();
  return s;
}

// The direct answer, then the graph's: the first graph-eligible call of a shape runs directly
// (it is captured on its second use), so the shape is searched until a replay answered it.
std::string compare_paths(const ivf_index* idx, const void* q, ivf_dtype qtype, int64_t nq, int64_t dim, int64_t k,
                          int64_t nprobe) {
  Searched direct;
  {
    DirectPath pin;
    direct = search_raw(idx, q, qtype, nq, dim, k, nprobe);
  }
  const int64_t before = graph_searches(idx);
  Searched graph;
  for (int attempt = 0; attempt < 3 && graph_searches(idx) == before; ++attempt)
    graph = search_raw(idx, q, qtype, nq, dim, k, nprobe);
  if (graph_searches(idx) == before) return "no search was answered by a graph";
  return same_results(graph.ids, graph.dists, direct.ids, direct.dists, nq, k);
}

// queries (nq x dim f32) searched with IVF_MEMORY_DEVICE: copied to the device, results back.
Searched search_device(const ivf_index* idx, const std::vector<float>& q, int64_t nq, int64_t dim, int64_t k,
                       int64_t nprobe) {
  Searched s;
  s.ids.assign(static_cast<std::size_t>(nq * k), -7);
  s.dists.assign(s.ids.size(), -7.0f);
  float* dq = nullptr;
  int64_t* dids = nullptr;
  float* dd = nullptr;
  EXPECT_EQ(cudaMalloc(&dq, sizeof(float) * nq * dim), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dids, sizeof(int64_t) * nq * k), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dd, sizeof(float) * nq * k), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dq, q.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(dids, 0xff, sizeof(int64_t) * nq * k), cudaSuccess);
  auto sp = make_params({{IVF_PARAM_NPROBE, nprobe}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  EXPECT_EQ(ivf_search(idx, sp.get(), dq, IVF_DTYPE_F32, nq, dim, k, dids, dd), IVF_OK) << ivf_last_error_message();
  EXPECT_EQ(cudaMemcpy(s.ids.data(), dids, sizeof(int64_t) * nq * k, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(s.dists.data(), dd, sizeof(float) * nq * k, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dq);
  cudaFree(dids);
  cudaFree(dd);
  return s;
}

// nq 1..64 (powers of two and the sizes between, which are padded to them), k 1..1024 (k above
// the probed rows pads), nprobe 1..nlist.
TEST(GpuLatencyPath, SameResultsAsTheDirectPathForEveryShape) {
  IVFTEST_REQUIRE_GPU();
  ASSERT_TRUE(graphs_on);
  const int64_t dim = 64, n = 60000, nlist = 128;
  const std::vector<float> x = clustered_vectors(n, dim, 40, 11);
  const std::vector<float> q = clustered_vectors(64, dim, 40, 12);
  IndexPtr idx = cuda_index_of(dim, nlist, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  for (int64_t nq : {1, 2, 3, 8, 17, 33, 64})
    for (int64_t k : {1, 10, 100, 1024})
      for (int64_t nprobe : {1, 5, 32, 128})
        ASSERT_EQ(compare_paths(idx.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, nprobe), "")
            << "nq " << nq << " k " << k << " nprobe " << nprobe;
}

// Both metrics and a compact type with its own queries (decoded inside the graph), odd dims.
TEST(GpuLatencyPath, MetricsTypesAndOddDimensions) {
  IVFTEST_REQUIRE_GPU();
  for (int64_t dim : {3, 33, 130})
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_COSINE}) {
      const std::vector<float> x = clustered_vectors(8000, dim, 20, 21 + dim);
      const std::vector<float> q = clustered_vectors(20, dim, 20, 22 + dim);
      IndexPtr idx = cuda_index_of(dim, 32, metric, IVF_DTYPE_F32, x);
      ASSERT_TRUE(idx);
      for (int64_t nq : {1, 5, 20})
        ASSERT_EQ(compare_paths(idx.get(), q.data(), IVF_DTYPE_F32, nq, dim, 10, 4), "")
            << "dim " << dim << " metric " << metric << " nq " << nq;
    }
  // uint8 rows and uint8 queries: integer arithmetic in the scan, decoding in the graph.
  const int64_t dim = 48;
  std::vector<float> x = random_vectors(10000, dim, 5);
  for (float& v : x) v = static_cast<float>(static_cast<int>((v + 1.0f) * 127.0f) & 255);
  IndexPtr idx = cuda_index_of(dim, 32, IVF_METRIC_L2, IVF_DTYPE_U8, x);
  ASSERT_TRUE(idx);
  std::vector<uint8_t> q(static_cast<std::size_t>(16 * dim));
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<uint8_t>(x[i * 7 % x.size()]);
  for (int64_t nq : {1, 16}) EXPECT_EQ(compare_paths(idx.get(), q.data(), IVF_DTYPE_U8, nq, dim, 10, 8), "");
}

// A graph is kept per published state: after an add and a remove the replay must see the new
// lists, never the arrays it was captured with.
TEST(GpuLatencyPath, MutationsAreSeenByTheNextReplay) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 32, n = 20000;
  const std::vector<float> x = clustered_vectors(n, dim, 30, 31);
  IndexPtr idx = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const std::vector<float> q(x.begin(), x.begin() + 4 * dim);  // rows 0..3: each its own nearest
  ASSERT_EQ(compare_paths(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 5, 8), "");
  // Remove rows 0..3: the replay must no longer return them.
  const std::vector<int64_t> gone = {0, 1, 2, 3};
  int64_t removed = 0;
  ASSERT_EQ(ivf_remove(idx.get(), nullptr, gone.data(), 4, &removed), IVF_OK) << ivf_last_error_message();
  ASSERT_EQ(removed, 4);
  ASSERT_EQ(compare_paths(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 5, 8), "");
  Searched after = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 5, 8);
  for (int64_t id : after.ids) EXPECT_TRUE(id < 0 || id > 3) << "a removed row was returned: " << id;
  // Add exact copies under new ids: they must come first (distance 0).
  std::vector<int64_t> fresh = {900000, 900001, 900002, 900003};
  ASSERT_EQ(ivf_add(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, fresh.data()), IVF_OK) << ivf_last_error_message();
  ASSERT_EQ(compare_paths(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 5, 8), "");
  after = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 5, 8);
  for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(after.ids[r * 5], fresh[r]) << "row " << r;
}

// Queries and results in device memory, through the graph (copies around the replay).
TEST(GpuLatencyPath, DeviceMemory) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 96, nq = 24, k = 50;
  const std::vector<float> x = clustered_vectors(30000, dim, 30, 41);
  const std::vector<float> q = clustered_vectors(nq, dim, 30, 42);
  IndexPtr idx = cuda_index_of(dim, 128, IVF_METRIC_INNER_PRODUCT, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const Searched host = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, 16);
  const int64_t before = graph_searches(idx.get());
  for (int rep = 0; rep < 3; ++rep) {
    const Searched dev = search_device(idx.get(), q, nq, dim, k, 16);
    EXPECT_EQ(same_results(dev.ids, dev.dists, host.ids, host.dists, nq, k), "") << "rep " << rep;
  }
  EXPECT_GT(graph_searches(idx.get()), before) << "no device-memory search was answered by a graph";
}

// Many threads of single queries at mixed k and nprobe: each worker captures its own graphs;
// every answer equals the query's direct answer.
TEST(GpuLatencyPath, ManyThreads) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 64, nq = 64;
  const std::vector<float> x = clustered_vectors(50000, dim, 40, 51);
  const std::vector<float> q = clustered_vectors(nq, dim, 40, 52);
  IndexPtr idx = cuda_index_of(dim, 128, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const int64_t ks[] = {1, 10, 64}, nprobes[] = {1, 16};
  std::vector<Searched> solo;
  {
    DirectPath pin;
    for (int64_t k : ks)
      for (int64_t np : nprobes)
        for (int64_t i = 0; i < nq; ++i) solo.push_back(search_raw(idx.get(), q.data() + i * dim, IVF_DTYPE_F32, 1, dim, k, np));
  }
  const int64_t before = graph_searches(idx.get());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 40; ++rep) {
        const int64_t ki = (t + rep) % 3, pi = (t / 3 + rep) % 2, i = (t * 7 + rep * 5) % nq;
        const Searched s = search_raw(idx.get(), q.data() + i * dim, IVF_DTYPE_F32, 1, dim, ks[ki], nprobes[pi]);
        const Searched& want = solo[(ki * 2 + pi) * nq + i];
        if (!same_results(s.ids, s.dists, want.ids, want.dists, 1, ks[ki]).empty()) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(graph_searches(idx.get()), before);
}

// A large host batch (the direct path, copies from pageable memory) gives the same results as the
// same queries in device memory; ivf_reset then drops the workers' graphs.
TEST(GpuLatencyPath, HostBatchEqualsDeviceBatchAndResetRecaptures) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 40, nq = 9999, k = 7;
  const std::vector<float> x = clustered_vectors(40000, dim, 30, 61);
  const std::vector<float> q = clustered_vectors(nq, dim, 30, 62);
  IndexPtr idx = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const Searched host = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, 4);
  const Searched dev = search_device(idx.get(), q, nq, dim, k, 4);
  EXPECT_EQ(same_results(host.ids, host.dists, dev.ids, dev.dists, nq, k), "");
  for (int64_t id : host.ids) ASSERT_GE(id, 0);  // every result written (no -7 left)
  // ivf_reset drops the workers' graphs and arenas (with the pool's cached blocks); an empty
  // index pads, and once filled again the graphs are captured anew.
  ASSERT_EQ(compare_paths(idx.get(), q.data(), IVF_DTYPE_F32, 3, dim, k, 4), "");
  ASSERT_EQ(ivf_reset(idx.get()), IVF_OK);
  const Searched empty = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, 3, dim, k, 4);
  for (int64_t id : empty.ids) EXPECT_EQ(id, -1);
  ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, 40000, dim, nullptr), IVF_OK);
  EXPECT_EQ(compare_paths(idx.get(), q.data(), IVF_DTYPE_F32, 3, dim, k, 4), "");
}

}  // namespace
