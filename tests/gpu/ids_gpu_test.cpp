// The GPU twins of tests/capi/ids_test.cpp and the ids stress (32 searchers): remove / update /
// get / count on a CUDA index against a host model, filtered search against an index of the
// permitted vectors only (the filter applied inside the device scan), and mutations under load.
#include "common/id_workload.hpp"
#include "common/mutation_stress.hpp"
#include "common/test_util.hpp"

using namespace ivftest;

namespace {
bool have_gpu() {
  int32_t n = 0;
  return ivf_cuda_device_count(&n) == IVF_OK && n > 0;
}
#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no usable CUDA device: GPU test skipped"
}  // namespace

TEST(GpuIds, RandomWorkloadDuplicateIds) {
  REQUIRE_GPU();
  run_id_workload(IVF_BACKEND_CUDA, false, 400, 31);
}
TEST(GpuIds, RandomWorkloadUniqueIds) {
  REQUIRE_GPU();
  run_id_workload(IVF_BACKEND_CUDA, true, 400, 32);
}
TEST(GpuFilters, MatchAnIndexOfThePermittedVectors) {
  REQUIRE_GPU();
  run_filter_workload(IVF_BACKEND_CUDA, 100000, 32, 64, 200, 10, {0.001, 0.01, 0.1, 0.5, 1.0}, false);
}
TEST(GpuFilters, HugeSparseIdsAndLargeK) {
  REQUIRE_GPU();
  run_filter_workload(IVF_BACKEND_CUDA, 20000, 16, 32, 100, 200, {0.01, 0.5}, true);
}
TEST(GpuConcurrency, IdMutationsUnderThirtyTwoSearchers) {
  REQUIRE_GPU();
  run_ids_stress(IVF_BACKEND_CUDA, 32, std::chrono::milliseconds(5000));
}
