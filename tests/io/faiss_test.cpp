// FAISS IndexIVFFlat interop: the fixture files written by FAISS 1.15 load and search like
// FAISS (same ids ties aside, distances within 1e-4 relative); our writer reproduces FAISS's
// layout byte for byte; inconsistent and unsupported FAISS files give documented statuses.
#include <algorithm>
#include <limits>

#include "faiss_fixture.hpp"
#include "io_test_util.hpp"

using namespace iotest;

namespace {

// ---- the fixtures (CPU backend here; tests/io/gpu_test.cpp runs them on CUDA) -------------

TEST(FaissFixture, L2Nlist64MatchesFaiss) { check_fixture(kL2Fixture, IVF_BACKEND_CPU); }
TEST(FaissFixture, InnerProductNlist32With64BitIdsMatchesFaiss) { check_fixture(kIpFixture, IVF_BACKEND_CPU); }

TEST(FaissFixture, OurWriterReproducesFaissFilesByteForByte) {
  for (const FixtureSpec* spec : {&kL2Fixture, &kIpFixture}) {
    const std::string path = data_dir() + "/faiss/" + spec->index_file;
    if (!file_exists(path)) GTEST_SKIP() << "FIXTURE MISSING: " << path << " (see ../shared/data/README.md)";
    const std::vector<unsigned char> original = read_bytes(path);
    ivf_index* raw = nullptr;
    ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
    // Through the memory loader this time (ivf_deserialize accepts FAISS images too).
    ASSERT_EQ(ivf_deserialize(original.data(), original.size(), cpu.get(), &raw), IVF_OK) << ivf_last_error_message();
    IndexPtr index(raw);
    TempDir dir;
    const std::string out = dir.file("copy.faiss");
    ASSERT_EQ(ivf_save_faiss(index.get(), out.c_str()), IVF_OK) << ivf_last_error_message();
    const std::vector<unsigned char> written = read_bytes(out);
    ASSERT_EQ(written.size(), original.size()) << spec->index_file;
    EXPECT_TRUE(written == original) << spec->index_file << ": our FAISS writer differs from FAISS's own file";
  }
}

// ---- our writer on our own indexes -----------------------------------------------------------

std::vector<unsigned char> faiss_image(const ivf_index* index) {
  TempDir dir;
  const std::string path = dir.file("i.faiss");
  EXPECT_EQ(ivf_save_faiss(index, path.c_str()), IVF_OK) << ivf_last_error_message();
  return read_bytes(path);
}

TEST(FaissWriter, RoundTripKeepsResultsAndIds) {
  for (ivf_metric metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
    IndexPtr index = make_index(12, 6, 300, metric, IVF_BACKEND_CPU, int64_t{1} << 40);
    const std::vector<unsigned char> bytes = faiss_image(index.get());
    ASSERT_EQ(std::memcmp(bytes.data(), "IwFl", 4), 0);
    ivf_index* raw = nullptr;
    ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
    ASSERT_EQ(ivf_deserialize(bytes.data(), bytes.size(), cpu.get(), &raw), IVF_OK) << ivf_last_error_message();
    IndexPtr loaded(raw);
    EXPECT_EQ(info(loaded.get(), IVF_INFO_METRIC), metric);
    EXPECT_EQ(info(loaded.get(), IVF_INFO_NPROBE), 6);
    const std::vector<float> q = make_data(20, 12, 8);
    const Results a = search(index.get(), q, 12, 10, 3), b = search(loaded.get(), q, 12, 10, 3);
    EXPECT_EQ(a.ids, b.ids);
    EXPECT_EQ(a.dists, b.dists);
    // The model is the original's: our image matches from the sections on (the header differs
    // only in the training parameters, which FAISS files do not carry).
    const std::vector<unsigned char> a_img = serialize(loaded.get()), b_img = serialize(index.get());
    ASSERT_EQ(a_img.size(), b_img.size());
    EXPECT_TRUE(std::equal(a_img.begin() + 128, a_img.end(), b_img.begin() + 128));
  }
}

TEST(FaissWriter, LayoutFieldByField) {
  // dim 2, nlist 4, 3 vectors: at most 3 non-empty lists of 4 -> the sparse list layout when
  // no more than 2 are filled, "full" otherwise; both must follow index_write.cpp.
  IndexPtr index = make_index(2, 4, 3, IVF_METRIC_L2, IVF_BACKEND_CPU, 100);
  const std::vector<unsigned char> b = faiss_image(index.get());
  FaissLayout L(b);
  EXPECT_EQ(L.fourcc(0), "IwFl");
  EXPECT_EQ(L.i32(FaissLayout::kD), 2);
  EXPECT_EQ(L.i64(FaissLayout::kNtotal), 3);
  EXPECT_EQ(L.i64(FaissLayout::kDummy1), int64_t{1} << 20);
  EXPECT_EQ(L.i64(FaissLayout::kDummy2), int64_t{1} << 20);
  EXPECT_EQ(b[FaissLayout::kTrained], 1);
  EXPECT_EQ(L.i32(FaissLayout::kMetric), 1);  // METRIC_L2
  EXPECT_EQ(L.u64(FaissLayout::kNlist), 4u);
  EXPECT_EQ(L.u64(FaissLayout::kNprobe), 4u);
  EXPECT_EQ(L.fourcc(FaissLayout::kQFourcc), "IxF2");
  EXPECT_EQ(L.i32(FaissLayout::kQD), 2);
  EXPECT_EQ(L.i64(FaissLayout::kQNtotal), 4);
  EXPECT_EQ(L.u64(FaissLayout::kQCodes), 8u);
  EXPECT_EQ(b[L.direct_map()], 0);
  EXPECT_EQ(L.u64(L.direct_map() + 1), 0u);
  EXPECT_EQ(L.fourcc(L.invlists()), "ilar");
  EXPECT_EQ(L.u64(L.invlists() + 4), 4u);
  EXPECT_EQ(L.u64(L.invlists() + 12), 8u);  // code size = 4 d
  const std::string type = L.fourcc(L.invlists() + 20);
  const uint64_t nsizes = L.u64(L.invlists() + 24);
  uint64_t non_empty = 0, total = 0;
  if (type == "full") {
    ASSERT_EQ(nsizes, 4u);
    for (uint64_t i = 0; i < 4; ++i) {
      non_empty += L.u64(L.invlists() + 32 + 8 * i) > 0;
      total += L.u64(L.invlists() + 32 + 8 * i);
    }
    EXPECT_GT(non_empty, 2u);
  } else {
    ASSERT_EQ(type, "sprs");
    ASSERT_EQ(nsizes % 2, 0u);
    non_empty = nsizes / 2;
    for (uint64_t i = 0; i < nsizes; i += 2) total += L.u64(L.invlists() + 32 + 8 * (i + 1));
    EXPECT_LE(non_empty, 2u);
  }
  EXPECT_EQ(total, 3u);
  EXPECT_EQ(b.size(), L.invlists() + 32 + 8 * nsizes + 3 * (8 + 8));
}

TEST(FaissWriter, CosineAndBadArgumentsAreRefused) {
  IndexPtr cosine = make_index(4, 2, 10, IVF_METRIC_COSINE, IVF_BACKEND_CPU);
  TempDir dir;
  const std::string path = dir.file("c.faiss");
  EXPECT_EQ(ivf_save_faiss(cosine.get(), path.c_str()), IVF_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(ivf_last_error_message()).find("cosine"), std::string::npos);
  EXPECT_TRUE(dir.entries().empty()) << "a refused save left a file";
}

TEST(FaissWriter, UntrainedAndEmptyIndexesRoundTrip) {
  ParamsPtr params = make_params(3, IVF_METRIC_INNER_PRODUCT, IVF_BACKEND_CPU, 2);
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_create(&raw, 4, params.get()), IVF_OK);
  IndexPtr untrained(raw);
  std::vector<unsigned char> b = faiss_image(untrained.get());
  EXPECT_EQ(try_load(b), IVF_OK) << ivf_last_error_message();
  IndexPtr empty = make_index(4, 3, 0, IVF_METRIC_L2, IVF_BACKEND_CPU);
  b = faiss_image(empty.get());
  EXPECT_EQ(try_load(b), IVF_OK) << ivf_last_error_message();
}

// ---- hostile FAISS files ------------------------------------------------------------------

TEST(FaissHostile, TruncationAtEveryByteIsCorruptData) {
  IndexPtr index = make_index(3, 4, 12, IVF_METRIC_L2, IVF_BACKEND_CPU);
  const std::vector<unsigned char> b = faiss_image(index.get());
  for (std::size_t len = 0; len < b.size(); ++len)
    ASSERT_EQ(try_load(b, len), IVF_ERR_CORRUPT_DATA) << "length " << len << ": " << ivf_last_error_message();
}

TEST(FaissHostile, EverySingleBitFlipGivesADocumentedStatus) {
  // FAISS files carry no checksum: a flipped bit in a vector is a different vector. What is
  // required: no crash, a documented status, and an index that works whenever one loads.
  IndexPtr index = make_index(3, 4, 12, IVF_METRIC_INNER_PRODUCT, IVF_BACKEND_CPU);
  const std::vector<unsigned char> b = faiss_image(index.get());
  int ok = 0, corrupt = 0, unsupported = 0;
  for (std::size_t byte = 0; byte < b.size(); ++byte)
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<unsigned char> f = b;
      f[byte] ^= static_cast<unsigned char>(1u << bit);
      const ivf_status s = try_load(f);
      ASSERT_TRUE(s == IVF_OK || s == IVF_ERR_CORRUPT_DATA || s == IVF_ERR_UNSUPPORTED)
          << "byte " << byte << " bit " << bit << " gave " << s << ": " << ivf_last_error_message();
      (s == IVF_OK ? ok : s == IVF_ERR_CORRUPT_DATA ? corrupt : unsupported)++;
    }
  // Every structural field is cross-checked: flips outside payloads must mostly be caught.
  EXPECT_GT(corrupt, 0);
  std::printf("FAISS bit flips: %d loaded (payload bits), %d corrupt, %d unsupported\n", ok, corrupt, unsupported);
}

// A row an add would refuse (squared norm past 4.25e37 under L2 or inner product) cannot come
// in through a file either: the value that makes it so is written into the FAISS image.
TEST(FaissHostile, RowsWhoseDistancesCouldOverflowAreCorruptData) {
  for (ivf_metric metric : {IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT}) {
    ParamsPtr params = make_params(2, metric, IVF_BACKEND_CPU);
    ivf_index* raw = nullptr;
    ASSERT_EQ(ivf_create(&raw, 4, params.get()), IVF_OK);
    IndexPtr index(raw);
    const std::vector<float> train = make_data(64, 4, 9);
    ASSERT_EQ(ivf_train(raw, train.data(), IVF_DTYPE_F32, 64, 4), IVF_OK);
    const float marked[4] = {0.5f, 12345.5f, -0.25f, 1.0f};
    ASSERT_EQ(ivf_add(raw, marked, IVF_DTYPE_F32, 1, 4, nullptr), IVF_OK);
    std::vector<unsigned char> b = faiss_image(index.get());
    ASSERT_EQ(try_load(b), IVF_OK) << ivf_last_error_message();
    const float mark = 12345.5f, huge = 7e18f;  // 7e18^2 = 4.9e37
    const auto* m = reinterpret_cast<const unsigned char*>(&mark);
    const auto at = std::search(b.begin(), b.end(), m, m + sizeof(float));
    ASSERT_NE(at, b.end());
    std::memcpy(&*at, &huge, sizeof(float));
    EXPECT_EQ(try_load(b), IVF_ERR_CORRUPT_DATA) << "metric " << metric;
    EXPECT_NE(std::string(ivf_last_error_message()).find("squared norm"), std::string::npos) << ivf_last_error_message();
  }
}

struct FaissCase {
  const char* name;
  std::function<void(FaissLayout&)> edit;
  ivf_status expected;
};

TEST(FaissHostile, InconsistentAndUnsupportedFields) {
  IndexPtr full_index = make_index(3, 4, 12, IVF_METRIC_L2, IVF_BACKEND_CPU);
  const std::vector<unsigned char> base = faiss_image(full_index.get());
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  using L = FaissLayout;
  const FaissCase cases[] = {
      {"index fourcc IwPQ", [](L& f) { f.set_fourcc(0, "IwPQ"); }, IVF_ERR_UNSUPPORTED},
      {"index fourcc IvFl (legacy)", [](L& f) { f.set_fourcc(0, "IvFl"); }, IVF_ERR_UNSUPPORTED},
      {"index fourcc IxF2 (a flat index)", [](L& f) { f.set_fourcc(0, "IxF2"); }, IVF_ERR_UNSUPPORTED},
      {"d 0", [](L& f) { f.set<int32_t>(L::kD, 0); }, IVF_ERR_CORRUPT_DATA},
      {"d -1", [](L& f) { f.set<int32_t>(L::kD, -1); }, IVF_ERR_CORRUPT_DATA},
      {"d 4 (quantizer says 3)", [](L& f) { f.set<int32_t>(L::kD, 4); }, IVF_ERR_CORRUPT_DATA},
      {"d int32 max", [](L& f) { f.set<int32_t>(L::kD, std::numeric_limits<int32_t>::max()); }, IVF_ERR_CORRUPT_DATA},
      {"ntotal -1", [](L& f) { f.set<int64_t>(L::kNtotal, -1); }, IVF_ERR_CORRUPT_DATA},
      {"ntotal +1 (lists sum to 12)", [](L& f) { f.set<int64_t>(L::kNtotal, 13); }, IVF_ERR_CORRUPT_DATA},
      {"ntotal max", [kMax](L& f) { f.set<int64_t>(L::kNtotal, kMax); }, IVF_ERR_CORRUPT_DATA},
      {"is_trained 2", [](L& f) { f.set<uint8_t>(L::kTrained, 2); }, IVF_ERR_CORRUPT_DATA},
      {"is_trained 0 with vectors", [](L& f) { f.set<uint8_t>(L::kTrained, 0); }, IVF_ERR_CORRUPT_DATA},
      {"metric IP, quantizer L2", [](L& f) { f.set<int32_t>(L::kMetric, 0); }, IVF_ERR_CORRUPT_DATA},
      {"metric L1", [](L& f) { f.set<int32_t>(L::kMetric, 2); }, IVF_ERR_UNSUPPORTED},
      {"metric 7", [](L& f) { f.set<int32_t>(L::kMetric, 7); }, IVF_ERR_CORRUPT_DATA},
      {"metric -1", [](L& f) { f.set<int32_t>(L::kMetric, -1); }, IVF_ERR_CORRUPT_DATA},
      {"nlist 0", [](L& f) { f.set<uint64_t>(L::kNlist, 0); }, IVF_ERR_CORRUPT_DATA},
      {"nlist 5 (quantizer holds 4)", [](L& f) { f.set<uint64_t>(L::kNlist, 5); }, IVF_ERR_CORRUPT_DATA},
      {"nlist 2^64-1", [](L& f) { f.set<uint64_t>(L::kNlist, ~uint64_t{0}); }, IVF_ERR_CORRUPT_DATA},
      {"nprobe 0", [](L& f) { f.set<uint64_t>(L::kNprobe, 0); }, IVF_ERR_CORRUPT_DATA},
      {"nprobe 2^63", [](L& f) { f.set<uint64_t>(L::kNprobe, uint64_t{1} << 63); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer HNSW", [](L& f) { f.set_fourcc(L::kQFourcc, "IHNf"); }, IVF_ERR_UNSUPPORTED},
      {"quantizer IxFl (other metric)", [](L& f) { f.set_fourcc(L::kQFourcc, "IxFl"); }, IVF_ERR_UNSUPPORTED},
      {"quantizer IxFI with L2 metric", [](L& f) { f.set_fourcc(L::kQFourcc, "IxFI"); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer fourcc binary", [](L& f) { f.set<uint32_t>(L::kQFourcc, 0x01020304); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer d 2", [](L& f) { f.set<int32_t>(L::kQD, 2); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer ntotal 3 (nlist 4)", [](L& f) { f.set<int64_t>(L::kQNtotal, 3); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer ntotal -1", [](L& f) { f.set<int64_t>(L::kQNtotal, -1); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer metric IP", [](L& f) { f.set<int32_t>(L::kQMetric, 0); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer is_trained 9", [](L& f) { f.set<uint8_t>(L::kQTrained, 9); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer codes 11", [](L& f) { f.set<uint64_t>(L::kQCodes, 11); }, IVF_ERR_CORRUPT_DATA},
      {"quantizer codes 2^62", [](L& f) { f.set<uint64_t>(L::kQCodes, uint64_t{1} << 62); }, IVF_ERR_CORRUPT_DATA},
      {"centroid NaN", [](L& f) { f.set<float>(L::kQCodes + 8, std::numeric_limits<float>::quiet_NaN()); }, IVF_ERR_CORRUPT_DATA},
      {"direct map type 3", [](L& f) { f.set<uint8_t>(f.direct_map(), 3); }, IVF_ERR_CORRUPT_DATA},
      {"direct map array 1, type 0", [](L& f) { f.set<uint64_t>(f.direct_map() + 1, 1); }, IVF_ERR_CORRUPT_DATA},
      {"direct map array 2^61", [](L& f) { f.set<uint64_t>(f.direct_map() + 1, uint64_t{1} << 61); }, IVF_ERR_CORRUPT_DATA},
      {"direct map type 1 without array", [](L& f) { f.set<uint8_t>(f.direct_map(), 1); }, IVF_ERR_CORRUPT_DATA},
      {"on-disk lists", [](L& f) { f.set_fourcc(f.invlists(), "ilod"); }, IVF_ERR_UNSUPPORTED},
      {"null lists", [](L& f) { f.set_fourcc(f.invlists(), "il00"); }, IVF_ERR_UNSUPPORTED},
      {"lists fourcc binary", [](L& f) { f.set<uint32_t>(f.invlists(), 0xfffefdfc); }, IVF_ERR_CORRUPT_DATA},
      {"lists nlist 3", [](L& f) { f.set<uint64_t>(f.invlists() + 4, 3); }, IVF_ERR_CORRUPT_DATA},
      {"code size 16", [](L& f) { f.set<uint64_t>(f.invlists() + 12, 16); }, IVF_ERR_CORRUPT_DATA},
      {"list type 'xxxx'", [](L& f) { f.set_fourcc(f.invlists() + 20, "xxxx"); }, IVF_ERR_CORRUPT_DATA},
      {"sizes count 3", [](L& f) { f.set<uint64_t>(f.invlists() + 24, 3); }, IVF_ERR_CORRUPT_DATA},
      {"sizes count 2^61", [](L& f) { f.set<uint64_t>(f.invlists() + 24, uint64_t{1} << 61); }, IVF_ERR_CORRUPT_DATA},
      {"sizes count max", [](L& f) { f.set<uint64_t>(f.invlists() + 24, ~uint64_t{0}); }, IVF_ERR_CORRUPT_DATA},
      {"list size +1", [](L& f) { f.add_to_list_size(0, 1); }, IVF_ERR_CORRUPT_DATA},
      {"list size huge (sum overflows)", [](L& f) { f.set<uint64_t>(f.invlists() + 32, ~uint64_t{0} - 3); }, IVF_ERR_CORRUPT_DATA},
      {"first id -1", [](L& f) { f.set<int64_t>(f.first_ids(), -1); }, IVF_ERR_CORRUPT_DATA},
      {"first vector Inf", [](L& f) { f.set<float>(f.first_codes(), std::numeric_limits<float>::infinity()); }, IVF_ERR_CORRUPT_DATA},
      {"trailing byte", [](L& f) { f.bytes.push_back(0); }, IVF_ERR_CORRUPT_DATA},
      {"ids of the last list cut", [](L& f) { if (f.bytes.size() > 8) f.bytes.resize(f.bytes.size() - 8); }, IVF_ERR_CORRUPT_DATA},
  };
  for (const FaissCase& c : cases) {
    FaissLayout f(base);
    c.edit(f);
    EXPECT_EQ(try_load(f.bytes), c.expected) << c.name << ": " << ivf_last_error_message();
  }
}

TEST(FaissHostile, SparseListsOutOfOrderOrOutOfRange) {
  IndexPtr index = make_index(3, 8, 2, IVF_METRIC_L2, IVF_BACKEND_CPU);  // 2 vectors, 8 lists -> "sprs"
  const std::vector<unsigned char> base = faiss_image(index.get());
  FaissLayout probe(base);
  ASSERT_EQ(probe.fourcc(probe.invlists() + 20), "sprs");
  EXPECT_EQ(try_load(base), IVF_OK);
  const uint64_t nsizes = probe.u64(probe.invlists() + 24);
  const std::size_t first = probe.invlists() + 32;
  {
    FaissLayout f(base);
    f.set<uint64_t>(first, 8);  // list number == nlist
    EXPECT_EQ(try_load(f.bytes), IVF_ERR_CORRUPT_DATA) << ivf_last_error_message();
  }
  if (nsizes == 4) {  // two lists: swap their numbers -> out of order
    FaissLayout f(base);
    const uint64_t a = f.u64(first), b = f.u64(first + 16);
    f.set<uint64_t>(first, b);
    f.set<uint64_t>(first + 16, a);
    EXPECT_EQ(try_load(f.bytes), IVF_ERR_CORRUPT_DATA) << ivf_last_error_message();
  }
  {
    FaissLayout f(base);
    f.set<uint64_t>(probe.invlists() + 24, nsizes - 1);  // odd count
    EXPECT_EQ(try_load(f.bytes), IVF_ERR_CORRUPT_DATA) << ivf_last_error_message();
  }
}

TEST(FaissHostile, UntrainedHugeNlistIsRefusedBeforeAllocating) {
  // An untrained file has no centroids: nothing in it is proportional to nlist.
  ParamsPtr params = make_params(3, IVF_METRIC_L2, IVF_BACKEND_CPU, 1);
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_create(&raw, 4, params.get()), IVF_OK);
  IndexPtr untrained(raw);
  FaissLayout base(faiss_image(untrained.get()));
  ASSERT_EQ(base.fourcc(base.invlists() + 20), "sprs");
  for (uint64_t nlist : {uint64_t{1} << 20, (uint64_t{1} << 20) + 1, uint64_t{1} << 30}) {
    FaissLayout f = base;
    f.set<uint64_t>(FaissLayout::kNlist, nlist);
    f.set<uint64_t>(f.invlists() + 4, nlist);
    EXPECT_EQ(try_load(f.bytes), nlist <= (uint64_t{1} << 20) ? IVF_OK : IVF_ERR_UNSUPPORTED)
        << nlist << ": " << ivf_last_error_message();
  }
}

TEST(FaissHostile, UnknownMagicIsCorruptNotFaiss) {
  const std::vector<unsigned char> g = {'X', 'w', 'F', 'l', 0, 0, 0, 0, 1, 2, 3, 4};
  EXPECT_EQ(try_load(g), IVF_ERR_CORRUPT_DATA);
  const std::vector<unsigned char> h = {'I', 'w', 'F', 'l'};
  EXPECT_EQ(try_load(h), IVF_ERR_CORRUPT_DATA);
}

}  // namespace
