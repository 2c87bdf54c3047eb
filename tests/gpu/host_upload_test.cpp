// Large host-memory batches whose queries cross to the device in pieces, each piece's coarse
// stage behind its copy (core/cuda/query_upload.hpp), against the same queries searched from
// device memory: every metric, f32 and compact query types, odd shapes, several chunks, and bad
// rows in a later piece. IVFGPU_UPLOAD_PIECES pins the count (the library reads it at every call).
//
// "The same results" is shared/docs/results-contract.md: a piece's coarse GEMM has fewer rows
// than the whole batch's, so cuBLAS may pick another kernel, and the probed lists may differ where
// a query's nprobe-th and next centroid scores are within fp32 rounding. Those queries are found
// from the index's own centroids in double precision and left out, and each case says how many.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/id_workload.hpp"
#include "core/cuda/query_upload.hpp"
#include "core/element_convert.hpp"
#include "core/errors.hpp"
#include "gpu_test_util.hpp"

using namespace gputest;
using ivfgpu::ElementType;
using ivfgpu::MatrixView;
using ivfgpu::MemoryKind;

namespace {

// Pins IVFGPU_UPLOAD_PIECES while alive.
struct PiecesScope {
  explicit PiecesScope(int pieces) { setenv("IVFGPU_UPLOAD_PIECES", std::to_string(pieces).c_str(), 1); }
  ~PiecesScope() { unsetenv("IVFGPU_UPLOAD_PIECES"); }
};

struct Case {
  Metric metric;
  ElementType type;  // storage and query type
  int64_t dim;
};

std::string case_name(const Case& c) {
  const char* m = c.metric == Metric::L2 ? "l2" : c.metric == Metric::InnerProduct ? "ip" : "cosine";
  return std::string(m) + "/" + ivfgpu::element_name(c.type) + "/d" + std::to_string(c.dim);
}

// Data a type holds exactly where it must: integers in [0, 255] for uint8, [-127, 127] for int8
// (centred, so inner products rank centroids by more than one shared mean: uint8 inner products
// left half the queries at coarse near-ties).
std::vector<float> data_for(ElementType type, int64_t n, int64_t dim, uint64_t seed) {
  std::vector<float> x = mixture(n, dim, 40, seed);
  if (type == ElementType::U8)
    for (float& v : x) v = std::clamp(std::round(v * 30.0f + 128.0f), 0.0f, 255.0f);
  if (type == ElementType::I8)
    for (float& v : x) v = std::clamp(std::round(v * 30.0f), -127.0f, 127.0f);
  return x;
}

std::vector<unsigned char> encoded(const std::vector<float>& x, int64_t n, int64_t dim, ElementType type) {
  if (type == ElementType::F32) {
    const auto* b = reinterpret_cast<const unsigned char*>(x.data());
    return std::vector<unsigned char>(b, b + x.size() * sizeof(float));
  }
  return ivfgpu::encode_rows(MatrixView::host_f32(x.data(), n, dim), type, "test");
}

Result search_memory(const Index& idx, const std::vector<unsigned char>& q, ElementType type, int64_t n, int64_t k,
                     int64_t nprobe, MemoryKind memory) {
  Result r;
  r.ids.assign(static_cast<std::size_t>(n * k), -7);
  r.dists.assign(r.ids.size(), -7.0f);
  ivfgpu::SearchRequest a;
  a.k = k;
  a.nprobe = nprobe;
  if (memory == MemoryKind::Host) {
    a.queries = MatrixView{q.data(), type, n, idx.dim(), MemoryKind::Host};
    a.ids = r.ids.data();
    a.dists = r.dists.data();
    idx.search(a);
    return r;
  }
  void* dq = nullptr;
  int64_t* di = nullptr;
  float* dd = nullptr;
  EXPECT_EQ(cudaMalloc(&dq, q.size()), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&di, sizeof(int64_t) * r.ids.size()), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&dd, sizeof(float) * r.ids.size()), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dq, q.data(), q.size(), cudaMemcpyHostToDevice), cudaSuccess);
  a.queries = MatrixView{dq, type, n, idx.dim(), MemoryKind::Device};
  a.memory = MemoryKind::Device;
  a.ids = di;
  a.dists = dd;
  idx.search(a);
  EXPECT_EQ(cudaMemcpy(r.ids.data(), di, sizeof(int64_t) * r.ids.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(r.dists.data(), dd, sizeof(float) * r.ids.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dq);
  cudaFree(di);
  cudaFree(dd);
  return r;
}

// Queries whose probed set could change with the coarse GEMM's rounding: the best score outside
// the nprobe best (as the index ranks them, in double) is within twice the largest fp32 error
// bound of the scores of the best inside. The bound is the worst case of a dot product summed
// in fp32, (dim + 2) * 2^-24 * (2 * sum |q_j c_j| + |c|^2) for L2 (norm minus twice the dot),
// without the norm for the other metrics. `q`: the queries as the index sees them (decoded,
// normalised for cosine).
std::vector<bool> coarse_near_ties(const Index& idx, const std::vector<float>& q, int64_t n, int64_t nprobe) {
  const ivfgpu::HostModel m = idx.snapshot();
  const int64_t dim = m.dim, nlist = m.nlist;
  std::vector<bool> tie(static_cast<std::size_t>(n), false);
  if (nprobe >= nlist) return tie;
  const double u = std::ldexp(1.0, -24) * double(dim + 2);
  std::vector<double> s(static_cast<std::size_t>(nlist));
  for (int64_t i = 0; i < n; ++i) {
    const float* qi = q.data() + i * dim;
    double worst = 0;
    for (int64_t l = 0; l < nlist; ++l) {
      double dot = 0, mag = 0;
      for (int64_t j = 0; j < dim; ++j) {
        const double t = double(qi[j]) * m.centroids[l * dim + j];
        dot += t;
        mag += std::abs(t);
      }
      const bool l2 = m.metric == Metric::L2;
      s[l] = l2 ? double(m.centroid_norms[l]) - 2 * dot : -dot;
      worst = std::max(worst, u * (l2 ? 2 * mag + double(m.centroid_norms[l]) : mag));
    }
    std::nth_element(s.begin(), s.begin() + nprobe, s.end());
    const double next = s[nprobe];
    const double last = *std::max_element(s.begin(), s.begin() + nprobe);
    tie[i] = next - last <= 2 * worst;
  }
  return tie;
}

// Searches `a`, which must be refused as an invalid argument naming query row `row` (the first
// bad one of the call).
void expect_refused(const Index& idx, const ivfgpu::SearchRequest& a, int64_t row, const std::string& what) {
  try {
    idx.search(a);
    ADD_FAILURE() << what << ": a bad query was searched";
  } catch (const ivfgpu::Error& e) {
    EXPECT_EQ(e.code(), ivfgpu::Errc::InvalidArgument) << what;
    EXPECT_NE(std::string(e.what()).find("query row " + std::to_string(row) + " "), std::string::npos)
        << what << ": " << e.what();
  }
}

// The rows of `r` not marked in `skip`.
Result kept_rows(const Result& r, const std::vector<bool>& skip, int64_t k) {
  Result out;
  for (std::size_t i = 0; i < skip.size(); ++i) {
    if (skip[i]) continue;
    out.ids.insert(out.ids.end(), r.ids.begin() + i * k, r.ids.begin() + (i + 1) * k);
    out.dists.insert(out.dists.end(), r.dists.begin() + i * k, r.dists.begin() + (i + 1) * k);
  }
  return out;
}

}  // namespace

// The count rule: one copy from pageable memory, or below two pieces' worth of bytes (~1 MiB a
// piece) or of rows (a piece's coarse GEMM makes 1.5 waves of 128 x 128 tiles); at most 8. The
// variable pins it for either memory, within 1..16 and one row a piece, and is ignored when
// malformed. And page_locked tells the driver's page-locked memory from pageable memory.
TEST(GpuHostUpload, PieceCountRule) {
  using ivfgpu::cuda::upload_pieces;
  unsetenv("IVFGPU_UPLOAD_PIECES");
  const std::size_t mib = std::size_t{1} << 20;
  // 1M x 128 f32, 10,000 queries, nlist 1024, 132 SMs: 198 tiles = 25 row tiles of 8 columns.
  EXPECT_EQ(upload_pieces({5120000, 10000, 1024, 132, true}), 3);
  EXPECT_EQ(upload_pieces({31360000, 10000, 1024, 132, true}), 3);  // Fashion-MNIST's 10,000 x 784
  EXPECT_EQ(upload_pieces({mib, 10000, 1024, 132, true}), 1);       // too few bytes
  EXPECT_EQ(upload_pieces({2 * mib, 10000, 1024, 132, true}), 2);
  EXPECT_EQ(upload_pieces({64 * mib, 6399, 1024, 132, true}), 1);   // too few rows
  EXPECT_EQ(upload_pieces({64 * mib, 6400, 1024, 132, true}), 2);
  EXPECT_EQ(upload_pieces({64 * mib, 100000, 1024, 132, true}), 8);  // at most 8
  EXPECT_EQ(upload_pieces({64 * mib, 100000, 64, 132, true}), 3);    // one column tile: 25,344 rows a piece
  EXPECT_EQ(upload_pieces({64 * mib, 1000, 100000, 132, true}), 7);  // many lists: 128 rows a piece
  EXPECT_EQ(upload_pieces({5120000, 10000, 1024, 132, false}), 1);   // pageable: one copy
  {
    PiecesScope pin(3);
    EXPECT_EQ(upload_pieces({10, 100, 1024, 132, true}), 3);
    EXPECT_EQ(upload_pieces({10, 100, 1024, 132, false}), 3);
  }
  {
    PiecesScope pin(100);
    EXPECT_EQ(upload_pieces({10, 100, 1024, 132, true}), 16);
    EXPECT_EQ(upload_pieces({10, 5, 1024, 132, true}), 5);
  }
  for (const char* bad : {"0", "-2", "x", "3x", ""}) {
    setenv("IVFGPU_UPLOAD_PIECES", bad, 1);
    EXPECT_EQ(upload_pieces({mib, 10000, 1024, 132, true}), 1) << "'" << bad << "'";
  }
  unsetenv("IVFGPU_UPLOAD_PIECES");
}

TEST(GpuHostUpload, PageLockedMemoryIsRecognised) {
  IVFGPU_REQUIRE_GPU();
  std::vector<float> pageable(1 << 16, 1.0f);
  EXPECT_FALSE(ivfgpu::cuda::page_locked(pageable.data(), pageable.size() * sizeof(float)));
  EXPECT_FALSE(ivfgpu::cuda::page_locked(nullptr, 16));
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 1 << 20, cudaHostAllocDefault), cudaSuccess);
  EXPECT_TRUE(ivfgpu::cuda::page_locked(pinned, 1 << 20));
  EXPECT_FALSE(ivfgpu::cuda::page_locked(pinned, 0));
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  // A registered range, and one that runs past its end.
  const std::size_t bytes = pageable.size() * sizeof(float);
  ASSERT_EQ(cudaHostRegister(pageable.data(), bytes / 2, cudaHostRegisterDefault), cudaSuccess);
  EXPECT_TRUE(ivfgpu::cuda::page_locked(pageable.data(), bytes / 2));
  EXPECT_FALSE(ivfgpu::cuda::page_locked(pageable.data(), bytes));
  ASSERT_EQ(cudaHostUnregister(pageable.data()), cudaSuccess);
}

TEST(GpuHostUpload, PiecesGiveTheResultsOfDeviceMemoryQueries) {
  IVFGPU_REQUIRE_GPU();
  const int64_t n = 20000, nlist = 64, nq = 3001, k = 10;
  const std::vector<Case> cases = {
      {Metric::L2, ElementType::F32, 37},          {Metric::InnerProduct, ElementType::F32, 37},
      {Metric::Cosine, ElementType::F32, 37},      {Metric::L2, ElementType::F16, 40},
      {Metric::Cosine, ElementType::F16, 40},      {Metric::L2, ElementType::U8, 33},
      {Metric::InnerProduct, ElementType::I8, 33},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(case_name(c));
    const std::vector<float> x = data_for(c.type, n, c.dim, 11);
    const std::vector<float> q32 = data_for(c.type, nq, c.dim, 12);
    BuildParams p = params_for(nlist, c.metric, BackendKind::Cuda);
    p.storage = static_cast<int32_t>(c.type);
    Index idx(c.dim, p);
    idx.train(x.data(), n);
    idx.add(x.data(), n, nullptr);
    const std::vector<unsigned char> q = encoded(q32, nq, c.dim, c.type);
    // The queries as the index sees them: decoded from their type, normalised for cosine.
    std::vector<float> seen = ivfgpu::decode_rows(q.data(), c.type, nq, c.dim);
    if (c.metric == Metric::Cosine) seen = normalized(seen, c.dim);
    for (int64_t nprobe : {int64_t{5}, nlist}) {
      const Result dev = search_memory(idx, q, c.type, nq, k, nprobe, MemoryKind::Device);
      const std::vector<bool> ties = coarse_near_ties(idx, seen, nq, nprobe);
      const auto skipped = std::count(ties.begin(), ties.end(), true);
      std::printf("%s, nprobe %lld: %lld of %lld queries at coarse near-ties left out\n", case_name(c).c_str(),
                  static_cast<long long>(nprobe), static_cast<long long>(skipped), static_cast<long long>(nq));
      EXPECT_LT(skipped, nq / 5) << "too many coarse near-ties for the comparison to mean much";
      const Result want = kept_rows(dev, ties, k);
      const int64_t kept = nq - skipped;
      for (int pieces : {1, 2, 3, 7, 16}) {
        PiecesScope pin(pieces);
        const Result host = search_memory(idx, q, c.type, nq, k, nprobe, MemoryKind::Host);
        for (int64_t id : host.ids) ASSERT_NE(id, -7) << "a result left unwritten, pieces " << pieces;
        const Result got = kept_rows(host, ties, k);
        EXPECT_EQ(ivftest::same_results(got.ids, got.dists, want.ids, want.dists, kept, k), "")
            << "pieces " << pieces << ", nprobe " << nprobe << " (" << skipped << " coarse near-ties left out)";
      }
    }
  }
}

// Queries in page-locked memory take the pieces the rule picks, with no variable set.
TEST(GpuHostUpload, PinnedQueriesByTheRuleGiveTheResultsOfDeviceMemoryQueries) {
  IVFGPU_REQUIRE_GPU();
  unsetenv("IVFGPU_UPLOAD_PIECES");
  const int64_t dim = 96, n = 60000, nlist = 1024, nq = 7000, k = 10, nprobe = 3;
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  const std::size_t bytes = static_cast<std::size_t>(nq * dim) * sizeof(float);
  const int pieces = ivfgpu::cuda::upload_pieces({bytes, nq, nlist, sms, true});
  std::printf("%d SMs: %d pieces for %lld pinned queries\n", sms, pieces, static_cast<long long>(nq));
  EXPECT_GE(pieces, 2) << "the shape must take pieces on this device";
  const std::vector<float> x = mixture(n, dim, 300, 41);
  const std::vector<float> q32 = mixture(nq, dim, 300, 42);
  Index idx(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  idx.train(x.data(), n);
  idx.add(x.data(), n, nullptr);
  const std::vector<unsigned char> q = encoded(q32, nq, dim, ElementType::F32);
  const Result dev = search_memory(idx, q, ElementType::F32, nq, k, nprobe, MemoryKind::Device);
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault), cudaSuccess);
  std::memcpy(pinned, q.data(), bytes);
  Result host;
  host.ids.assign(static_cast<std::size_t>(nq * k), -7);
  host.dists.assign(host.ids.size(), -7.0f);
  ivfgpu::SearchRequest a;
  a.queries = MatrixView{pinned, ElementType::F32, nq, dim, MemoryKind::Host};
  a.k = k;
  a.nprobe = nprobe;
  a.ids = host.ids.data();
  a.dists = host.dists.data();
  idx.search(a);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  const std::vector<bool> ties = coarse_near_ties(idx, q32, nq, nprobe);
  const int64_t kept = nq - std::count(ties.begin(), ties.end(), true);
  EXPECT_GT(kept, nq * 4 / 5);
  const Result got = kept_rows(host, ties, k), want = kept_rows(dev, ties, k);
  EXPECT_EQ(ivftest::same_results(got.ids, got.dists, want.ids, want.dists, kept, k), "")
      << nq - kept << " coarse near-ties left out";
}

// An index under a device budget searches in chunks: at the smallest budget for this shape a
// chunk's scratch share is 32 MiB (tier_cache.cu), and at nprobe 12 a query needs more than 20
// KB of it, so 20,000 queries take several chunks. Each chunk's queries cross in pieces, and the
// answer is the one-copy answer.
TEST(GpuHostUpload, PiecesInEveryChunkOfABudgetedIndex) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 48, n = 30000, nlist = 64, nq = 20000, k = 20, nprobe = 12;
  const std::vector<float> x = mixture(n, dim, 40, 21);
  const std::vector<float> q32 = mixture(nq, dim, 40, 22);
  BuildParams p = params_for(nlist, Metric::L2, BackendKind::Cuda);
  p.device_budget = int64_t{96} << 20;
  Index idx(dim, p);
  idx.train(x.data(), n);
  idx.add(x.data(), n, nullptr);
  const std::vector<unsigned char> q = encoded(q32, nq, dim, ElementType::F32);
  const std::vector<bool> ties = coarse_near_ties(idx, q32, nq, nprobe);
  const int64_t kept = nq - std::count(ties.begin(), ties.end(), true);
  EXPECT_GT(kept, nq * 4 / 5);
  Result one;
  {
    PiecesScope pin(1);
    one = kept_rows(search_memory(idx, q, ElementType::F32, nq, k, nprobe, MemoryKind::Host), ties, k);
  }
  for (int pieces : {2, 5}) {
    PiecesScope pin(pieces);
    const Result got = kept_rows(search_memory(idx, q, ElementType::F32, nq, k, nprobe, MemoryKind::Host), ties, k);
    EXPECT_EQ(ivftest::same_results(got.ids, got.dists, one.ids, one.dists, kept, k), "")
        << "pieces " << pieces << " (" << nq - kept << " coarse near-ties left out)";
  }
}

// Device-memory queries of the same budgeted index, in several chunks, are checked while the
// chunks run (search.cu, DeferredCheck: each chunk's results go to scratch and reach the caller's
// buffers only once the check has passed). The answer is the host-memory one; with a bad row in
// the last chunk the call is refused naming the first bad row, and neither device buffer is
// written; so is a batch of 16 with a bad row. (A budgeted index had passed its worker's stream
// on as the caller's, which made every device-memory search look asynchronous: unchecked.)
TEST(GpuHostUpload, DeviceQueriesInEveryChunkOfABudgetedIndex) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 48, n = 30000, nlist = 64, nq = 20000, k = 20, nprobe = 12;
  const std::vector<float> x = mixture(n, dim, 40, 23);
  std::vector<float> q32 = mixture(nq, dim, 40, 24);
  BuildParams p = params_for(nlist, Metric::L2, BackendKind::Cuda);
  p.device_budget = int64_t{96} << 20;
  Index idx(dim, p);
  idx.train(x.data(), n);
  idx.add(x.data(), n, nullptr);
  const std::vector<bool> ties = coarse_near_ties(idx, q32, nq, nprobe);
  const int64_t kept = nq - std::count(ties.begin(), ties.end(), true);
  EXPECT_GT(kept, nq * 4 / 5);
  const std::vector<unsigned char> q = encoded(q32, nq, dim, ElementType::F32);
  const Result host = kept_rows(search_memory(idx, q, ElementType::F32, nq, k, nprobe, MemoryKind::Host), ties, k);
  const Result dev = kept_rows(search_memory(idx, q, ElementType::F32, nq, k, nprobe, MemoryKind::Device), ties, k);
  EXPECT_EQ(ivftest::same_results(dev.ids, dev.dists, host.ids, host.dists, kept, k), "")
      << nq - kept << " coarse near-ties left out";

  q32[(nq - 3) * dim + 5] = std::nanf("");
  q32[(nq - 50) * dim] = std::numeric_limits<float>::infinity();
  float* dq = nullptr;
  int64_t* di = nullptr;
  float* dd = nullptr;
  const std::size_t results = static_cast<std::size_t>(nq * k);
  ASSERT_EQ(cudaMalloc(&dq, sizeof(float) * q32.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&di, sizeof(int64_t) * results), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dd, sizeof(float) * results), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dq, q32.data(), sizeof(float) * q32.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(di, 0xab, sizeof(int64_t) * results), cudaSuccess);
  ASSERT_EQ(cudaMemset(dd, 0xab, sizeof(float) * results), cudaSuccess);
  ivfgpu::SearchRequest a;
  a.queries = MatrixView{dq, ElementType::F32, nq, dim, MemoryKind::Device};
  a.memory = MemoryKind::Device;
  a.k = k;
  a.nprobe = nprobe;
  a.ids = di;
  a.dists = dd;
  expect_refused(idx, a, nq - 50, "the chunked call");
  const auto untouched = [&](const char* what) {
    std::vector<unsigned char> ids(sizeof(int64_t) * results), dists(sizeof(float) * results);
    EXPECT_EQ(cudaMemcpy(ids.data(), di, ids.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(dists.data(), dd, dists.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(std::all_of(ids.begin(), ids.end(), [](unsigned char b) { return b == 0xab; })) << what << ": ids";
    EXPECT_TRUE(std::all_of(dists.begin(), dists.end(), [](unsigned char b) { return b == 0xab; }))
        << what << ": dists";
  };
  untouched("the chunked call");
  // Rows nq - 50 .. nq - 35 as a batch of 16: its bad row is its first.
  a.queries = MatrixView{dq + (nq - 50) * dim, ElementType::F32, 16, dim, MemoryKind::Device};
  expect_refused(idx, a, 0, "the batch of 16");
  untouched("the batch of 16");
  cudaFree(dq);
  cudaFree(di);
  cudaFree(dd);
}

// A bad query in the last piece is refused, naming the first bad row, and nothing is written;
// the same call without it then searches.
TEST(GpuHostUpload, BadRowsInALaterPieceAreRefusedWithoutWriting) {
  IVFGPU_REQUIRE_GPU();
  const int64_t dim = 40, n = 20000, nlist = 64, nq = 4000, k = 5;
  const std::vector<float> x = mixture(n, dim, 40, 31);
  std::vector<float> q = mixture(nq, dim, 40, 32);
  Index idx(dim, params_for(nlist, Metric::L2, BackendKind::Cuda));
  idx.train(x.data(), n);
  idx.add(x.data(), n, nullptr);
  PiecesScope pin(4);
  q[3990 * dim + 7] = std::nanf("");
  q[3500 * dim] = std::numeric_limits<float>::infinity();
  std::vector<int64_t> ids(static_cast<std::size_t>(nq * k), -7);
  std::vector<float> dists(ids.size(), -7.0f);
  ivfgpu::SearchRequest a;
  a.queries = MatrixView::host_f32(q.data(), nq, dim);
  a.k = k;
  a.nprobe = 4;
  a.ids = ids.data();
  a.dists = dists.data();
  expect_refused(idx, a, 3500, "host rows in pieces");
  EXPECT_TRUE(std::all_of(ids.begin(), ids.end(), [](int64_t v) { return v == -7; }));
  EXPECT_TRUE(std::all_of(dists.begin(), dists.end(), [](float v) { return v == -7.0f; }));
  q[3990 * dim + 7] = 0.5f;
  q[3500 * dim] = 0.5f;
  idx.search(a);
  for (int64_t id : ids) EXPECT_GE(id, 0);
}
