// The FAISS fixtures of ../shared/data/faiss (README there) and a field map of FAISS
// IndexIVFFlat images for the hostile-file tests.
#pragma once

#include <functional>

#include "io_test_util.hpp"

namespace iotest {

struct FixtureSpec {
  const char* index_file;
  const char* results_file;
  ivf_metric metric;
  int64_t nlist, nprobe, k;
};
inline const FixtureSpec kL2Fixture{"faiss_ivfflat_l2_nlist64.index", "faiss_ivfflat_l2_nlist64.nprobe8_k10.results",
                                    IVF_METRIC_L2, 64, 8, 10};
inline const FixtureSpec kIpFixture{"faiss_ivfflat_ip_nlist32_ids.index",
                                    "faiss_ivfflat_ip_nlist32_ids.nprobe4_k10.results", IVF_METRIC_INNER_PRODUCT, 32, 4, 10};

// Loads the fixture on `backend`, searches the 100 siftsmall queries with FAISS's nprobe and k,
// and compares with FAISS's own results: same ids ties aside, distances within 1e-4 relative.
inline void check_fixture(const FixtureSpec& spec, ivf_backend backend) {
  const std::string index_path = data_dir() + "/faiss/" + spec.index_file;
  const std::string results_path = data_dir() + "/faiss/" + spec.results_file;
  const std::string query_path = data_dir() + "/siftsmall/siftsmall_query.fvecs";
  for (const std::string& p : {index_path, results_path, query_path})
    if (!file_exists(p)) GTEST_SKIP() << "FIXTURE MISSING: " << p << " (set IVFGPU_DATA_DIR; see ../shared/data/README.md)";
  int64_t dim = 0;
  const std::vector<float> queries = read_fvecs(query_path, dim);
  ASSERT_EQ(dim, 128);
  const int64_t nq = static_cast<int64_t>(queries.size()) / dim;
  ASSERT_EQ(nq, 100);

  ParamsPtr params = backend_params(backend);
  ivf_index* raw = nullptr;
  ASSERT_EQ(ivf_load(index_path.c_str(), params.get(), &raw), IVF_OK) << ivf_last_error_message();
  IndexPtr index(raw);
  EXPECT_EQ(info(index.get(), IVF_INFO_DIM), 128);
  EXPECT_EQ(info(index.get(), IVF_INFO_NLIST), spec.nlist);
  EXPECT_EQ(info(index.get(), IVF_INFO_NTOTAL), 10000);
  EXPECT_EQ(info(index.get(), IVF_INFO_METRIC), spec.metric);
  EXPECT_EQ(info(index.get(), IVF_INFO_NPROBE), spec.nprobe);  // FAISS's stored nprobe
  EXPECT_EQ(info(index.get(), IVF_INFO_BACKEND), backend);

  const std::vector<unsigned char> rb = read_bytes(results_path);
  const std::size_t cells = static_cast<std::size_t>(nq * spec.k);
  ASSERT_EQ(rb.size(), cells * (8 + 4));
  Results faiss{std::vector<int64_t>(cells), std::vector<float>(cells)};
  std::memcpy(faiss.ids.data(), rb.data(), cells * 8);
  std::memcpy(faiss.dists.data(), rb.data() + cells * 8, cells * 4);

  const Results ours = search(index.get(), queries, dim, spec.k, spec.nprobe);
  const Comparison c = compare_results(ours, faiss, nq, spec.k, 1e-4);
  std::printf("[ fixture  ] %s on %s: %lld/%lld rows identical, %lld tie differences, %lld mismatches, "
              "max relative distance error %.3g\n",
              spec.index_file, backend == IVF_BACKEND_CUDA ? "CUDA" : "CPU", static_cast<long long>(c.rows_identical),
              static_cast<long long>(nq), static_cast<long long>(c.tie_differences),
              static_cast<long long>(c.mismatches), c.max_rel_error);
  EXPECT_EQ(c.mismatches, 0);
}

// Field offsets of a FAISS IndexIVFFlat image (FAISS's index_write.cpp), for editing.
struct FaissLayout {
  static constexpr std::size_t kD = 4, kNtotal = 8, kDummy1 = 16, kDummy2 = 24, kTrained = 32, kMetric = 33,
                               kNlist = 37, kNprobe = 45, kQFourcc = 53, kQD = 57, kQNtotal = 61, kQTrained = 85,
                               kQMetric = 86, kQCodes = 90;
  std::vector<unsigned char> bytes;
  std::size_t dm = 0, il = 0, data = 0, first_list_size = 0;

  explicit FaissLayout(std::vector<unsigned char> b) : bytes(std::move(b)) {
    dm = kQCodes + 8 + 4 * static_cast<std::size_t>(u64(kQCodes));
    il = dm + 1 + 8;  // no direct map array in our files
    const uint64_t nsizes = u64(il + 24);
    data = il + 32 + 8 * static_cast<std::size_t>(nsizes);
    if (fourcc(il + 20) == "full") {
      for (uint64_t i = 0; i < nsizes && first_list_size == 0; ++i) first_list_size = u64(il + 32 + 8 * i);
    } else if (nsizes >= 2) {
      first_list_size = u64(il + 32 + 8);
    }
  }
  std::size_t direct_map() const { return dm; }
  std::size_t invlists() const { return il; }
  std::size_t first_codes() const { return data; }
  std::size_t first_ids() const { return data + first_list_size * 4 * static_cast<std::size_t>(i32(kD)); }

  template <class T>
  T get(std::size_t off) const {
    T v;
    std::memcpy(&v, bytes.data() + off, sizeof v);
    return v;
  }
  template <class T>
  void set(std::size_t off, T v) {
    std::memcpy(bytes.data() + off, &v, sizeof v);
  }
  int32_t i32(std::size_t off) const { return get<int32_t>(off); }
  int64_t i64(std::size_t off) const { return get<int64_t>(off); }
  uint64_t u64(std::size_t off) const { return get<uint64_t>(off); }
  std::string fourcc(std::size_t off) const { return std::string(reinterpret_cast<const char*>(bytes.data() + off), 4); }
  void set_fourcc(std::size_t off, const char* s) { std::memcpy(bytes.data() + off, s, 4); }
  void add_to_list_size(std::size_t list, uint64_t delta) { set<uint64_t>(il + 32 + 8 * list, u64(il + 32 + 8 * list) + delta); }
};

}  // namespace iotest
