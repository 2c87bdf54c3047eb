// Index files on the CUDA backend (CTest label "gpu"): a saved index loads on either backend
// (the device is chosen at load time), CUDA-built indexes round-trip, and the FAISS fixtures
// search on the GPU like FAISS. Every test skips, loudly, where no CUDA device is usable.
#include "faiss_fixture.hpp"
#include "io_test_util.hpp"

using namespace iotest;

namespace {

#define REQUIRE_CUDA_DEVICE()                                                                          \
  do {                                                                                                 \
    int32_t devices = 0;                                                                               \
    ASSERT_EQ(ivf_cuda_device_count(&devices), IVF_OK);                                                \
    if (devices == 0)                                                                                  \
      GTEST_SKIP() << "NO CUDA DEVICE (or library built without CUDA): GPU persistence tests skipped"; \
  } while (0)

constexpr int64_t kDim = 32, kNlist = 16, kN = 3000, kK = 10;

IndexPtr load_on(const std::string& path, ivf_backend backend) {
  ParamsPtr params = backend_params(backend);
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_load(path.c_str(), params.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr index(raw);
  if (raw != nullptr) EXPECT_EQ(info(raw, IVF_INFO_BACKEND), backend);
  return index;
}

void expect_equivalent(const ivf_index* a, const ivf_index* b, const char* what) {
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(info(a, IVF_INFO_NTOTAL), info(b, IVF_INFO_NTOTAL)) << what;
  const std::vector<float> q = make_data(64, kDim, 77);
  for (int64_t nprobe : {int64_t{1}, int64_t{4}, kNlist}) {
    const Results ra = search(a, q, kDim, kK, nprobe), rb = search(b, q, kDim, kK, nprobe);
    const Comparison c = compare_results(ra, rb, 64, kK, 1e-4);
    EXPECT_EQ(c.mismatches, 0) << what << ", nprobe " << nprobe;
  }
}

class GpuPersistence : public ::testing::TestWithParam<ivf_metric> {};

TEST_P(GpuPersistence, CpuFileLoadsOnCudaAndCudaFileLoadsOnCpu) {
  REQUIRE_CUDA_DEVICE();
  TempDir dir;
  IndexPtr cpu = make_index(kDim, kNlist, kN, GetParam(), IVF_BACKEND_CPU, 123456789);
  const std::string cpu_file = dir.file("cpu.ivf");
  ASSERT_EQ(ivf_save(cpu.get(), cpu_file.c_str()), IVF_OK);
  IndexPtr on_cuda = load_on(cpu_file, IVF_BACKEND_CUDA);
  expect_equivalent(cpu.get(), on_cuda.get(), "CPU file on CUDA");
  // The CUDA index saves the model it was given, byte for byte.
  const std::string cuda_file = dir.file("cuda.ivf");
  ASSERT_EQ(ivf_save(on_cuda.get(), cuda_file.c_str()), IVF_OK) << ivf_last_error_message();
  EXPECT_TRUE(read_bytes(cuda_file) == read_bytes(cpu_file)) << "CUDA snapshot differs from the model it restored";
  IndexPtr back_on_cpu = load_on(cuda_file, IVF_BACKEND_CPU);
  expect_equivalent(cpu.get(), back_on_cpu.get(), "CUDA file on CPU");
}

TEST_P(GpuPersistence, CudaBuiltIndexRoundTripsAndSavesAfterAdd) {
  REQUIRE_CUDA_DEVICE();
  TempDir dir;
  IndexPtr cuda = make_index(kDim, kNlist, kN, GetParam(), IVF_BACKEND_CUDA);
  const std::string path = dir.file("a.ivf");
  ASSERT_EQ(ivf_save(cuda.get(), path.c_str()), IVF_OK) << ivf_last_error_message();
  IndexPtr reloaded = load_on(path, IVF_BACKEND_CUDA);
  expect_equivalent(cuda.get(), reloaded.get(), "CUDA round trip");
  IndexPtr on_cpu = load_on(path, IVF_BACKEND_CPU);
  expect_equivalent(cuda.get(), on_cpu.get(), "CUDA-built file on CPU");
  // Serialise/deserialise on the device too.
  const std::vector<unsigned char> bytes = serialize(cuda.get());
  EXPECT_TRUE(bytes == read_bytes(path));
  // Save after add after load.
  const std::vector<float> more = make_data(500, kDim, 5150);
  ASSERT_EQ(ivf_add(cuda.get(), more.data(), IVF_DTYPE_F32, 500, kDim, nullptr), IVF_OK);
  ASSERT_EQ(ivf_add(reloaded.get(), more.data(), IVF_DTYPE_F32, 500, kDim, nullptr), IVF_OK);
  const std::string second = dir.file("b.ivf");
  ASSERT_EQ(ivf_save(reloaded.get(), second.c_str()), IVF_OK) << ivf_last_error_message();
  IndexPtr again = load_on(second, IVF_BACKEND_CUDA);
  expect_equivalent(cuda.get(), again.get(), "save after add after load");
  EXPECT_EQ(dir.entries().size(), 2u);
}

TEST_P(GpuPersistence, FaissWriterFromCuda) {
  REQUIRE_CUDA_DEVICE();
  if (GetParam() == IVF_METRIC_COSINE) GTEST_SKIP() << "FAISS has no cosine index (refusal tested on the CPU)";
  TempDir dir;
  IndexPtr cuda = make_index(kDim, kNlist, kN, GetParam(), IVF_BACKEND_CUDA);
  const std::string path = dir.file("x.faiss");
  ASSERT_EQ(ivf_save_faiss(cuda.get(), path.c_str()), IVF_OK) << ivf_last_error_message();
  IndexPtr on_cpu = load_on(path, IVF_BACKEND_CPU);
  expect_equivalent(cuda.get(), on_cpu.get(), "FAISS file from CUDA");
}

INSTANTIATE_TEST_SUITE_P(Metrics, GpuPersistence,
                         ::testing::Values(IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_COSINE),
                         [](const auto& info) {
                           return std::string(info.param == IVF_METRIC_L2 ? "L2" : info.param == IVF_METRIC_INNER_PRODUCT ? "IP" : "Cosine");
                         });

TEST(GpuFaissFixture, L2Nlist64MatchesFaiss) {
  REQUIRE_CUDA_DEVICE();
  check_fixture(kL2Fixture, IVF_BACKEND_CUDA);
}

TEST(GpuFaissFixture, InnerProductNlist32With64BitIdsMatchesFaiss) {
  REQUIRE_CUDA_DEVICE();
  check_fixture(kIpFixture, IVF_BACKEND_CUDA);
}

TEST(GpuFaissFixture, FixtureRoundTripsThroughTheDevice) {
  REQUIRE_CUDA_DEVICE();
  const std::string path = data_dir() + "/faiss/" + kL2Fixture.index_file;
  if (!file_exists(path)) GTEST_SKIP() << "FIXTURE MISSING: " << path;
  IndexPtr index = load_on(path, IVF_BACKEND_CUDA);
  TempDir dir;
  const std::string out = dir.file("copy.faiss");
  ASSERT_EQ(ivf_save_faiss(index.get(), out.c_str()), IVF_OK) << ivf_last_error_message();
  EXPECT_TRUE(read_bytes(out) == read_bytes(path)) << "FAISS file changed on its way through the GPU";
}

}  // namespace
