// Page-locked host memory for callers' buffers (ivf_host_alloc, ivf_host_free,
// ivf_host_register, ivf_host_unregister): the memory is usable and aligned; every pointer
// the library did not hand out, every double free and every overlapping registration is
// refused and changes nothing; searches whose queries and results live there return the same
// results as from ordinary memory (shared/docs/results-contract.md), on every search path
// (one query, a small batch, a large batch in chunks); the calls are safe from many threads
// beside searches. Runs on IVFTEST_BACKEND (the CPU in CI; gpu_host_memory_test runs it on a
// CUDA index and also asks the driver whether the memory is page-locked).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/id_workload.hpp"
#include "common/test_util.hpp"

#ifdef IVFTEST_CUDART
#include <cuda_runtime.h>
#endif

using namespace ivftest;

namespace {

int32_t backend() {
  const char* b = std::getenv("IVFTEST_BACKEND");
  return b != nullptr && std::strcmp(b, "cuda") == 0 ? IVF_BACKEND_CUDA : IVF_BACKEND_CPU;
}

// A macro, not a function: GTEST_SKIP must return from the test itself.
#define REQUIRE_BACKEND()                                 \
  if (backend() == IVF_BACKEND_CUDA) IVFTEST_REQUIRE_GPU()

// Whether the CUDA driver sees p as page-locked host memory. Asked only where the test links
// cudart, which gpu_host_memory_test runs on a CUDA index (it skips without a device).
#ifdef IVFTEST_CUDART
bool driver_sees_pinned(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}
#endif

// Page-aligned ordinary memory, so that two registrations never share a page.
struct PageBuffer {
  explicit PageBuffer(std::size_t bytes) : bytes(bytes), p(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)) {}
  ~PageBuffer() { std::free(p); }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  std::size_t bytes;
  void* p;
};

// A pointer from ivf_host_alloc, freed on scope exit.
struct HostAlloc {
  explicit HostAlloc(std::size_t bytes) {
    EXPECT_EQ(ivf_host_alloc(bytes, &p), IVF_OK) << ivf_last_error_message();
  }
  ~HostAlloc() {
    if (p != nullptr) {
      EXPECT_EQ(ivf_host_free(p), IVF_OK) << ivf_last_error_message();
    }
  }
  HostAlloc(const HostAlloc&) = delete;
  HostAlloc& operator=(const HostAlloc&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
  void* p = nullptr;
};

}  // namespace

TEST(HostMemory, AllocHandsOutAlignedWritableMemory) {
  REQUIRE_BACKEND();
  for (std::size_t bytes : {std::size_t{1}, std::size_t{63}, std::size_t{4096}, std::size_t{5} << 20}) {
    void* p = nullptr;
    ASSERT_EQ(ivf_host_alloc(bytes, &p), IVF_OK) << ivf_last_error_message();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xab, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0xab);
#ifdef IVFTEST_CUDART
    EXPECT_TRUE(driver_sees_pinned(p)) << bytes << " bytes from ivf_host_alloc are not page-locked";
#endif
    EXPECT_EQ(ivf_host_free(p), IVF_OK) << ivf_last_error_message();
  }
}

TEST(HostMemory, AllocRefusesBadArguments) {
  REQUIRE_BACKEND();
  EXPECT_EQ(ivf_host_alloc(16, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(ivf_last_error_message(), "");
  void* p = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(ivf_host_alloc(0, &p), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr) << "a refused allocation leaves *out NULL";
  p = reinterpret_cast<void*>(0x1234);
  EXPECT_EQ(ivf_host_alloc(SIZE_MAX, &p), IVF_ERR_OUT_OF_HOST_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(ivf_host_alloc(SIZE_MAX - 10, &p), IVF_ERR_OUT_OF_HOST_MEMORY);
  EXPECT_NE(std::strstr(ivf_last_error_message(), "ivf_host_alloc"), nullptr) << ivf_last_error_message();
}

TEST(HostMemory, FreeRefusesWhatItDidNotHandOut) {
  REQUIRE_BACKEND();
  EXPECT_EQ(ivf_host_free(nullptr), IVF_OK);
  // Ordinary heap memory: refused, and still the caller's to free.
  void* mine = std::malloc(256);
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(ivf_host_free(mine), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(ivf_last_error_message(), "ivf_host_alloc"), nullptr) << ivf_last_error_message();
  std::memset(mine, 1, 256);
  std::free(mine);
  // An interior pointer: refused, the block stays valid; then a double free is refused.
  void* p = nullptr;
  ASSERT_EQ(ivf_host_alloc(4096, &p), IVF_OK);
  EXPECT_EQ(ivf_host_free(static_cast<char*>(p) + 64), IVF_ERR_INVALID_ARGUMENT);
  std::memset(p, 2, 4096);
  EXPECT_EQ(ivf_host_free(p), IVF_OK);
  EXPECT_EQ(ivf_host_free(p), IVF_ERR_INVALID_ARGUMENT);
}

TEST(HostMemory, RegisterRefusesOverlapsAndUnknownRanges) {
  REQUIRE_BACKEND();
  PageBuffer a(3 * 4096), b(4096);
  ASSERT_NE(a.p, nullptr);
  ASSERT_NE(b.p, nullptr);
  EXPECT_EQ(ivf_host_register(nullptr, 64), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_host_register(a.p, 0), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_host_register(a.p, SIZE_MAX), IVF_ERR_INVALID_ARGUMENT) << "a range that wraps around memory";
  EXPECT_EQ(ivf_host_unregister(nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_host_unregister(a.p), IVF_ERR_INVALID_ARGUMENT) << "nothing registered yet";

  ASSERT_EQ(ivf_host_register(a.p, a.bytes), IVF_OK) << ivf_last_error_message();
#ifdef IVFTEST_CUDART
  EXPECT_TRUE(driver_sees_pinned(a.p));
  EXPECT_TRUE(driver_sees_pinned(static_cast<char*>(a.p) + a.bytes - 1));
#endif
  EXPECT_EQ(ivf_host_register(a.p, a.bytes), IVF_ERR_INVALID_ARGUMENT) << "registered twice";
  EXPECT_EQ(ivf_host_register(static_cast<char*>(a.p) + 4096, 4096), IVF_ERR_INVALID_ARGUMENT) << "inside";
  EXPECT_EQ(ivf_host_register(static_cast<char*>(a.p) - 4096, 8192), IVF_ERR_INVALID_ARGUMENT) << "overlapping start";
  EXPECT_EQ(ivf_host_unregister(static_cast<char*>(a.p) + 4096), IVF_ERR_INVALID_ARGUMENT) << "not its start";
  EXPECT_EQ(ivf_host_free(a.p), IVF_ERR_INVALID_ARGUMENT) << "registered memory is the caller's to free";
  // A second, separate range registers beside it; memory from ivf_host_alloc does not.
  EXPECT_EQ(ivf_host_register(b.p, b.bytes), IVF_OK) << ivf_last_error_message();
  HostAlloc h(8192);
  EXPECT_EQ(ivf_host_register(h.p, 8192), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_host_unregister(h.p), IVF_ERR_INVALID_ARGUMENT) << "ivf_host_alloc's memory is freed, not unregistered";

  EXPECT_EQ(ivf_host_unregister(b.p), IVF_OK);
  EXPECT_EQ(ivf_host_unregister(a.p), IVF_OK);
  EXPECT_EQ(ivf_host_unregister(a.p), IVF_ERR_INVALID_ARGUMENT) << "unregistered twice";
#ifdef IVFTEST_CUDART
  EXPECT_FALSE(driver_sees_pinned(a.p));
#endif
  // Registered again after its end: the registry forgot it.
  EXPECT_EQ(ivf_host_register(a.p, a.bytes), IVF_OK) << ivf_last_error_message();
  EXPECT_EQ(ivf_host_unregister(a.p), IVF_OK);
}

TEST(HostMemory, TheFunctionTableCarriesTheCalls) {
  REQUIRE_BACKEND();
  const ivf_api_v1* api = ivf_get_api(1);
  ASSERT_NE(api, nullptr);
  ASSERT_GE(api->struct_size, offsetof(ivf_api_v1, host_unregister) + sizeof(api->host_unregister));
  void* p = nullptr;
  ASSERT_EQ(api->host_alloc(128, &p), IVF_OK);
  EXPECT_EQ(api->host_free(p), IVF_OK);
  std::vector<char> v(4096);
  ASSERT_EQ(api->host_register(v.data(), v.size()), IVF_OK) << ivf_last_error_message();
  EXPECT_EQ(api->host_unregister(v.data()), IVF_OK);
}

// Searches from ivf_host_alloc's memory and from a registered std::vector against the same
// searches from ordinary memory: one query (the small-batch path), 16, and 3,000 (the batch
// path, whose queries and results are copied in chunks).
TEST(HostMemory, SearchesFromPinnedBuffersGiveTheSameResults) {
  REQUIRE_BACKEND();
  const int64_t dim = 32, nlist = 64, nbase = 30000, nq = 3000;
  const auto base = clustered_vectors(nbase, dim, 200, 11);
  const auto queries = clustered_vectors(nq, dim, 200, 12);
  auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend()}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim), IVF_OK) << ivf_last_error_message();
  ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim, nullptr), IVF_OK);

  const std::size_t qbytes = queries.size() * sizeof(float);
  HostAlloc q_alloc(qbytes);
  ASSERT_NE(q_alloc.p, nullptr);
  std::memcpy(q_alloc.p, queries.data(), qbytes);
  std::vector<float> q_registered(queries);
  ASSERT_EQ(ivf_host_register(q_registered.data(), qbytes), IVF_OK) << ivf_last_error_message();

  for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{100}}) {
    const std::size_t nk = static_cast<std::size_t>(nq * k);
    HostAlloc ids_alloc(nk * sizeof(int64_t)), dists_alloc(nk * sizeof(float));
    ASSERT_NE(ids_alloc.p, nullptr);
    for (int64_t n : {int64_t{1}, int64_t{16}, nq}) {
      auto sp = make_params({{IVF_PARAM_NPROBE, 8}});
      const std::size_t m = static_cast<std::size_t>(n * k);
      std::vector<int64_t> ref_ids(m, -7);
      std::vector<float> ref_d(m);
      ASSERT_EQ(ivf_search(idx.get(), sp.get(), queries.data(), IVF_DTYPE_F32, n, dim, k, ref_ids.data(), ref_d.data()),
                IVF_OK)
          << ivf_last_error_message();
      // Allocated queries into allocated results.
      std::fill_n(ids_alloc.as<int64_t>(), m, int64_t{-7});
      ASSERT_EQ(ivf_search(idx.get(), sp.get(), q_alloc.p, IVF_DTYPE_F32, n, dim, k, ids_alloc.as<int64_t>(),
                           dists_alloc.as<float>()),
                IVF_OK)
          << ivf_last_error_message();
      const std::vector<int64_t> a_ids(ids_alloc.as<int64_t>(), ids_alloc.as<int64_t>() + m);
      const std::vector<float> a_d(dists_alloc.as<float>(), dists_alloc.as<float>() + m);
      EXPECT_EQ(same_results(ref_ids, ref_d, a_ids, a_d, n, k), "") << "ivf_host_alloc, n " << n << " k " << k;
      // Registered queries into ordinary results.
      std::vector<int64_t> r_ids(m, -7);
      std::vector<float> r_d(m);
      ASSERT_EQ(ivf_search(idx.get(), sp.get(), q_registered.data(), IVF_DTYPE_F32, n, dim, k, r_ids.data(),
                           r_d.data()),
                IVF_OK)
          << ivf_last_error_message();
      EXPECT_EQ(same_results(ref_ids, ref_d, r_ids, r_d, n, k), "") << "registered, n " << n << " k " << k;
    }
  }
  EXPECT_EQ(ivf_host_unregister(q_registered.data()), IVF_OK);
}

// Eight threads allocate, register and free while four search from pinned queries.
TEST(HostMemory, ManyThreadsBesideSearches) {
  REQUIRE_BACKEND();
  const int64_t dim = 16, nlist = 16, nbase = 5000, nq = 64, k = 5;
  const auto base = clustered_vectors(nbase, dim, 50, 21);
  auto p = make_params({{IVF_PARAM_NLIST, nlist}, {IVF_PARAM_BACKEND, backend()}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, nbase, dim, nullptr), IVF_OK);
  HostAlloc q(static_cast<std::size_t>(nq * dim) * sizeof(float));
  ASSERT_NE(q.p, nullptr);
  std::memcpy(q.p, base.data(), static_cast<std::size_t>(nq * dim) * sizeof(float));

  std::atomic<int> failures{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      PageBuffer mine(4096 * (1 + t % 3));
      for (int i = 0; i < 100; ++i) {
        void* a = nullptr;
        if (ivf_host_alloc(static_cast<std::size_t>(1 + 977 * (i + t)), &a) != IVF_OK) ++failures;
        if (a != nullptr) static_cast<char*>(a)[0] = 1;
        if (ivf_host_register(mine.p, mine.bytes) != IVF_OK) ++failures;
        if (ivf_host_free(a) != IVF_OK) ++failures;
        if (ivf_host_unregister(mine.p) != IVF_OK) ++failures;
      }
    });
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      auto sp = make_params({{IVF_PARAM_NPROBE, 4}});
      std::vector<int64_t> ids(static_cast<std::size_t>(nq * k));
      std::vector<float> d(ids.size());
      int64_t rounds = 0;
      while (!stop.load() || rounds < 5) {
        const int64_t n = 1 + rounds % nq;
        if (ivf_search(idx.get(), sp.get(), q.p, IVF_DTYPE_F32, n, dim, k, ids.data(), d.data()) != IVF_OK) ++failures;
        // Each query is a base row: its nearest neighbour is itself, at distance 0.
        for (int64_t r = 0; r < n; ++r)
          if (ids[static_cast<std::size_t>(r * k)] != r || d[static_cast<std::size_t>(r * k)] != 0.0f) ++failures;
        ++rounds;
      }
    });
  for (int t = 0; t < 8; ++t) threads[t].join();
  stop = true;
  for (std::size_t t = 8; t < threads.size(); ++t) threads[t].join();
  EXPECT_EQ(failures.load(), 0);
}
