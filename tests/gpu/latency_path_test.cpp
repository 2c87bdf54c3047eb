// The latency path (core/cuda/small_batch.hpp) against the direct batch pipeline: the fused
// small-batch kernels (fused_search.hpp, on by default up to 64 queries and 512 probes;
// IVFGPU_FUSED_MAX_ROWS sets the limit, 0 turns them off) and searches of at most 64 queries
// replayed from a captured CUDA graph (opt-in with IVFGPU_SEARCH_GRAPH=1); and a large
// host-memory batch against device-memory queries. "The same results" is
// shared/docs/results-contract.md (same_results). IVF_INFO_FUSED_SEARCHES and
// IVF_INFO_GRAPH_SEARCHES show that the path under test really answered.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "common/id_workload.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {

enum class Path { Direct, Graph, Fused };

const char* path_name(Path p) { return p == Path::Direct ? "direct" : p == Path::Graph ? "graph" : "fused"; }

// Pins the path for this process while alive (the library reads both variables at every call).
struct PathScope {
  explicit PathScope(Path p) {
    setenv("IVFGPU_SEARCH_GRAPH", p == Path::Graph ? "1" : "0", 1);
    setenv("IVFGPU_FUSED_MAX_ROWS", p == Path::Fused ? "64" : "0", 1);
  }
  ~PathScope() {
    unsetenv("IVFGPU_SEARCH_GRAPH");
    unsetenv("IVFGPU_FUSED_MAX_ROWS");
  }
};

int64_t info_of(const ivf_index* idx, int32_t key) {
  int64_t v = -1;
  EXPECT_EQ(ivf_index_info(idx, key, &v), IVF_OK);
  return v;
}
int64_t graph_searches(const ivf_index* idx) { return info_of(idx, IVF_INFO_GRAPH_SEARCHES); }
int64_t fused_searches(const ivf_index* idx) { return info_of(idx, IVF_INFO_FUSED_SEARCHES); }
int64_t answered_by(const ivf_index* idx, Path p) {
  return p == Path::Graph ? graph_searches(idx) : p == Path::Fused ? fused_searches(idx) : 0;
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

Searched search_direct(const ivf_index* idx, const void* q, ivf_dtype qtype, int64_t nq, int64_t dim, int64_t k,
                       int64_t nprobe) {
  PathScope pin(Path::Direct);
  return search_raw(idx, q, qtype, nq, dim, k, nprobe);
}

// Graphs need the stream-ordered pool (small_batch.hpp): with IVFGPU_DISABLE_MEMPOOL set (the
// memcheck runs) the graph path cannot answer, and a call pinned to it is served by the direct
// path, whose results are still compared.
bool graph_path_possible() { return std::getenv("IVFGPU_DISABLE_MEMPOOL") == nullptr; }

// The direct answer, then the path's: a graph is captured on a shape's second use, so the
// shape is searched until the path's counter moved.
std::string compare_paths(const ivf_index* idx, Path path, const void* q, ivf_dtype qtype, int64_t nq, int64_t dim,
                          int64_t k, int64_t nprobe) {
  const Searched direct = search_direct(idx, q, qtype, nq, dim, k, nprobe);
  PathScope pin(path);
  const int64_t before = answered_by(idx, path);
  Searched got;
  for (int attempt = 0; attempt < 3 && answered_by(idx, path) == before; ++attempt)
    got = search_raw(idx, q, qtype, nq, dim, k, nprobe);
  const bool must_answer = path != Path::Graph || graph_path_possible();
  if (must_answer && answered_by(idx, path) == before)
    return std::string("no search was answered by the ") + path_name(path) + " path";
  return same_results(got.ids, got.dists, direct.ids, direct.dists, nq, k);
}

const Path kLatencyPaths[] = {Path::Fused, Path::Graph};

// Rows of small integers (|v| < 2048, exact in every type) in a storage type's own encoding.
std::vector<unsigned char> encode_rows(const std::vector<float>& x, ivf_dtype t) {
  std::vector<unsigned char> out;
  for (float v : x) {
    if (t == IVF_DTYPE_U8 || t == IVF_DTYPE_I8) {
      out.push_back(static_cast<unsigned char>(static_cast<int>(v)));
      continue;
    }
    uint16_t bits = 0;
    if (t == IVF_DTYPE_BF16) {
      uint32_t u = 0;
      std::memcpy(&u, &v, 4);
      bits = static_cast<uint16_t>(u >> 16);  // exact: small integers have no low mantissa bits
    } else if (v != 0.0f) {
      int e = 0;
      const float m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
      bits = static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | ((e - 1 + 15) << 10) |
                                   static_cast<int>((m * 2.0f - 1.0f) * 1024.0f));
    }
    out.push_back(static_cast<unsigned char>(bits & 0xff));
    out.push_back(static_cast<unsigned char>(bits >> 8));
  }
  return out;
}

// n elements of T in device memory, freed on scope exit (also when an ASSERT returns early).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) {
    EXPECT_EQ(cudaMalloc(&p_, sizeof(T) * std::max<std::size_t>(n, 1)), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return p_; }

 private:
  T* p_ = nullptr;
};

// A device-memory search's arguments: nq x dim f32 queries (room for any query type) and nq x k
// results.
struct DeviceSearchArgs {
  DeviceSearchArgs(int64_t nq, int64_t dim, int64_t k)
      : queries(static_cast<std::size_t>(nq * dim)), ids(static_cast<std::size_t>(nq * k)),
        dists(static_cast<std::size_t>(nq * k)) {}
  DeviceArray<float> queries;
  DeviceArray<int64_t> ids;
  DeviceArray<float> dists;
};

// Queries already in device memory (nq x dim of qtype, at dq) searched with IVF_MEMORY_DEVICE
// into device results (cleared to all ones first), copied back.
Searched search_device_queries(const ivf_index* idx, const void* dq, ivf_dtype qtype, int64_t nq, int64_t dim,
                               int64_t k, int64_t nprobe) {
  Searched s;
  s.ids.assign(static_cast<std::size_t>(nq * k), -7);
  s.dists.assign(s.ids.size(), -7.0f);
  const DeviceArray<int64_t> dids(s.ids.size());
  const DeviceArray<float> dd(s.ids.size());
  EXPECT_EQ(cudaMemset(dids.get(), 0xff, sizeof(int64_t) * nq * k), cudaSuccess);
  auto sp = make_params({{IVF_PARAM_NPROBE, nprobe}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  EXPECT_EQ(ivf_search(idx, sp.get(), dq, qtype, nq, dim, k, dids.get(), dd.get()), IVF_OK)
      << ivf_last_error_message();
  EXPECT_EQ(cudaMemcpy(s.ids.data(), dids.get(), sizeof(int64_t) * nq * k, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(s.dists.data(), dd.get(), sizeof(float) * nq * k, cudaMemcpyDeviceToHost), cudaSuccess);
  return s;
}

// queries (nq x dim f32) searched with IVF_MEMORY_DEVICE: copied to the device, results back.
Searched search_device(const ivf_index* idx, const std::vector<float>& q, int64_t nq, int64_t dim, int64_t k,
                       int64_t nprobe) {
  const DeviceArray<float> dq(static_cast<std::size_t>(nq * dim));
  EXPECT_EQ(cudaMemcpy(dq.get(), q.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
  return search_device_queries(idx, dq.get(), IVF_DTYPE_F32, nq, dim, k, nprobe);
}

// nq 1..64 (powers of two and the sizes between, which graphs pad to them), k 1..1024 (k above
// the probed rows pads), nprobe 1..nlist, on both latency paths.
TEST(GpuLatencyPath, SameResultsAsTheDirectPathForEveryShape) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 64, n = 60000, nlist = 128;
  const std::vector<float> x = clustered_vectors(n, dim, 40, 11);
  const std::vector<float> q = clustered_vectors(64, dim, 40, 12);
  IndexPtr idx = cuda_index_of(dim, nlist, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  for (Path path : kLatencyPaths)
    for (int64_t nq : {1, 2, 3, 8, 17, 33, 64})
      for (int64_t k : {1, 10, 100, 1024})
        for (int64_t nprobe : {1, 5, 32, 40, 64, 128})
          ASSERT_EQ(compare_paths(idx.get(), path, q.data(), IVF_DTYPE_F32, nq, dim, k, nprobe), "")
              << path_name(path) << " nq " << nq << " k " << k << " nprobe " << nprobe;
}

// Every metric and storage type, queries in f32 and in the storage type, odd dimensions.
TEST(GpuLatencyPath, MetricsTypesAndOddDimensions) {
  IVFTEST_REQUIRE_GPU();
  for (int64_t dim : {3, 33, 130})
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_COSINE}) {
      const std::vector<float> x = clustered_vectors(8000, dim, 20, 21 + dim);
      const std::vector<float> q = clustered_vectors(20, dim, 20, 22 + dim);
      IndexPtr idx = cuda_index_of(dim, 32, metric, IVF_DTYPE_F32, x);
      ASSERT_TRUE(idx);
      for (Path path : kLatencyPaths)
        for (int64_t nq : {1, 5, 20})
          ASSERT_EQ(compare_paths(idx.get(), path, q.data(), IVF_DTYPE_F32, nq, dim, 10, 4), "")
              << path_name(path) << " dim " << dim << " metric " << metric << " nq " << nq;
    }
  // Integer rows: uint8 and int8 queries keep integer arithmetic (exact sums), f32 queries are
  // decoded floats; f16 and bf16 rows with f32 queries and their own.
  const int64_t dim = 48;
  std::vector<float> xi = random_vectors(10000, dim, 5);
  for (float& v : xi) v = static_cast<float>(static_cast<int>((v + 1.0f) * 127.0f) & 255);
  std::vector<float> xs(xi);
  for (float& v : xs) v -= 128.0f;
  const struct {
    ivf_dtype type;
    const std::vector<float>* rows;
  } cases[] = {{IVF_DTYPE_U8, &xi}, {IVF_DTYPE_I8, &xs}, {IVF_DTYPE_F16, &xs}, {IVF_DTYPE_BF16, &xs}};
  for (const auto& c : cases)
    for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
      IndexPtr idx = cuda_index_of(dim, 32, metric, c.type, *c.rows);
      ASSERT_TRUE(idx);
      const std::vector<float> qf(c.rows->begin(), c.rows->begin() + 16 * dim);
      const std::vector<unsigned char> native = encode_rows(qf, c.type);
      for (Path path : kLatencyPaths)
        for (int64_t nq : {1, 16}) {
          EXPECT_EQ(compare_paths(idx.get(), path, native.data(), c.type, nq, dim, 10, 8), "")
              << path_name(path) << " type " << c.type << " metric " << metric << " native queries nq " << nq;
          EXPECT_EQ(compare_paths(idx.get(), path, qf.data(), IVF_DTYPE_F32, nq, dim, 10, 8), "")
              << path_name(path) << " type " << c.type << " metric " << metric << " f32 queries nq " << nq;
        }
    }
}

// A state's lists are read afresh by every search: after an add and a remove the next answer
// (a graph replay or the fused kernels) sees the new lists.
TEST(GpuLatencyPath, MutationsAreSeenByTheNextSearch) {
  IVFTEST_REQUIRE_GPU();
  for (Path path : kLatencyPaths) {
    const int64_t dim = 32, n = 20000;
    const std::vector<float> x = clustered_vectors(n, dim, 30, 31);
    IndexPtr idx = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
    ASSERT_TRUE(idx);
    const std::vector<float> q(x.begin(), x.begin() + 4 * dim);  // rows 0..3: each its own nearest
    ASSERT_EQ(compare_paths(idx.get(), path, q.data(), IVF_DTYPE_F32, 4, dim, 5, 8), "") << path_name(path);
    // Remove rows 0..3: the path must no longer return them.
    const std::vector<int64_t> gone = {0, 1, 2, 3};
    int64_t removed = 0;
    ASSERT_EQ(ivf_remove(idx.get(), nullptr, gone.data(), 4, &removed), IVF_OK) << ivf_last_error_message();
    ASSERT_EQ(removed, 4);
    ASSERT_EQ(compare_paths(idx.get(), path, q.data(), IVF_DTYPE_F32, 4, dim, 5, 8), "") << path_name(path);
    {
      PathScope pin(path);
      const Searched after = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 5, 8);
      for (int64_t id : after.ids) EXPECT_TRUE(id < 0 || id > 3) << path_name(path) << ": a removed row was returned: " << id;
    }
    // Add exact copies under new ids: they must come first (distance 0).
    std::vector<int64_t> fresh = {900000, 900001, 900002, 900003};
    ASSERT_EQ(ivf_add(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, fresh.data()), IVF_OK) << ivf_last_error_message();
    ASSERT_EQ(compare_paths(idx.get(), path, q.data(), IVF_DTYPE_F32, 4, dim, 5, 8), "") << path_name(path);
    PathScope pin(path);
    const Searched after = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 5, 8);
    for (int64_t r = 0; r < 4; ++r) EXPECT_EQ(after.ids[r * 5], fresh[r]) << path_name(path) << " row " << r;
  }
}

// The fused kernels' own edges: many centroid slices (nlist 1000 and 4096, with nprobe at the
// 4096-entry probe merge), nprobe = nlist, long lists and k = 1024 (the candidate buffer fills
// and is cut many times), exact duplicates across tiles (ties), dims 1 and 2048 (the largest it
// takes) and 2049 (the batch pipeline takes it, same answer), k past the index (padding).
TEST(GpuLatencyPath, FusedKernelEdges) {
  IVFTEST_REQUIRE_GPU();
  {
    const int64_t dim = 16;
    const std::vector<float> x = clustered_vectors(60000, dim, 500, 71);
    const std::vector<float> q = clustered_vectors(16, dim, 500, 72);
    for (int64_t nlist : {1000, 4096}) {
      IndexPtr idx = cuda_index_of(dim, nlist, IVF_METRIC_L2, IVF_DTYPE_F32, x);
      ASSERT_TRUE(idx);
      for (int64_t nprobe : {1, 17, 256})
        for (int64_t k : {1, 64, 1024})
          ASSERT_EQ(compare_paths(idx.get(), Path::Fused, q.data(), IVF_DTYPE_F32, 16, dim, k, nprobe), "")
              << "nlist " << nlist << " nprobe " << nprobe << " k " << k;
    }
  }
  {
    // 300 points x 40 copies: every distance ties 40 ways, across tiles and lists.
    const int64_t dim = 8;
    const std::vector<float> base = random_vectors(300, dim, 73);
    std::vector<float> x;
    for (int c = 0; c < 40; ++c) x.insert(x.end(), base.begin(), base.end());
    IndexPtr idx = cuda_index_of(dim, 200, IVF_METRIC_L2, IVF_DTYPE_F32, x);
    ASSERT_TRUE(idx);
    const std::vector<float> q(base.begin(), base.begin() + 8 * dim);
    for (int64_t k : {1, 39, 40, 41, 200, 1024})
      for (int64_t nprobe : {1, 8, 200})
        ASSERT_EQ(compare_paths(idx.get(), Path::Fused, q.data(), IVF_DTYPE_F32, 8, dim, k, nprobe), "")
            << "duplicates k " << k << " nprobe " << nprobe;
  }
  for (int64_t dim : {1, 2048, 2049}) {
    const std::vector<float> x = clustered_vectors(3000, dim, 20, 74);
    const std::vector<float> q = clustered_vectors(4, dim, 20, 75);
    IndexPtr idx = cuda_index_of(dim, 16, IVF_METRIC_INNER_PRODUCT, IVF_DTYPE_F32, x);
    ASSERT_TRUE(idx);
    if (dim <= 2048) {
      ASSERT_EQ(compare_paths(idx.get(), Path::Fused, q.data(), IVF_DTYPE_F32, 4, dim, 10, 4), "") << "dim " << dim;
      continue;
    }
    const Searched direct = search_direct(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 10, 4);
    PathScope pin(Path::Fused);
    const int64_t before = fused_searches(idx.get());
    const Searched got = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, 4, dim, 10, 4);
    EXPECT_EQ(fused_searches(idx.get()), before) << "dim 2049 is past the fused kernels' limit";
    EXPECT_EQ(same_results(got.ids, got.dists, direct.ids, direct.dists, 4, 10), "");
  }
  {
    const int64_t dim = 12;
    const std::vector<float> x = random_vectors(50, dim, 76);
    IndexPtr idx = cuda_index_of(dim, 4, IVF_METRIC_L2, IVF_DTYPE_F32, x);
    ASSERT_TRUE(idx);
    ASSERT_EQ(compare_paths(idx.get(), Path::Fused, x.data(), IVF_DTYPE_F32, 3, dim, 100, 2), "");
    PathScope pin(Path::Fused);
    const Searched s = search_raw(idx.get(), x.data(), IVF_DTYPE_F32, 1, dim, 100, 4);
    EXPECT_EQ(s.ids[49] >= 0, true) << "all 50 rows are probed at nprobe = nlist";
    EXPECT_EQ(s.ids[50], -1) << "past the rows: padding";
  }
}

// With the card nearly full (2 MiB left), a small search still succeeds with the same results:
// the fused path's arena comes from the pool's cached blocks, or, when none can be had, the
// batch path (which halves its chunks to fit) serves the call. The run says which answered.
TEST(GpuLatencyPath, ANearlyFullDeviceStillAnswersSmallSearches) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 32, nq = 16, k = 1024, nprobe = 64;
  const std::vector<float> x = clustered_vectors(40000, dim, 30, 81);
  const std::vector<float> q = clustered_vectors(nq, dim, 30, 82);
  IndexPtr idx = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const Searched direct = search_direct(idx.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, nprobe);
  ASSERT_EQ(ivf_reset(idx.get()), IVF_OK);  // drops the pool's cached blocks with the lists
  ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, 40000, dim, nullptr), IVF_OK);
  std::vector<void*> filler;
  std::size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  std::size_t to_take = free_b > (std::size_t{2} << 20) ? free_b - (std::size_t{2} << 20) : 0;
  while (to_take > (std::size_t{1} << 20)) {
    const std::size_t piece = std::min<std::size_t>(to_take, std::size_t{1} << 30);
    void* p = nullptr;
    if (cudaMalloc(&p, piece) != cudaSuccess) {
      (void)cudaGetLastError();
      if (piece <= (std::size_t{1} << 20)) break;
      to_take = piece / 2;
      continue;
    }
    filler.push_back(p);
    to_take -= piece;
  }
  Searched got;
  ivf_status status = IVF_OK;
  {
    PathScope pin(Path::Fused);
    got.ids.assign(static_cast<std::size_t>(nq * k), -7);
    got.dists.assign(got.ids.size(), -7.0f);
    auto sp = make_params({{IVF_PARAM_NPROBE, nprobe}});
    status = ivf_search(idx.get(), sp.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, got.ids.data(), got.dists.data());
  }
  const std::string message = ivf_last_error_message();
  for (void* p : filler) cudaFree(p);
  ASSERT_EQ(status, IVF_OK) << message;
  EXPECT_EQ(same_results(got.ids, got.dists, direct.ids, direct.dists, nq, k), "");
  std::printf("nearly full device: answered by the %s path\n", fused_searches(idx.get()) > 0 ? "fused" : "batch");
}

// Queries and results in device memory: around a graph replay, and written by the fused
// kernels in place.
TEST(GpuLatencyPath, DeviceMemory) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 96, nq = 24, k = 50;
  const std::vector<float> x = clustered_vectors(30000, dim, 30, 41);
  const std::vector<float> q = clustered_vectors(nq, dim, 30, 42);
  IndexPtr idx = cuda_index_of(dim, 128, IVF_METRIC_INNER_PRODUCT, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const Searched host = search_direct(idx.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, 16);
  for (Path path : kLatencyPaths) {
    PathScope pin(path);
    const int64_t before = answered_by(idx.get(), path);
    for (int rep = 0; rep < 3; ++rep) {
      const Searched dev = search_device(idx.get(), q, nq, dim, k, 16);
      EXPECT_EQ(same_results(dev.ids, dev.dists, host.ids, host.dists, nq, k), "") << path_name(path) << " rep " << rep;
    }
    EXPECT_GT(answered_by(idx.get(), path), before)
        << "no device-memory search was answered by the " << path_name(path) << " path";
  }
}

// 16 threads of single queries at mixed k and nprobe: each worker keeps its own graphs, arena
// and counters; every answer equals the query's direct answer.
TEST(GpuLatencyPath, ManyThreads) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 64, nq = 64;
  const std::vector<float> x = clustered_vectors(50000, dim, 40, 51);
  const std::vector<float> q = clustered_vectors(nq, dim, 40, 52);
  IndexPtr idx = cuda_index_of(dim, 128, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const int64_t ks[] = {1, 10, 64}, nprobes[] = {1, 16};
  std::vector<Searched> solo;
  for (int64_t k : ks)
    for (int64_t np : nprobes)
      for (int64_t i = 0; i < nq; ++i)
        solo.push_back(search_direct(idx.get(), q.data() + i * dim, IVF_DTYPE_F32, 1, dim, k, np));
  for (Path path : kLatencyPaths) {
    PathScope pin(path);  // set before the threads start: they only read the environment
    const int64_t before = answered_by(idx.get(), path);
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
    EXPECT_EQ(bad.load(), 0) << path_name(path);
    EXPECT_GT(answered_by(idx.get(), path), before) << path_name(path);
  }
}

// A large host batch (the direct path, copies from pageable memory) gives the same results as the
// same queries in device memory; ivf_reset then drops the workers' graphs and arenas, an empty
// index pads, and once filled again both paths answer again.
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
  for (Path path : kLatencyPaths)
    ASSERT_EQ(compare_paths(idx.get(), path, q.data(), IVF_DTYPE_F32, 3, dim, k, 4), "") << path_name(path);
  ASSERT_EQ(ivf_reset(idx.get()), IVF_OK);
  for (Path path : kLatencyPaths) {
    PathScope pin(path);
    const Searched empty = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, 3, dim, k, 4);
    for (int64_t id : empty.ids) EXPECT_EQ(id, -1) << path_name(path);
  }
  ASSERT_EQ(ivf_add(idx.get(), x.data(), IVF_DTYPE_F32, 40000, dim, nullptr), IVF_OK);
  for (Path path : kLatencyPaths)
    EXPECT_EQ(compare_paths(idx.get(), path, q.data(), IVF_DTYPE_F32, 3, dim, k, 4), "") << path_name(path);
}

// The first nq rows of q with `bad` written into two of them: rows nq / 2 (returned in
// *first, the row a refusal must name) and nq - 1.
std::vector<float> with_two_bad_rows(const std::vector<float>& q, int64_t nq, int64_t dim, float bad, int64_t* first) {
  std::vector<float> qb(q.begin(), q.begin() + nq * dim);
  *first = nq / 2;
  qb[(nq - 1) * dim + 3] = bad;
  qb[*first * dim + dim - 1] = bad;
  return qb;
}

// Host queries no distance is defined for are refused at every batch size, naming the first such
// row, with the output buffers untouched: batches past the small-batch paths are checked while
// their first chunk runs on the GPU (search.hpp, run_search_checks_queries_late), the small ones
// before any work.
TEST(GpuLatencyPath, BadHostQueriesAreRefusedWithoutWritingAtEveryBatchSize) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 40, k = 5, nmax = 5000;
  const std::vector<float> x = clustered_vectors(20000, dim, 30, 71);
  const std::vector<float> q = clustered_vectors(nmax, dim, 30, 72);
  IndexPtr l2 = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  IndexPtr cosine = cuda_index_of(dim, 64, IVF_METRIC_COSINE, IVF_DTYPE_F32, x);
  ASSERT_TRUE(l2 && cosine);
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity(), huge = 1e19f;
  for (int64_t nq : {int64_t{1}, int64_t{16}, int64_t{64}, int64_t{65}, int64_t{3000}, nmax}) {
    for (float bad : {nan, -inf, huge}) {
      // Two bad rows: the call names the first. A huge row is refused under L2 only.
      int64_t first = 0;
      const std::vector<float> qb = with_two_bad_rows(q, nq, dim, bad, &first);
      std::vector<int64_t> ids(static_cast<std::size_t>(nq * k), -7);
      std::vector<float> dists(ids.size(), -7.0f);
      const ivf_status st = ivf_search(l2.get(), nullptr, qb.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data());
      ASSERT_EQ(st, IVF_ERR_INVALID_ARGUMENT) << "nq " << nq << " value " << bad;
      const std::string msg = ivf_last_error_message();
      EXPECT_NE(msg.find("search: query row " + std::to_string(first) + " "), std::string::npos) << msg;
      EXPECT_TRUE(std::all_of(ids.begin(), ids.end(), [](int64_t v) { return v == -7; })) << "nq " << nq;
      EXPECT_TRUE(std::all_of(dists.begin(), dists.end(), [](float v) { return v == -7.0f; })) << "nq " << nq;
      const ivf_status cst =
          ivf_search(cosine.get(), nullptr, qb.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data());
      EXPECT_EQ(cst, bad == huge ? IVF_OK : IVF_ERR_INVALID_ARGUMENT) << "cosine nq " << nq << ": " << ivf_last_error_message();
    }
    // The same queries, clean, still search (nothing was left behind by the refusals).
    const Searched ok = search_raw(l2.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, 4);
    for (int64_t id : ok.ids) ASSERT_GE(id, 0);
  }
}

// Device-memory queries get the host's check on the device: NaN, Inf and (L2, inner product) a
// norm past the bound are refused before any work, naming the first bad row, with the device
// output buffers untouched, at every batch size (the fused path and the pipeline), for f32 and
// bf16 queries (checked decoded); cosine accepts the huge row. An asynchronous call is not
// checked (ivfgpu.h).
TEST(GpuLatencyPath, BadDeviceQueriesAreRefusedWithoutWriting) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 40, k = 5, nmax = 3000;
  const std::vector<float> x = clustered_vectors(20000, dim, 30, 81);
  const std::vector<float> q = clustered_vectors(nmax, dim, 30, 82);
  IndexPtr l2 = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  IndexPtr cosine = cuda_index_of(dim, 64, IVF_METRIC_COSINE, IVF_DTYPE_F32, x);
  IndexPtr half = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_BF16, x);
  ASSERT_TRUE(l2 && cosine && half);
  const DeviceSearchArgs args(nmax, dim, k);
  float* dq = args.queries.get();
  int64_t* dids = args.ids.get();
  float* dd = args.dists.get();
  auto dev = make_params({{IVF_PARAM_NPROBE, 4}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  const auto untouched = [&](int64_t nq) {
    std::vector<unsigned char> ids(sizeof(int64_t) * nq * k), dists(sizeof(float) * nq * k);
    EXPECT_EQ(cudaMemcpy(ids.data(), dids, ids.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(dists.data(), dd, dists.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return std::all_of(ids.begin(), ids.end(), [](unsigned char b) { return b == 0xab; }) &&
           std::all_of(dists.begin(), dists.end(), [](unsigned char b) { return b == 0xab; });
  };
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity(), huge = 1e19f;
  for (int64_t nq : {int64_t{1}, int64_t{16}, int64_t{65}, nmax}) {
    for (float bad : {nan, -inf, huge}) {
      int64_t first = 0;
      const std::vector<float> qb = with_two_bad_rows(q, nq, dim, bad, &first);
      ASSERT_EQ(cudaMemcpy(dq, qb.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(dids, 0xab, sizeof(int64_t) * nq * k), cudaSuccess);
      ASSERT_EQ(cudaMemset(dd, 0xab, sizeof(float) * nq * k), cudaSuccess);
      const ivf_status st = ivf_search(l2.get(), dev.get(), dq, IVF_DTYPE_F32, nq, dim, k, dids, dd);
      ASSERT_EQ(st, IVF_ERR_INVALID_ARGUMENT) << "nq " << nq << " value " << bad;
      const std::string msg = ivf_last_error_message();
      EXPECT_NE(msg.find("search: query row " + std::to_string(first) + " "), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::isnan(bad) || std::isinf(bad) ? "NaN or Inf" : "squared norm"), std::string::npos) << msg;
      EXPECT_TRUE(untouched(nq)) << "nq " << nq << " value " << bad;
      const ivf_status cst = ivf_search(cosine.get(), dev.get(), dq, IVF_DTYPE_F32, nq, dim, k, dids, dd);
      EXPECT_EQ(cst, bad == huge ? IVF_OK : IVF_ERR_INVALID_ARGUMENT) << "cosine nq " << nq << ": " << ivf_last_error_message();
      // The same rows as bf16 queries (the f32 bits' upper half: NaN, Inf and 1e19 survive)
      // against a bf16 index.
      std::vector<unsigned char> h;
      for (float v : qb) {
        uint32_t u = 0;
        std::memcpy(&u, &v, 4);
        h.push_back(static_cast<unsigned char>((u >> 16) & 0xff));
        h.push_back(static_cast<unsigned char>(u >> 24));
      }
      ASSERT_EQ(cudaMemcpy(dq, h.data(), h.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(dids, 0xab, sizeof(int64_t) * nq * k), cudaSuccess);
      ASSERT_EQ(cudaMemset(dd, 0xab, sizeof(float) * nq * k), cudaSuccess);
      EXPECT_EQ(ivf_search(half.get(), dev.get(), dq, IVF_DTYPE_BF16, nq, dim, k, dids, dd), IVF_ERR_INVALID_ARGUMENT)
          << "bf16 nq " << nq;
      EXPECT_NE(std::string(ivf_last_error_message()).find("search: query row " + std::to_string(first) + " "),
                std::string::npos)
          << ivf_last_error_message();
      EXPECT_TRUE(untouched(nq)) << "bf16 nq " << nq;
    }
    // Clean queries search, and every result is written.
    ASSERT_EQ(cudaMemcpy(dq, q.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(ivf_search(l2.get(), dev.get(), dq, IVF_DTYPE_F32, nq, dim, k, dids, dd), IVF_OK) << ivf_last_error_message();
    std::vector<int64_t> ids(static_cast<std::size_t>(nq * k));
    ASSERT_EQ(cudaMemcpy(ids.data(), dids, sizeof(int64_t) * ids.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int64_t id : ids) ASSERT_GE(id, 0);
  }
  // Asynchronous: not checked, so the call is accepted (its results are unspecified).
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  std::vector<float> qb(q.begin(), q.begin() + 16 * dim);
  qb[3] = nan;
  ASSERT_EQ(cudaMemcpy(dq, qb.data(), sizeof(float) * 16 * dim, cudaMemcpyHostToDevice), cudaSuccess);
  auto async = make_params({{IVF_PARAM_NPROBE, 4}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  ASSERT_EQ(ivf_params_set_ptr(async.get(), IVF_PARAM_CUDA_STREAM, s), IVF_OK);
  EXPECT_EQ(ivf_search(l2.get(), async.get(), dq, IVF_DTYPE_F32, 16, dim, k, dids, dd), IVF_OK) << ivf_last_error_message();
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
}

// The device check reads a row's elements in their own type, 32 rows by 32 dimensions at a time
// (core/cuda/rows.cu): a NaN or an Inf in the last dimension of the last row, past every whole
// chunk of rows and of dimensions, is refused by its row at every dimension class, for f32 and
// f16 queries, in batches taken by the deferred check (100, 3,001 queries) and the separate one
// (16, on the direct path), and the same batch without it is answered.
TEST(GpuLatencyPath, DeviceQueryCheckReadsEveryElementOfOddShapes) {
  IVFTEST_REQUIRE_GPU();
  const int64_t k = 4, nmax = 3001;
  for (int64_t dim : {int64_t{1}, int64_t{31}, int64_t{33}, int64_t{129}}) {
    const std::vector<float> x = clustered_vectors(3000, dim, 20, 90 + dim);
    const std::vector<float> q = clustered_vectors(nmax, dim, 20, 91 + dim);
    for (ivf_dtype type : {IVF_DTYPE_F32, IVF_DTYPE_F16}) {
      IndexPtr idx = cuda_index_of(dim, 16, IVF_METRIC_L2, type, x);
      ASSERT_TRUE(idx);
      const DeviceSearchArgs args(nmax, dim, k);
      auto dev = make_params({{IVF_PARAM_NPROBE, 4}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
      const std::size_t esize = type == IVF_DTYPE_F16 ? 2 : 4;
      const auto upload = [&](const std::vector<float>& v) {  // as `type`
        std::vector<unsigned char> b(v.size() * esize);
        for (std::size_t i = 0; i < v.size(); ++i) {
          if (type == IVF_DTYPE_F16) {
            const __half_raw h = __float2half_rn(v[i]);
            std::memcpy(b.data() + 2 * i, &h.x, 2);
          } else {
            std::memcpy(b.data() + 4 * i, &v[i], 4);
          }
        }
        return cudaMemcpy(args.queries.get(), b.data(), b.size(), cudaMemcpyHostToDevice);
      };
      for (int64_t nq : {int64_t{16}, int64_t{100}, nmax}) {
        const PathScope scope(Path::Direct);
        for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
          std::vector<float> qb(q.begin(), q.begin() + nq * dim);
          qb[nq * dim - 1] = bad;
          const std::string what = "dim " + std::to_string(dim) + " " + (type == IVF_DTYPE_F16 ? "f16" : "f32") +
                                   " nq " + std::to_string(nq) + " value " + std::to_string(bad);
          ASSERT_EQ(upload(qb), cudaSuccess);
          EXPECT_EQ(ivf_search(idx.get(), dev.get(), args.queries.get(), type, nq, dim, k, args.ids.get(),
                               args.dists.get()),
                    IVF_ERR_INVALID_ARGUMENT)
              << what;
          EXPECT_NE(std::string(ivf_last_error_message()).find("search: query row " + std::to_string(nq - 1) + " "),
                    std::string::npos)
              << what << ": " << ivf_last_error_message();
        }
        ASSERT_EQ(upload(std::vector<float>(q.begin(), q.begin() + nq * dim)), cudaSuccess);
        EXPECT_EQ(ivf_search(idx.get(), dev.get(), args.queries.get(), type, nq, dim, k, args.ids.get(),
                             args.dists.get()),
                  IVF_OK)
            << "dim " << dim << " nq " << nq << ": " << ivf_last_error_message();
      }
    }
  }
}

// The device check refuses exactly the rows the host check refuses, on every small-batch path:
// rows one float step either side of the norm bound in the host's summation order (rounded
// multiplies and adds, dimension by dimension), where a sum in another order can land on the
// other side. Refused calls write nothing; accepted ones are answered by the path named.
TEST(GpuLatencyPath, DeviceQueryCheckAgreesWithTheHostAtTheNormBound) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 40, kmax = 100, nq = 16;
  const std::vector<float> x = clustered_vectors(20000, dim, 30, 83);
  const std::vector<float> q = clustered_vectors(nq, dim, 30, 84);
  IndexPtr l2 = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(l2);
  const float bound = 3.4028235e38f / 8;  // kMaxSquaredNorm (core/vector_ops.hpp)
  const auto host_order_sum = [&](const float* r) {
    float s = 0.0f;
    for (int64_t j = 0; j < dim; ++j) {
      volatile float sq = r[j] * r[j];  // rounded apart from the add: no contraction
      s = s + sq;
    }
    return s;
  };
  // Uneven values scaled by f: the last f whose row passes and the first that does not.
  std::vector<double> shape(static_cast<std::size_t>(dim));
  double norm = 0.0;
  for (int64_t j = 0; j < dim; ++j) {
    shape[j] = 1.0 + 0.5 * std::sin(1.3 * static_cast<double>(j));
    norm += shape[j] * shape[j];
  }
  const double scale = std::sqrt(static_cast<double>(bound) / norm);
  const auto row_at = [&](double f) {
    std::vector<float> r(static_cast<std::size_t>(dim));
    for (int64_t j = 0; j < dim; ++j) r[j] = static_cast<float>(shape[j] * scale * f);
    return r;
  };
  std::vector<float> below, above;
  for (double f = 1.0 - 2e-5; f < 1.0 + 2e-5; f += 2e-8) {
    std::vector<float> r = row_at(f);
    if (host_order_sum(r.data()) <= bound) {
      below = r;
    } else {
      above = r;
      break;
    }
  }
  ASSERT_FALSE(below.empty());
  ASSERT_FALSE(above.empty());

  const DeviceSearchArgs args(nq, dim, kmax);
  float* dq = args.queries.get();
  int64_t* dids = args.ids.get();
  float* dd = args.dists.get();
  auto dev = make_params({{IVF_PARAM_NPROBE, 4}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  auto host = make_params({{IVF_PARAM_NPROBE, 4}});
  int64_t k = 0;
  const auto untouched = [&](int64_t n) {
    std::vector<unsigned char> b(sizeof(int64_t) * n * k);
    EXPECT_EQ(cudaMemcpy(b.data(), dids, b.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    return std::all_of(b.begin(), b.end(), [](unsigned char c) { return c == 0xab; });
  };
  // Batches of 1 (the row alone) and of 16 (the row at 9, the passing row also at 3); k 5 and
  // 100 take the fused path's two merges.
  for (Path path : {Path::Fused, Path::Direct, Path::Graph}) {
    const PathScope scope(path);
    for (int rep = 0; rep < 6; ++rep) {  // the graph path captures a shape on its second use
      k = rep % 2 == 0 ? 5 : kmax;
      for (int64_t n : {int64_t{1}, nq}) {
        for (bool refused : {false, true}) {
          std::vector<float> qb(q.begin(), q.begin() + n * dim);
          const int64_t at = n == 1 ? 0 : 9;
          const std::vector<float>& row = refused ? above : below;
          std::copy(row.begin(), row.end(), qb.begin() + at * dim);
          if (n > 1) std::copy(below.begin(), below.end(), qb.begin() + 3 * dim);
          const std::string what = std::string(path_name(path)) + " nq " + std::to_string(n) +
                                   (refused ? " above" : " below") + " k " + std::to_string(k);
          // The host check's verdict on these queries is the one expected.
          std::vector<int64_t> hids(static_cast<std::size_t>(n * k));
          std::vector<float> hd(hids.size());
          EXPECT_EQ(ivf_search(l2.get(), host.get(), qb.data(), IVF_DTYPE_F32, n, dim, k, hids.data(), hd.data()),
                    refused ? IVF_ERR_INVALID_ARGUMENT : IVF_OK)
              << what << ": " << ivf_last_error_message();
          ASSERT_EQ(cudaMemcpy(dq, qb.data(), sizeof(float) * n * dim, cudaMemcpyHostToDevice), cudaSuccess);
          ASSERT_EQ(cudaMemset(dids, 0xab, sizeof(int64_t) * n * k), cudaSuccess);
          const int64_t fused_before = fused_searches(l2.get());
          const ivf_status st = ivf_search(l2.get(), dev.get(), dq, IVF_DTYPE_F32, n, dim, k, dids, dd);
          if (refused) {
            ASSERT_EQ(st, IVF_ERR_INVALID_ARGUMENT) << what;
            const std::string msg = ivf_last_error_message();
            EXPECT_NE(msg.find("search: query row " + std::to_string(at) + " "), std::string::npos) << msg;
            EXPECT_NE(msg.find("squared norm"), std::string::npos) << msg;
            EXPECT_TRUE(untouched(n)) << what;
          } else {
            ASSERT_EQ(st, IVF_OK) << what << ": " << ivf_last_error_message();
            EXPECT_FALSE(untouched(n)) << what;
            EXPECT_EQ(fused_searches(l2.get()) - fused_before, path == Path::Fused ? 1 : 0) << what;
          }
        }
      }
    }
  }
  if (graph_path_possible()) EXPECT_GT(graph_searches(l2.get()), 0) << "the graph path never answered";
}

// A synchronous device-memory call waits for the work the caller queued before it on the
// default streams (the legacy one and the thread's per-thread one): the library's streams are
// non-blocking, so without that wait a search reads queries a queued copy has not written yet,
// and a queued cudaMemset of its outputs lands on its results. Each queued step here waits
// behind a 2 GiB memset (most of a millisecond), far longer than a search of 16 queries.
TEST(GpuLatencyPath, DeviceMemoryCallsWaitForTheDefaultStreams) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 40, nq = 16, k = 5, n = 20000;
  const std::vector<float> x = clustered_vectors(n, dim, 30, 91);
  const std::vector<float> q = clustered_vectors(nq, dim, 30, 92);
  const std::vector<float> other = clustered_vectors(nq, dim, 30, 93);
  IndexPtr idx = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const std::size_t big_bytes = std::size_t{2} << 30;
  const DeviceArray<unsigned char> big_buffer(big_bytes);
  const DeviceArray<int64_t> new_ids_buffer(static_cast<std::size_t>(nq));
  const DeviceArray<float> src_buffer(static_cast<std::size_t>(nq * dim)), rows_buffer(static_cast<std::size_t>(nq * dim));
  const DeviceSearchArgs args(nq, dim, k);
  void* big = big_buffer.get();
  float *dq = args.queries.get(), *dq_src = src_buffer.get(), *dd = args.dists.get(), *dx = rows_buffer.get();
  int64_t *dids = args.ids.get(), *dnew_ids = new_ids_buffer.get();
  ASSERT_TRUE(big != nullptr && dnew_ids != nullptr && dq != nullptr && dq_src != nullptr && dids != nullptr &&
              dd != nullptr && dx != nullptr);
  ASSERT_EQ(cudaMemcpy(dq_src, q.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
  auto dev = make_params({{IVF_PARAM_NPROBE, 4}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  for (cudaStream_t caller : {cudaStreamLegacy, cudaStreamPerThread}) {
    const std::string which = caller == cudaStreamLegacy ? "legacy stream" : "per-thread stream";
    const Searched want = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, 4);  // before this loop's add
    for (int rep = 0; rep < 3; ++rep) {
      // The queries buffer holds other (valid) queries until the queued copy lands.
      ASSERT_EQ(cudaMemcpy(dq, other.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(big, rep, big_bytes, caller), cudaSuccess);
      ASSERT_EQ(cudaMemcpyAsync(dq, dq_src, sizeof(float) * nq * dim, cudaMemcpyDeviceToDevice, caller), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(dids, 0xff, sizeof(int64_t) * nq * k, caller), cudaSuccess);
      ASSERT_EQ(ivf_search(idx.get(), dev.get(), dq, IVF_DTYPE_F32, nq, dim, k, dids, dd), IVF_OK)
          << ivf_last_error_message();
      Searched got;
      got.ids.resize(static_cast<std::size_t>(nq * k));
      got.dists.resize(got.ids.size());
      ASSERT_EQ(cudaMemcpy(got.ids.data(), dids, sizeof(int64_t) * got.ids.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(got.dists.data(), dd, sizeof(float) * got.dists.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(same_results(got.ids, got.dists, want.ids, want.dists, nq, k), "") << which << " rep " << rep;
    }
    // An add reads rows a queued copy writes: the stored rows are the copied ones.
    const int64_t first_id = 1000000 + (caller == cudaStreamLegacy ? 0 : nq);
    std::vector<int64_t> new_ids(static_cast<std::size_t>(nq));
    for (int64_t i = 0; i < nq; ++i) new_ids[i] = first_id + i;
    ASSERT_EQ(cudaMemcpy(dnew_ids, new_ids.data(), sizeof(int64_t) * nq, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemset(dx, 0, sizeof(float) * nq * dim), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(big, 7, big_bytes, caller), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(dx, dq_src, sizeof(float) * nq * dim, cudaMemcpyDeviceToDevice, caller), cudaSuccess);
    auto add_params = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
    ASSERT_EQ(ivf_add_ex(idx.get(), add_params.get(), dx, IVF_DTYPE_F32, nq, dim, dnew_ids), IVF_OK)
        << ivf_last_error_message();
    std::vector<float> stored(static_cast<std::size_t>(nq * dim));
    ASSERT_EQ(ivf_get(idx.get(), nullptr, new_ids.data(), nq, stored.data(), IVF_DTYPE_F32, dim, nullptr), IVF_OK)
        << ivf_last_error_message();
    EXPECT_EQ(stored, q) << which << ": ivf_add read rows before the queued copy wrote them";
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Device-memory arguments (IVF_MEMORY_DEVICE) must be memory the index's device can address:
// a pageable host pointer would fault the kernels and lose the device for the whole process. Each
// such argument of search (synchronous or on a stream), add and train is refused by name with
// nothing written and the index unchanged; page-locked and managed memory are accepted and
// answer as host memory does; the device still serves afterwards.
TEST(GpuLatencyPath, DeviceMemoryArgumentsTheDeviceCannotAddressAreRefused) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 40, nq = 16, k = 5, n = 20000;
  const std::vector<float> x = clustered_vectors(n, dim, 30, 95);
  const std::vector<float> q = clustered_vectors(nq, dim, 30, 96);
  IndexPtr idx = cuda_index_of(dim, 64, IVF_METRIC_L2, IVF_DTYPE_F32, x);
  ASSERT_TRUE(idx);
  const Searched want = search_raw(idx.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, 4);
  const DeviceSearchArgs args(nq, dim, k);
  float* dq = args.queries.get();
  int64_t* dids = args.ids.get();
  float* dd = args.dists.get();
  ASSERT_EQ(cudaMemcpy(dq, q.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<int64_t> hids(static_cast<std::size_t>(nq * k), -7);
  std::vector<float> hd(hids.size(), -7.0f);
  auto dev = make_params({{IVF_PARAM_NPROBE, 4}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  auto on_stream = make_params({{IVF_PARAM_NPROBE, 4}, {IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(ivf_params_set_ptr(on_stream.get(), IVF_PARAM_CUDA_STREAM, s), IVF_OK);
  const auto refused = [](ivf_status st, const std::string& what) {
    const std::string msg = ivf_last_error_message();
    if (st != IVF_ERR_INVALID_ARGUMENT) return "status " + std::to_string(st) + " for " + what + ": " + msg;
    if (msg.find(what + " (IVF_MEMORY_DEVICE) is not CUDA device memory") == std::string::npos)
      return "message for " + what + ": " + msg;
    return std::string();
  };
  for (const ivf_params* p : {dev.get(), on_stream.get()}) {
    EXPECT_EQ(refused(ivf_search(idx.get(), p, q.data(), IVF_DTYPE_F32, nq, dim, k, dids, dd), "search: queries"), "");
    EXPECT_EQ(refused(ivf_search(idx.get(), p, dq, IVF_DTYPE_F32, nq, dim, k, hids.data(), dd), "search: ids"), "");
    EXPECT_EQ(refused(ivf_search(idx.get(), p, dq, IVF_DTYPE_F32, nq, dim, k, dids, hd.data()), "search: dists"), "");
  }
  EXPECT_TRUE(std::all_of(hids.begin(), hids.end(), [](int64_t v) { return v == -7; }));
  EXPECT_TRUE(std::all_of(hd.begin(), hd.end(), [](float v) { return v == -7.0f; }));
  auto add_dev = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
  std::vector<int64_t> new_ids(static_cast<std::size_t>(nq));
  for (int64_t i = 0; i < nq; ++i) new_ids[i] = 5000000 + i;
  EXPECT_EQ(refused(ivf_add_ex(idx.get(), add_dev.get(), q.data(), IVF_DTYPE_F32, nq, dim, nullptr), "add: data"), "");
  EXPECT_EQ(refused(ivf_add_ex(idx.get(), add_dev.get(), dq, IVF_DTYPE_F32, nq, dim, new_ids.data()), "add: ids"), "");
  EXPECT_EQ(refused(ivf_update(idx.get(), add_dev.get(), q.data(), IVF_DTYPE_F32, nq, dim, new_ids.data()),
                    "update: data"), "");
  int64_t ntotal = -1;
  ASSERT_EQ(ivf_ntotal(idx.get(), &ntotal), IVF_OK);
  EXPECT_EQ(ntotal, n);
  {
    auto fp = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, 64}});
    IndexPtr fresh = make_index(dim, fp.get());
    ASSERT_TRUE(fresh);
    EXPECT_EQ(refused(ivf_train_ex(fresh.get(), add_dev.get(), x.data(), IVF_DTYPE_F32, n, dim), "train: data"), "");
    int64_t trained = -1;
    ASSERT_EQ(ivf_index_info(fresh.get(), IVF_INFO_IS_TRAINED, &trained), IVF_OK);
    EXPECT_EQ(trained, 0);
  }
  // Page-locked host memory and managed memory are addressable: the same answers.
  void* pinned = nullptr;
  const std::size_t qbytes = sizeof(float) * nq * dim, ibytes = sizeof(int64_t) * nq * k, dbytes = sizeof(float) * nq * k;
  ASSERT_EQ(ivf_host_alloc(qbytes + ibytes + dbytes, &pinned), IVF_OK);
  void* managed = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, qbytes + ibytes + dbytes), cudaSuccess);
  for (void* base : {pinned, managed}) {
    auto* mq = static_cast<float*>(base);
    auto* mids = reinterpret_cast<int64_t*>(static_cast<unsigned char*>(base) + qbytes);
    auto* md = reinterpret_cast<float*>(static_cast<unsigned char*>(base) + qbytes + ibytes);
    std::memcpy(mq, q.data(), qbytes);
    ASSERT_EQ(ivf_search(idx.get(), dev.get(), mq, IVF_DTYPE_F32, nq, dim, k, mids, md), IVF_OK)
        << (base == pinned ? "page-locked: " : "managed: ") << ivf_last_error_message();
    const std::vector<int64_t> got_ids(mids, mids + nq * k);
    const std::vector<float> got_d(md, md + nq * k);
    EXPECT_EQ(same_results(got_ids, got_d, want.ids, want.dists, nq, k), "") << (base == pinned ? "page-locked" : "managed");
  }
  ASSERT_EQ(ivf_host_free(pinned), IVF_OK);
  cudaFree(managed);
  // The device still serves.
  const Searched after = search_device(idx.get(), q, nq, dim, k, 4);
  EXPECT_EQ(same_results(after.ids, after.dists, want.ids, want.dists, nq, k), "");
  cudaStreamDestroy(s);
}

// Device-memory queries and rows are read where the caller put them, at any element offset
// (an f16 row 2-byte aligned, an f32 one 4-byte), not only at cudaMalloc's alignment: the decode
// of f16, bf16 and uint8 queries or rows then takes its one-element kernel (element_rows.cu) and
// the scans their scalar loads (scan.cu's four_element_loads). Each offset's answer equals the
// aligned one, at the batch sizes of the fused path (16), the direct path (100) and the check
// taken while the batch runs (3,001); rows added from an odd offset are stored as they were.
TEST(GpuLatencyPath, DeviceQueriesAndRowsAtAnyElementOffset) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 128, k = 10, nmax = 3001, n = 20000, added = 777;
  std::vector<float> x = random_vectors(n + nmax, dim, 71);
  for (float& v : x) v = static_cast<float>(static_cast<int>((v + 1.0f) * 127.0f) & 255);  // exact in every type
  const std::vector<float> rows(x.begin(), x.begin() + n * dim), q(x.begin() + n * dim, x.end());
  for (ivf_dtype type : {IVF_DTYPE_F32, IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8}) {
    const std::size_t esize = type == IVF_DTYPE_F32 ? 4 : type == IVF_DTYPE_U8 ? 1 : 2;
    const std::string tname = "type " + std::to_string(type);
    IndexPtr idx = cuda_index_of(dim, 64, IVF_METRIC_L2, type, rows);
    ASSERT_TRUE(idx);
    const std::vector<unsigned char> native =
        type == IVF_DTYPE_F32 ? std::vector<unsigned char>(reinterpret_cast<const unsigned char*>(q.data()),
                                                           reinterpret_cast<const unsigned char*>(q.data() + q.size()))
                              : encode_rows(q, type);
    ASSERT_EQ(native.size(), q.size() * esize);
    DeviceArray<unsigned char> dq(native.size() + 4 * esize);
    for (int64_t nq : {int64_t{16}, int64_t{100}, nmax}) {
      Searched aligned;
      for (int offset = 0; offset < 4; ++offset) {
        const std::string what = tname + " nq " + std::to_string(nq) + " offset " + std::to_string(offset);
        unsigned char* at = dq.get() + offset * esize;
        ASSERT_EQ(cudaMemcpy(at, native.data(), nq * dim * esize, cudaMemcpyHostToDevice), cudaSuccess);
        const Searched got = search_device_queries(idx.get(), at, type, nq, dim, k, 8);
        if (offset == 0) {
          const Searched host = search_raw(idx.get(), native.data(), type, nq, dim, k, 8);
          EXPECT_EQ(same_results(got.ids, got.dists, host.ids, host.dists, nq, k), "")
              << what << " against host memory";
          aligned = got;
        } else {
          EXPECT_EQ(same_results(got.ids, got.dists, aligned.ids, aligned.dists, nq, k), "") << what;
        }
      }
    }
    // Rows added from device memory at offset 3 (their ids 10^7 + i) are stored exactly as the
    // same rows added from the host (ids 2 x 10^7 + i): ivf_get in the storage type.
    auto add_dev = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
    std::vector<int64_t> dev_ids(added), host_ids(added);
    for (int64_t i = 0; i < added; ++i) {
      dev_ids[i] = 10000000 + i;
      host_ids[i] = 20000000 + i;
    }
    DeviceArray<int64_t> ddev_ids(added);
    ASSERT_EQ(cudaMemcpy(ddev_ids.get(), dev_ids.data(), sizeof(int64_t) * added, cudaMemcpyHostToDevice), cudaSuccess);
    unsigned char* at = dq.get() + 3 * esize;
    ASSERT_EQ(cudaMemcpy(at, native.data(), added * dim * esize, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(ivf_add_ex(idx.get(), add_dev.get(), at, type, added, dim, ddev_ids.get()), IVF_OK)
        << tname << ": " << ivf_last_error_message();
    ASSERT_EQ(ivf_add(idx.get(), native.data(), type, added, dim, host_ids.data()), IVF_OK)
        << tname << ": " << ivf_last_error_message();
    std::vector<unsigned char> from_dev(added * dim * esize), from_host(added * dim * esize);
    std::vector<uint8_t> found_dev(added), found_host(added);
    ASSERT_EQ(ivf_get(idx.get(), nullptr, dev_ids.data(), added, from_dev.data(), type, dim, found_dev.data()), IVF_OK);
    ASSERT_EQ(ivf_get(idx.get(), nullptr, host_ids.data(), added, from_host.data(), type, dim, found_host.data()),
              IVF_OK);
    EXPECT_TRUE(std::all_of(found_dev.begin(), found_dev.end(), [](uint8_t f) { return f == 1; })) << tname;
    EXPECT_TRUE(std::all_of(found_host.begin(), found_host.end(), [](uint8_t f) { return f == 1; })) << tname;
    EXPECT_TRUE(from_dev == from_host) << tname << ": rows added from offset 3 differ from the host's";
    EXPECT_TRUE(std::equal(from_dev.begin(), from_dev.end(), native.begin())) << tname << ": not the rows given";
  }
}

}  // namespace
