// The GPU twin of the CPU stress test (tests/capi/concurrency_test.cpp): 32 searchers on a CUDA
// index, one adder, one serialiser; and the state lifetime of asynchronous searches.
#include <cuda_runtime.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/mutation_stress.hpp"
#include "common/test_util.hpp"
#include "stream_hold.hpp"

using namespace ivftest;

// CUDA's lazy loading (the default since 12.2) loads a kernel at its first launch, and that
// load waits for kernels already running on the device: a reset or add whose kernels had not
// run yet in the process waited the full 60 s behind the held stream's spinning kernel (and
// returned in 2 ms once loaded; with CUDA_MODULE_LOADING=EAGER, 2 ms the first time too). The
// held-stream tests are about the library's own waits, so this program loads eagerly, set
// before its first CUDA call. README "Asynchronous searches" tells programs that hold streams.
const bool eager_loading = [] { return setenv("CUDA_MODULE_LOADING", "EAGER", 0) == 0; }();


TEST(GpuConcurrency, AddsCompleteUnderThirtyTwoSearchers) {
  IVFTEST_REQUIRE_GPU();
  StressConfig c;
  c.backend = IVF_BACKEND_CUDA;
  c.searchers = 32;
  c.batch_rows = 500;
  c.dim = 32;
  c.nlist = 16;
  run_mutation_stress(c);
}

namespace {

// An asynchronous search on a stream the caller holds back (a host function that waits for a
// gate, at most 60 s), then a reset and a growing add that replace the search's state (and
// free its buffers) before the stream runs; then the gate opens.
struct HeldStreamRun {
  std::vector<int64_t> want_ids, ids;
  std::vector<float> want_d, d;
  double add_returned_s = 0;  // after the search was queued, with the stream still held
};

void run_with_held_stream(HeldStreamRun& r) {
  const int64_t dim = 32, n = 20000, nq = 500, k = 10;
  const std::vector<float> base = clustered_vectors(n, dim, 64, 3);
  const std::vector<float> q = clustered_vectors(nq, dim, 64, 4);
  auto p = make_params({{IVF_PARAM_NLIST, 64}, {IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NPROBE, 8}});
  IndexPtr idx = make_index(dim, p.get());
  ASSERT_EQ(ivf_train(idx.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), base.data(), IVF_DTYPE_F32, n, dim, nullptr), IVF_OK);
  r.want_ids.resize(nq * k);
  r.want_d.resize(nq * k);
  ASSERT_EQ(ivf_search(idx.get(), p.get(), q.data(), IVF_DTYPE_F32, nq, dim, k, r.want_ids.data(), r.want_d.data()),
            IVF_OK);

  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float *dq = nullptr, *dd = nullptr;
  int64_t* di = nullptr;
  ASSERT_EQ(cudaMalloc(&dq, sizeof(float) * nq * dim), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dd, sizeof(float) * nq * k), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&di, sizeof(int64_t) * nq * k), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dq, q.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
  // Hold the stream back until the index has moved on.
  volatile int* gate = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(const_cast<int**>(&gate)), sizeof(int), cudaHostAllocMapped), cudaSuccess);
  *gate = 0;
  // (At most 60 s: a library that waited for this stream must fail the test, not hang it.)
  // Held on the GPU (stream_hold.hpp): a blocking host function would hold the driver's
  // host thread too, and with it every pageable copy of the process.
  ASSERT_EQ(hold_stream_on_device(s, gate, 60.0), cudaSuccess);
  auto dev = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}, {IVF_PARAM_NPROBE, 8}});
  ASSERT_EQ(ivf_params_set_ptr(dev.get(), IVF_PARAM_CUDA_STREAM, s), IVF_OK);
  const std::vector<float> other = clustered_vectors(2 * n, dim, 64, 5);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(ivf_search(idx.get(), dev.get(), dq, IVF_DTYPE_F32, nq, dim, k, di, dd), IVF_OK) << ivf_last_error_message();
  ASSERT_EQ(ivf_reset(idx.get()), IVF_OK);
  ASSERT_EQ(ivf_add(idx.get(), other.data(), IVF_DTYPE_F32, 2 * n, dim, nullptr), IVF_OK);
  r.add_returned_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("with the caller's stream held, the search, reset and add returned after %.3f s\n", r.add_returned_s);
  *gate = 1;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  r.ids.resize(nq * k);
  r.d.resize(nq * k);
  ASSERT_EQ(cudaMemcpy(r.ids.data(), di, sizeof(int64_t) * nq * k, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(r.d.data(), dd, sizeof(float) * nq * k, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dq);
  cudaFree(dd);
  cudaFree(di);
  cudaFreeHost(const_cast<int*>(gate));
  cudaStreamDestroy(s);
}

}  // namespace

// The search reads the state it started on, whatever replaced it before the stream ran.
TEST(GpuConcurrency, AsynchronousSearchKeepsItsStateAlive) {
  IVFTEST_REQUIRE_GPU();
  HeldStreamRun r;
  run_with_held_stream(r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.ids, r.want_ids);
  EXPECT_EQ(r.d, r.want_d);
}

// A caller's stream held back does not hold back the index: the search queued on it returns
// at once, and a reset and an add after it finish while the stream still waits (with the
// kernels loaded: see eager_loading above).
TEST(GpuConcurrency, MutationsDoNotWaitForACallersHeldStream) {
  IVFTEST_REQUIRE_GPU();
  ASSERT_TRUE(eager_loading);
  HeldStreamRun r;
  run_with_held_stream(r);
  if (HasFatalFailure()) return;
  EXPECT_LT(r.add_returned_s, 20.0) << "the add waited for the caller's held stream";
}

// ivf_train_ex / ivf_add_ex with device memory give the same index as host input, and the
// published state's number and the pool's cache are reported.
TEST(GpuMutationsEx, DeviceInputEqualsHostInput) {
  IVFTEST_REQUIRE_GPU();
  const int64_t dim = 24, n = 6000;
  const std::vector<float> base = clustered_vectors(n, dim, 40, 8);
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = 1000000007LL * (i + 1);
  for (int32_t metric : {IVF_METRIC_L2, IVF_METRIC_COSINE}) {
    auto p = make_params({{IVF_PARAM_NLIST, 32}, {IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_METRIC, metric}});
    IndexPtr host = make_index(dim, p.get()), dev = make_index(dim, p.get());
    ASSERT_EQ(ivf_train(host.get(), base.data(), IVF_DTYPE_F32, n, dim), IVF_OK);
    ASSERT_EQ(ivf_add(host.get(), base.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK);
    float* dx = nullptr;
    int64_t* dids = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, sizeof(float) * n * dim), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dids, sizeof(int64_t) * n), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dx, base.data(), sizeof(float) * n * dim, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dids, ids.data(), sizeof(int64_t) * n, cudaMemcpyHostToDevice), cudaSuccess);
    auto dm = make_params({{IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE}});
    ASSERT_EQ(ivf_train_ex(dev.get(), dm.get(), dx, IVF_DTYPE_F32, n, dim), IVF_OK) << ivf_last_error_message();
    ASSERT_EQ(ivf_add_ex(dev.get(), dm.get(), dx, IVF_DTYPE_F32, n, dim, dids), IVF_OK) << ivf_last_error_message();
    EXPECT_TRUE(stress_detail::serialized(host.get()) == stress_detail::serialized(dev.get()))
        << "metric " << metric << ": device input built a different index";
    int64_t v = 0;
    ASSERT_EQ(ivf_index_info(dev.get(), IVF_INFO_STATE_VERSION, &v), IVF_OK);
    EXPECT_EQ(v, 2);
    // A NaN and a reserved id in device memory are refused, naming the row, and change nothing.
    const float nan = std::nanf("");
    ASSERT_EQ(cudaMemcpy(dx + 7 * dim + 3, &nan, sizeof nan, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(ivf_add_ex(dev.get(), dm.get(), dx, IVF_DTYPE_F32, n, dim, dids), IVF_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(ivf_last_error_message()).find("row 7"), std::string::npos) << ivf_last_error_message();
    const int64_t reserved = -1;
    ASSERT_EQ(cudaMemcpy(dids + 5, &reserved, sizeof reserved, cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(ivf_add_ex(dev.get(), dm.get(), dx + 8 * dim, IVF_DTYPE_F32, 10, dim, dids), IVF_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(ivf_index_info(dev.get(), IVF_INFO_STATE_VERSION, &v), IVF_OK);
    EXPECT_EQ(v, 2) << "a refused add published a state";
    // A reset hands memory back: after a big add the index holds hundreds of MB; afterwards
    // the scratch pool keeps at most a chunk or two (32 MiB each on current drivers) and the
    // state's memory has gone back to the driver.
    const int64_t big = 2000000;
    std::vector<float> many(static_cast<std::size_t>(big * dim));
    for (int64_t i = 0; i < big * dim; ++i) many[i] = base[i % (n * dim)] + 1e-3f * static_cast<float>(i % 97);
    ASSERT_EQ(ivf_add(dev.get(), many.data(), IVF_DTYPE_F32, big, dim, nullptr), IVF_OK) << ivf_last_error_message();
    int64_t held = -1, cached = -1;
    ASSERT_EQ(ivf_index_info(dev.get(), IVF_INFO_DEVICE_MEMORY_BYTES, &held), IVF_OK);
    EXPECT_GT(held, big * dim * 4);
    ASSERT_EQ(ivf_reset(dev.get()), IVF_OK);
    ASSERT_EQ(ivf_index_info(dev.get(), IVF_INFO_POOL_BYTES, &cached), IVF_OK);
    EXPECT_LE(cached, int64_t{64} << 20) << "the pool kept " << cached << " bytes after a reset";
    cudaFree(dx);
    cudaFree(dids);
  }
}
