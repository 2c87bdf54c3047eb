// A sticky CUDA error (a kernel faulting on the index's device) makes every later call on the
// index return DeviceLost, never a result. It poisons the process's CUDA context, so it lives in
// a binary of its own. A bogus device pointer given to a search no longer causes one: it is
// refused first (InvalidArgument) and the device keeps serving, so the fault is the test's own.
#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "device_fault.hpp"
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

  // Device memory that is not device memory: refused before any kernel reads it.
  ivfgpu::SearchRequest a;
  a.queries = ivfgpu::MatrixView{reinterpret_cast<const float*>(uintptr_t{0x10}), ivfgpu::ElementType::F32, 10, dim,
                                 ivfgpu::MemoryKind::Device};
  a.k = 5;
  a.nprobe = 4;
  a.ids = reinterpret_cast<int64_t*>(uintptr_t{0x1000});
  a.dists = reinterpret_cast<float*>(uintptr_t{0x2000});
  a.memory = ivfgpu::MemoryKind::Device;
  try {
    idx.search(a);
    ADD_FAILURE() << "a search of an invalid device pointer must be refused";
  } catch (const ivfgpu::Error& e) {
    EXPECT_EQ(e.code(), ivfgpu::Errc::InvalidArgument) << e.what();
    std::printf("bogus device pointer: %s\n", e.what());
  }
  Result still = search(idx, q, 10, 5, 4);
  EXPECT_EQ(still.ids, ok.ids) << "the device must still serve after the refusal";

  // Now a real fault on the device.
  const cudaError_t fault = ivftest::fault_the_device();
  ASSERT_NE(fault, cudaSuccess) << "the faulting kernel did not fault";
  std::printf("device fault: %s\n", cudaGetErrorString(fault));

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
