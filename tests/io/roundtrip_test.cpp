// Round trips of the native format on the CPU backend: save/load and serialize/deserialize give
// the same index (same search results, same properties), and the size protocol of
// ivf_serialize behaves as documented.
#include <thread>

#include "io_test_util.hpp"

using namespace iotest;

namespace {

constexpr int64_t kDim = 16, kNlist = 8, kN = 600, kK = 10;

void expect_same_index(const ivf_index* a, const ivf_index* b) {
  for (ivf_info_key key : {IVF_INFO_DIM, IVF_INFO_NLIST, IVF_INFO_METRIC, IVF_INFO_NTOTAL, IVF_INFO_IS_TRAINED, IVF_INFO_NPROBE})
    EXPECT_EQ(info(a, key), info(b, key)) << "info key " << key;
  const std::vector<float> q = make_data(25, kDim, 99);
  for (int64_t nprobe : {int64_t{1}, int64_t{3}, kNlist}) {
    const Results ra = search(a, q, kDim, kK, nprobe), rb = search(b, q, kDim, kK, nprobe);
    EXPECT_EQ(ra.ids, rb.ids) << "nprobe " << nprobe;
    EXPECT_EQ(ra.dists, rb.dists) << "nprobe " << nprobe;
  }
}

class RoundTrip : public ::testing::TestWithParam<ivf_metric> {};

TEST_P(RoundTrip, SaveThenLoadGivesTheSameIndex) {
  TempDir dir;
  IndexPtr original = make_index(kDim, kNlist, kN, GetParam(), IVF_BACKEND_CPU, 1000000007);
  const std::string path = dir.file("index.ivf");
  ASSERT_EQ(ivf_save(original.get(), path.c_str()), IVF_OK) << ivf_last_error_message();
  ivf_index* raw = nullptr;
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  ASSERT_EQ(ivf_load(path.c_str(), cpu.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr loaded(raw);
  EXPECT_STREQ(ivf_last_error_message(), "");
  expect_same_index(original.get(), loaded.get());
  EXPECT_EQ(info(loaded.get(), IVF_INFO_BACKEND), IVF_BACKEND_CPU);
  // The file is the serialised image, byte for byte, and it is stable over a second round.
  EXPECT_EQ(read_bytes(path), serialize(original.get()));
  EXPECT_EQ(serialize(loaded.get()), serialize(original.get()));
  EXPECT_EQ(dir.entries().size(), 1u) << "a temporary file was left behind";
}

TEST_P(RoundTrip, SerializeThenDeserializeGivesTheSameIndex) {
  IndexPtr original = make_index(kDim, kNlist, kN, GetParam(), IVF_BACKEND_CPU);
  const std::vector<unsigned char> bytes = serialize(original.get());
  ivf_index* raw = nullptr;
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), cpu.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr loaded(raw);
  expect_same_index(original.get(), loaded.get());
}

TEST_P(RoundTrip, SaveAfterAddAfterLoad) {
  TempDir dir;
  IndexPtr original = make_index(kDim, kNlist, kN, GetParam(), IVF_BACKEND_CPU);
  const std::string first = dir.file("first.ivf"), second = dir.file("second.ivf");
  ASSERT_EQ(ivf_save(original.get(), first.c_str()), IVF_OK);
  ivf_index* raw = nullptr;
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  ASSERT_EQ(ivf_load(first.c_str(), cpu.get(), &raw), IVF_OK);
  IndexPtr loaded(raw);
  // The same additions to the original and to the loaded copy.
  const std::vector<float> more = make_data(150, kDim, 4242);
  std::vector<int64_t> ids(150);
  for (int64_t i = 0; i < 150; ++i) ids[i] = -5 - i;  // negative ids other than -1 are allowed
  ASSERT_EQ(ivf_add(original.get(), more.data(), IVF_DTYPE_F32, 150, kDim, ids.data()), IVF_OK);
  ASSERT_EQ(ivf_add(loaded.get(), more.data(), IVF_DTYPE_F32, 150, kDim, ids.data()), IVF_OK);
  ASSERT_EQ(ivf_save(loaded.get(), second.c_str()), IVF_OK) << ivf_last_error_message();
  ASSERT_EQ(ivf_load(second.c_str(), cpu.get(), &raw), IVF_OK);
  IndexPtr reloaded(raw);
  EXPECT_EQ(info(reloaded.get(), IVF_INFO_NTOTAL), kN + 150);
  expect_same_index(original.get(), reloaded.get());
}

INSTANTIATE_TEST_SUITE_P(Metrics, RoundTrip,
                         ::testing::Values(IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_COSINE),
                         [](const auto& info) {
                           return std::string(info.param == IVF_METRIC_L2 ? "L2" : info.param == IVF_METRIC_INNER_PRODUCT ? "IP" : "Cosine");
                         });

TEST(RoundTrip, UntrainedIndexRoundTripsAndTrainsAfterLoad) {
  ParamsPtr params = make_params(4, IVF_METRIC_L2, IVF_BACKEND_CPU, 2);
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_create(&raw, 3, params.get()), IVF_OK);
  IndexPtr untrained(raw);
  const std::vector<unsigned char> bytes = serialize(untrained.get());
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), cpu.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr loaded(raw);
  EXPECT_EQ(info(loaded.get(), IVF_INFO_IS_TRAINED), 0);
  EXPECT_EQ(info(loaded.get(), IVF_INFO_NLIST), 4);
  EXPECT_EQ(info(loaded.get(), IVF_INFO_NPROBE), 2);
  const std::vector<float> x = make_data(40, 3, 5);
  EXPECT_EQ(ivf_train(loaded.get(), x.data(), IVF_DTYPE_F32, 40, 3), IVF_OK) << ivf_last_error_message();
  EXPECT_EQ(ivf_add(loaded.get(), x.data(), IVF_DTYPE_F32, 40, 3, nullptr), IVF_OK);
}

TEST(RoundTrip, EmptyTrainedIndexPadsAfterLoad) {
  IndexPtr empty = make_index(5, 3, 0, IVF_METRIC_L2, IVF_BACKEND_CPU);
  const std::vector<unsigned char> bytes = serialize(empty.get());
  ivf_index* raw = nullptr;
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), cpu.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr loaded(raw);
  const Results r = search(loaded.get(), make_data(2, 5, 1), 5, 3, 3);
  for (int64_t id : r.ids) EXPECT_EQ(id, -1);
  for (float d : r.dists) EXPECT_TRUE(std::isinf(d) && d > 0);
}

TEST(RoundTrip, FileParametersWinOverTheCallersBuildKeys) {
  IndexPtr original = make_index(kDim, kNlist, 100, IVF_METRIC_INNER_PRODUCT, IVF_BACKEND_CPU);
  const std::vector<unsigned char> bytes = serialize(original.get());
  // The caller asks for another nlist and metric: the file's are kept, the backend is the caller's.
  ParamsPtr other = make_params(99, IVF_METRIC_L2, IVF_BACKEND_CPU, 77);
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), other.get(), &raw), IVF_OK);
  IndexPtr loaded(raw);
  EXPECT_EQ(info(loaded.get(), IVF_INFO_NLIST), kNlist);
  EXPECT_EQ(info(loaded.get(), IVF_INFO_METRIC), IVF_METRIC_INNER_PRODUCT);
  EXPECT_EQ(info(loaded.get(), IVF_INFO_NPROBE), kNlist);
  EXPECT_EQ(info(loaded.get(), IVF_INFO_BACKEND), IVF_BACKEND_CPU);
  // NULL params: defaults (backend AUTO) -- still loads.
  ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), nullptr, &raw), IVF_OK) << ivf_last_error_message();
  ivf_free(raw);
}

TEST(RoundTrip, SerializeSizeProtocol) {
  IndexPtr index = make_index(4, 2, 30, IVF_METRIC_L2, IVF_BACKEND_CPU);
  size_t need = 0;
  ASSERT_EQ(ivf_serialize(index.get(), nullptr, 12345, &need), IVF_OK);  // capacity ignored
  ASSERT_GT(need, 128u);
  // Short by one byte: BUFFER_TOO_SMALL, *size = bytes needed, the buffer untouched.
  std::vector<unsigned char> buf(need + 16, 0xEE);
  size_t size = 7;
  EXPECT_EQ(ivf_serialize(index.get(), buf.data(), need - 1, &size), IVF_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(size, need);
  EXPECT_NE(std::string(ivf_last_error_message()), "");
  for (unsigned char c : buf) ASSERT_EQ(c, 0xEE);
  size = 0;
  EXPECT_EQ(ivf_serialize(index.get(), buf.data(), 0, &size), IVF_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(size, need);
  // Larger than needed: exactly `need` bytes written, nothing beyond.
  size = 0;
  ASSERT_EQ(ivf_serialize(index.get(), buf.data(), buf.size(), &size), IVF_OK);
  EXPECT_EQ(size, need);
  for (std::size_t i = need; i < buf.size(); ++i) ASSERT_EQ(buf[i], 0xEE);
}

TEST(RoundTrip, ArgumentChecksWriteNoOutput) {
  IndexPtr index = make_index(4, 2, 10, IVF_METRIC_L2, IVF_BACKEND_CPU);
  TempDir dir;
  const std::string path = dir.file("x.ivf");
  EXPECT_EQ(ivf_save(nullptr, path.c_str()), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_save(index.get(), nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_save(index.get(), ""), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_save_faiss(nullptr, path.c_str()), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_save_faiss(index.get(), nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_FALSE(file_exists(path));
  ivf_index* out = sentinel();
  EXPECT_EQ(ivf_load(nullptr, nullptr, &out), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_load(path.c_str(), nullptr, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_load(path.c_str(), nullptr, &out), IVF_ERR_IO);  // missing file
  EXPECT_NE(std::string(ivf_last_error_message()).find("x.ivf"), std::string::npos);
  EXPECT_EQ(ivf_load(dir.path().c_str(), nullptr, &out), IVF_ERR_IO);  // a directory
  EXPECT_EQ(ivf_deserialize(nullptr, 10, nullptr, &out), IVF_ERR_INVALID_ARGUMENT);
  const unsigned char byte = 0;
  EXPECT_EQ(ivf_deserialize(&byte, 0, nullptr, &out), IVF_ERR_CORRUPT_DATA);
  EXPECT_EQ(ivf_deserialize(&byte, 1, nullptr, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out, sentinel());
  size_t size = 0;
  EXPECT_EQ(ivf_serialize(nullptr, nullptr, 0, &size), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ivf_serialize(index.get(), nullptr, 0, nullptr), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(size, 0u);
}

TEST(RoundTrip, SavesRunWhileSearching) {
  // Saves take the shared lock only to copy the model: searches proceed meanwhile.
  IndexPtr index = make_index(kDim, kNlist, kN, IVF_METRIC_L2, IVF_BACKEND_CPU);
  TempDir dir;
  const std::vector<float> q = make_data(10, kDim, 3);
  const Results expected = search(index.get(), q, kDim, kK, kNlist);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        if (t == 0) {
          EXPECT_EQ(ivf_save(index.get(), dir.file("c.ivf").c_str()), IVF_OK);
        } else {
          EXPECT_EQ(search(index.get(), q, kDim, kK, kNlist).ids, expected.ids);
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(dir.entries().size(), 1u);
}

}  // namespace
