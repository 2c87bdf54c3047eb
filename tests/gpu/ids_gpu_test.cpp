// The GPU twins of tests/capi/ids_test.cpp and the ids stress (32 searchers): remove / update /
// get / count on a CUDA index against a host model, filtered search against an index of the
// permitted vectors only (the filter applied inside the device scan), and mutations under load.
#include "common/id_workload.hpp"
#include "common/mutation_stress.hpp"
#include "common/test_util.hpp"

using namespace ivftest;


TEST(GpuIds, RandomWorkloadDuplicateIds) {
  IVFTEST_REQUIRE_GPU();
  run_id_workload(IVF_BACKEND_CUDA, false, 400, 31);
}
TEST(GpuIds, RandomWorkloadUniqueIds) {
  IVFTEST_REQUIRE_GPU();
  run_id_workload(IVF_BACKEND_CUDA, true, 400, 32);
}
TEST(GpuFilters, MatchAnIndexOfThePermittedVectors) {
  IVFTEST_REQUIRE_GPU();
  run_filter_workload(IVF_BACKEND_CUDA, 100000, 32, 64, 200, 10, {0.001, 0.01, 0.1, 0.5, 1.0}, false);
}
TEST(GpuFilters, HugeSparseIdsAndLargeK) {
  IVFTEST_REQUIRE_GPU();
  run_filter_workload(IVF_BACKEND_CUDA, 20000, 16, 32, 100, 200, {0.01, 0.5}, true);
}
TEST(GpuConcurrency, IdMutationsUnderThirtyTwoSearchers) {
  IVFTEST_REQUIRE_GPU();
  run_ids_stress(IVF_BACKEND_CUDA, 32, std::chrono::milliseconds(5000));
}
