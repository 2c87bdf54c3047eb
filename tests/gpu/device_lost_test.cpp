// A sticky CUDA error (here: a search reading a bogus device pointer) makes that call fail and
// every later call on the index return DeviceLost, never a result. It poisons the process's
// CUDA context, so it lives in a binary of its own.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "gpu_test_util.hpp"

namespace gputest {
namespace {

TEST(GpuDeviceLost, StickyErrorLosesTheIndexForGood) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 32, n = 4000, nlist = 16;
  std::vector<float> x = mixture(n, dim, 40, 91);
  std::vector<float> q = mixture(10, dim, 40, 92);
  Index idx(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  idx.train(x.data(), n);
  idx.add(x.data(), n, nullptr);
  Result ok = search(idx, q, 10, 5, 4);
  EXPECT_NE(ok.ids[0], -1);

  // Device memory that is not device memory: the first kernel to read it faults.
  std::vector<int64_t> ids(10 * 5, -7);
  std::vector<float> dists(10 * 5, 0.0f);
  ivfgpu::SearchRequest a;
  a.queries = ivfgpu::MatrixView{reinterpret_cast<const float*>(uintptr_t{0x10}), ivfgpu::ElementType::F32, 10, dim,
                                 ivfgpu::MemoryKind::Device};
  a.k = 5;
  a.nprobe = 4;
  a.ids = reinterpret_cast<int64_t*>(uintptr_t{0x1000});
  a.dists = reinterpret_cast<float*>(uintptr_t{0x2000});
  a.memory = ivfgpu::MemoryKind::Device;
  bool threw = false;
  try {
    idx.search(a);
  } catch (const ivfgpu::Error& e) {
    threw = true;
    std::printf("faulting search: %s\n", e.what());
  }
  EXPECT_TRUE(threw) << "a search reading an invalid device pointer must fail";

  auto expect_lost = [](auto&& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " succeeded after the device was lost";
    } catch (const ivfgpu::Error& e) {
      EXPECT_EQ(e.code(), ivfgpu::Errc::DeviceLost) << what << ": " << e.what();
    }
  };
  expect_lost([&] { search(idx, q, 10, 5, 4); }, "host search");
  expect_lost([&] { search(idx, q, 10, 5, 4); }, "second host search");
  expect_lost([&] { idx.add(x.data(), 10, nullptr); }, "add");
  expect_lost([&] { idx.reset(); }, "reset");
  EXPECT_EQ(idx.ntotal(), n);
}

}  // namespace
}  // namespace gputest
