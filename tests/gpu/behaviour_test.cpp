// The CUDA backend's behaviour beyond single searches: training, adding in pieces, concurrent
// searches, device-memory queries on a caller's stream, out-of-memory, recall on real data.
#include <gtest/gtest.h>
#ifdef IVFGPU_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/errors.hpp"
#include "gpu_test_util.hpp"

namespace gputest {
namespace {

double objective(const ivfgpu::HostModel& m, const std::vector<float>& x, int64_t n) {
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double best = 1e300;
    for (int64_t c = 0; c < m.nlist; ++c)
      best = std::min(best, exact(x.data() + i * m.dim, m.centroids.data() + c * m.dim, m.dim, Metric::L2));
    total += best;
  }
  return total;
}

TEST(GpuBehaviour, TrainingIsRepeatableAndAsGoodAsTheCpus) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 20, n = 8000, nlist = 50;
  std::vector<float> x = mixture(n, dim, 60, 41);
  Index a(dim, params_for(nlist, Metric::L2, BackendKind::Cuda)), b(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  Index cpu(dim, params_for(nlist, Metric::L2, BackendKind::Cpu));
  a.train(x.data(), n);
  b.train(x.data(), n);
  cpu.train(x.data(), n);
  ivfgpu::HostModel ma = a.snapshot(), mb = b.snapshot(), mc = cpu.snapshot();
  EXPECT_EQ(ma.centroids, mb.centroids) << "same seed, same data: same centroids";
  const double og = objective(ma, x, n), oc = objective(mc, x, n);
  EXPECT_LE(og, oc * 1.02) << "GPU k-means objective " << og << " vs CPU " << oc;
  // Every centroid is used (empty clusters were split).
  EXPECT_EQ(ma.nlist, nlist);
}

TEST(GpuBehaviour, AddingInPiecesEqualsOneAddAndTheCpuLayout) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 12, n = 10000, nlist = 40;
  std::vector<float> x = mixture(n, dim, 80, 51);
  Index one(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  one.train(x.data(), n);
  ivfgpu::HostModel trained = one.snapshot();
  Index pieces(trained, params_for(nlist, Metric::L2, BackendKind::Cuda));
  Index cpu(trained, params_for(nlist, Metric::L2, BackendKind::Cpu));
  one.add(x.data(), n, nullptr);
  const int64_t cuts[] = {0, 1, 7, 900, 901, 5000, n};
  for (int i = 0; i + 1 < 7; ++i) {
    std::vector<int64_t> ids;
    for (int64_t r = cuts[i]; r < cuts[i + 1]; ++r) ids.push_back(r);
    pieces.add(x.data() + cuts[i] * dim, cuts[i + 1] - cuts[i], ids.data());
    cpu.add(x.data() + cuts[i] * dim, cuts[i + 1] - cuts[i], ids.data());
  }
  ivfgpu::HostModel m1 = one.snapshot(), mp = pieces.snapshot(), mc = cpu.snapshot();
  EXPECT_EQ(m1.list_offsets, mp.list_offsets);
  EXPECT_EQ(m1.ids, mp.ids);
  EXPECT_EQ(m1.vectors, mp.vectors);
  // Against the CPU: the same lists, except rows whose two nearest centroids tie in fp32.
  int64_t moved = 0;
  for (int64_t l = 0; l < nlist; ++l) moved += std::abs(mp.list_offsets[l + 1] - mp.list_offsets[l] - (mc.list_offsets[l + 1] - mc.list_offsets[l]));
  EXPECT_LE(moved, n / 500);
  EXPECT_EQ(pieces.ntotal(), n);
  EXPECT_GT(pieces.backend_info().device_memory_bytes, static_cast<std::size_t>(n * dim * 4));
}

TEST(GpuBehaviour, ConcurrentSearchesEqualASerialReplay) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 64, n = 30000, nlist = 128;
  std::vector<float> x = mixture(n, dim, 300, 61);
  std::vector<float> q = mixture(300, dim, 300, 62);
  Index idx(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  idx.train(x.data(), n);
  idx.add(x.data(), n, nullptr);
  struct Job {
    int64_t nq, k, nprobe;
  };
  std::vector<Job> jobs;
  for (int i = 0; i < 64; ++i) jobs.push_back({1 + (i * 37) % 300, int64_t{1} << (i % 12), 1 + (i * 13) % nlist});
  std::vector<Result> serial;
  for (const Job& j : jobs) serial.push_back(search(idx, q, j.nq, j.k, j.nprobe));
  std::vector<Result> parallel(jobs.size());
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::string failure_message;
  std::mutex failure_mutex;
  for (int t = 0; t < 16; ++t)
    threads.emplace_back([&] {
      for (int i; (i = next.fetch_add(1)) < static_cast<int>(jobs.size());) {
        try {
          parallel[i] = search(idx, q, jobs[i].nq, jobs[i].k, jobs[i].nprobe);
        } catch (const std::exception& e) {
          ++failures;
          std::lock_guard<std::mutex> lock(failure_mutex);
          failure_message = e.what();
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << failure_message;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(parallel[i].ids, serial[i].ids) << "job " << i;
    EXPECT_EQ(parallel[i].dists, serial[i].dists) << "job " << i;
  }
}

TEST(GpuBehaviour, DeviceMemoryQueriesOnTheCallersStream) {
  IVFGPU_REQUIRE_GPU();
#ifndef IVFGPU_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const int64_t dim = 48, n = 5000, nlist = 32, nq = 200, k = 25;
  std::vector<float> x = mixture(n, dim, 60, 71);
  std::vector<float> q = mixture(nq, dim, 60, 72);
  for (Metric m : {Metric::L2, Metric::Cosine}) {
    Index idx(dim, params_for(nlist, m, BackendKind::Cuda));
    idx.train(x.data(), n);
    idx.add(x.data(), n, nullptr);
    Result host = search(idx, q, nq, k, 9);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    float *dq = nullptr, *dd = nullptr;
    int64_t* di = nullptr;
    ASSERT_EQ(cudaMalloc(&dq, sizeof(float) * nq * dim), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dd, sizeof(float) * nq * k), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&di, sizeof(int64_t) * nq * k), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dq, q.data(), sizeof(float) * nq * dim, cudaMemcpyHostToDevice), cudaSuccess);
    ivfgpu::SearchRequest a;
    a.queries = ivfgpu::MatrixView{dq, ivfgpu::ElementType::F32, nq, dim, ivfgpu::MemoryKind::Device};
    a.k = k;
    a.nprobe = 9;
    a.ids = di;
    a.dists = dd;
    a.memory = ivfgpu::MemoryKind::Device;
    a.stream = s;
    idx.search(a);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    Result dev;
    dev.ids.resize(nq * k);
    dev.dists.resize(nq * k);
    ASSERT_EQ(cudaMemcpy(dev.ids.data(), di, sizeof(int64_t) * nq * k, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev.dists.data(), dd, sizeof(float) * nq * k, cudaMemcpyDeviceToHost), cudaSuccess);
    if (m == Metric::L2) {
      EXPECT_EQ(dev.ids, host.ids);
      EXPECT_EQ(dev.dists, host.dists);
    } else {
      // Device-side normalisation may round differently from the host's: same contract as CPU.
      expect_equivalent(dev, host, nq, k, dim, m, normalized(x, dim), normalized(q, dim), nq / 50, "cosine device");
    }
    cudaFree(dq);
    cudaFree(dd);
    cudaFree(di);
    cudaStreamDestroy(s);
  }
#endif
}

TEST(GpuBehaviour, OutOfMemoryInAddLeavesTheIndexSearchable) {
  IVFGPU_REQUIRE_GPU();
#ifndef IVFGPU_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  const int64_t dim = 256, n = 20000, nlist = 64;
  std::vector<float> x = mixture(n, dim, 100, 81);
  std::vector<float> q = mixture(50, dim, 100, 82);
  Index idx(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  idx.train(x.data(), n);
  idx.add(x.data(), n, nullptr);
  Result before = search(idx, q, 50, 10, 8);
  const std::size_t mem_before = idx.backend_info().device_memory_bytes;
  // Fill the card, leaving 64 MB, then add 2 GB.
  std::size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  std::vector<void*> filler;
  std::size_t to_take = free_b > (std::size_t{64} << 20) ? free_b - (std::size_t{64} << 20) : 0;
  while (to_take > (std::size_t{16} << 20)) {
    const std::size_t piece = std::min<std::size_t>(to_take, std::size_t{1} << 30);
    void* p = nullptr;
    if (cudaMalloc(&p, piece) != cudaSuccess) {
      (void)cudaGetLastError();
      break;
    }
    filler.push_back(p);
    to_take -= piece;
  }
  const int64_t big = (int64_t{2} << 30) / (dim * 4);
  std::vector<float> y(static_cast<std::size_t>(big * dim), 0.5f);
  bool threw_oom = false;
  try {
    idx.add(y.data(), big, nullptr);
  } catch (const ivfgpu::Error& e) {
    threw_oom = e.code() == ivfgpu::Errc::OutOfDeviceMemory;
    if (!threw_oom) ADD_FAILURE() << "unexpected error: " << e.what();
  }
  for (void* p : filler) cudaFree(p);
  EXPECT_TRUE(threw_oom);
  EXPECT_EQ(idx.ntotal(), n);
  EXPECT_EQ(idx.backend_info().device_memory_bytes, mem_before);
  Result after = search(idx, q, 50, 10, 8);
  EXPECT_EQ(after.ids, before.ids);
  EXPECT_EQ(after.dists, before.dists);
#endif
}

std::vector<float> read_fvecs(const std::string& path, int64_t& n, int64_t& dim) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> out;
  n = 0;
  dim = 0;
  int32_t d = 0;
  while (f.read(reinterpret_cast<char*>(&d), 4)) {
    dim = d;
    const std::size_t at = out.size();
    out.resize(at + d);
    f.read(reinterpret_cast<char*>(out.data() + at), 4 * d);
    ++n;
  }
  return out;
}

TEST(GpuBehaviour, RecallOnSiftsmallMatchesTheCpuAndFaiss) {
  IVFGPU_REQUIRE_GPU();
  const char* env = std::getenv("IVFGPU_DATA_DIR");
  const std::string dir = std::string(env != nullptr ? env : IVFGPU_DATA_DIR) + "/siftsmall/";
  int64_t n = 0, dim = 0, nq = 0, qd = 0, gn = 0, gd = 0;
  std::vector<float> base = read_fvecs(dir + "siftsmall_base.fvecs", n, dim);
  std::vector<float> q = read_fvecs(dir + "siftsmall_query.fvecs", nq, qd);
  std::vector<float> gt_raw = read_fvecs(dir + "siftsmall_groundtruth.ivecs", gn, gd);  // int32 payload
  if (n == 0 || nq == 0 || gn == 0) GTEST_SKIP() << "siftsmall not found under " << dir;
  const int32_t* gt = reinterpret_cast<const int32_t*>(gt_raw.data());
  Index gpu(dim, params_for(64, Metric::L2, BackendKind::Cuda)), cpu(dim, params_for(64, Metric::L2, BackendKind::Cpu));
  for (Index* idx : {&gpu, &cpu}) {
    idx->train(base.data(), n);
    idx->add(base.data(), n, nullptr);
  }
  const double faiss[] = {0.568, 0.897, 1.000};
  const int64_t probes[] = {1, 4, 16};
  for (int i = 0; i < 3; ++i) {
    double rec[2];
    Index* both[2] = {&gpu, &cpu};
    for (int b = 0; b < 2; ++b) {
      Result r = search(*both[b], q, nq, 10, probes[i]);
      int64_t hit = 0;
      for (int64_t qi = 0; qi < nq; ++qi)
        for (int64_t j = 0; j < 10; ++j)
          for (int64_t t = 0; t < 10; ++t)
            if (r.ids[qi * 10 + j] == gt[qi * gd + t]) ++hit;
      rec[b] = double(hit) / double(nq * 10);
    }
    std::printf("siftsmall nlist 64 k 10 nprobe %lld: recall GPU %.3f CPU %.3f FAISS %.3f\n",
                static_cast<long long>(probes[i]), rec[0], rec[1], faiss[i]);
    EXPECT_NEAR(rec[0], rec[1], 0.03);
    EXPECT_GE(rec[0], faiss[i] - 0.03) << "recall below FAISS's curve";
  }
}

}  // namespace
}  // namespace gputest
