// Hostile and damaged native files through ivf_deserialize / ivf_load: every truncation, every
// single-bit flip, header fields set to 0, -1, huge and overflowing values (with the checksum
// recomputed, as a deliberate forger would), inconsistent sections, garbage. Each must give
// its documented status, write nothing to *out and leave no memory behind (ASan build).
#include <cstring>
#include <limits>

#include "core/io/checksum.hpp"
#include "core/io/native_format.hpp"
#include "io_test_util.hpp"

using namespace iotest;
namespace nf = ivfgpu::io::native;

namespace {

// A small index with every structure present: 4 lists, 20 vectors of dimension 3.
std::vector<unsigned char> small_image(ivf_metric metric = IVF_METRIC_L2) {
  IndexPtr index = make_index(3, 4, 20, metric, IVF_BACKEND_CPU, 1000);
  return serialize(index.get());
}

template <class T>
void put(std::vector<unsigned char>& b, std::size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}
template <class T>
T get(const std::vector<unsigned char>& b, std::size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

void reseal_header(std::vector<unsigned char>& b) {
  put<uint64_t>(b, nf::kOffHeaderChecksum, ivfgpu::io::checksum64(b.data(), nf::kOffHeaderChecksum));
}

struct Section {
  std::size_t header;   // offset of the section header
  std::size_t payload;  // offset of the payload
  uint64_t length;
};

// The four sections of an intact image, from their own length fields.
std::vector<Section> sections(const std::vector<unsigned char>& b) {
  std::vector<Section> out;
  std::size_t at = nf::kHeaderSize;
  for (int i = 0; i < 4; ++i) {
    const uint64_t len = get<uint64_t>(b, at + 8);
    out.push_back({at, at + nf::kSectionHeaderSize, len});
    at += nf::kSectionHeaderSize + len;
  }
  EXPECT_EQ(at, b.size());
  return out;
}

void reseal_section(std::vector<unsigned char>& b, const Section& s) {
  std::vector<unsigned char> covered(b.begin() + static_cast<std::ptrdiff_t>(s.header),
                                     b.begin() + static_cast<std::ptrdiff_t>(s.header + nf::kOffSectionChecksum));
  covered.insert(covered.end(), b.begin() + static_cast<std::ptrdiff_t>(s.payload),
                 b.begin() + static_cast<std::ptrdiff_t>(s.payload + s.length));
  put<uint64_t>(b, s.header + nf::kOffSectionChecksum, ivfgpu::io::checksum64(covered.data(), covered.size()));
}

TEST(Corrupt, TheIntactImageLoads) {
  const std::vector<unsigned char> b = small_image();
  EXPECT_EQ(try_load(b), IVF_OK) << ivf_last_error_message();
  EXPECT_EQ(sections(b).size(), 4u);
}

TEST(Corrupt, TruncationAtEveryByteIsCorruptData) {
  const std::vector<unsigned char> b = small_image();
  for (std::size_t len = 0; len < b.size(); ++len) ASSERT_EQ(try_load(b, len), IVF_ERR_CORRUPT_DATA) << "length " << len;
}

TEST(Corrupt, TruncatedFilesAreCorruptData) {
  TempDir dir;
  const std::vector<unsigned char> b = small_image();
  const std::string path = dir.file("t.ivf");
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  for (std::size_t len = 0; len < b.size(); ++len) {
    write_bytes(path, std::vector<unsigned char>(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(len)));
    ivf_index* out = sentinel();
    ASSERT_EQ(ivf_load(path.c_str(), cpu.get(), &out), IVF_ERR_CORRUPT_DATA) << "length " << len;
    ASSERT_EQ(out, sentinel());
  }
}

TEST(Corrupt, TrailingBytesAreCorruptData) {
  std::vector<unsigned char> b = small_image();
  b.push_back(0);
  EXPECT_EQ(try_load(b), IVF_ERR_CORRUPT_DATA);
}

// Every bit of the file is covered: the version field reports VERSION_MISMATCH, every other
// bit (magic, endianness marker, header, header checksum, section headers, payloads, section
// checksums) CORRUPT_DATA.
TEST(Corrupt, EverySingleBitFlipIsDetected) {
  for (ivf_metric metric : {IVF_METRIC_L2, IVF_METRIC_COSINE}) {
    const std::vector<unsigned char> b = small_image(metric);
    for (std::size_t byte = 0; byte < b.size(); ++byte) {
      const bool version = byte >= nf::kOffVersion && byte < nf::kOffVersion + 4;
      for (int bit = 0; bit < 8; ++bit) {
        std::vector<unsigned char> f = b;
        f[byte] ^= static_cast<unsigned char>(1u << bit);
        // A flip that lands on another version this library reads is caught by the header
        // checksum; any other version is refused as such.
        uint32_t v = 0;
        std::memcpy(&v, f.data() + nf::kOffVersion, 4);
        const bool readable = v >= nf::kOldestVersion && v <= nf::kVersion;
        ASSERT_EQ(try_load(f), version && !readable ? IVF_ERR_VERSION_MISMATCH : IVF_ERR_CORRUPT_DATA)
            << "byte " << byte << " bit " << bit << ": " << ivf_last_error_message();
      }
    }
  }
}

struct FieldCase {
  const char* name;
  std::size_t offset;
  int width;  // 4 or 8
  int64_t value;
  ivf_status expected;
};

TEST(Corrupt, HeaderFieldsWithValidChecksum) {
  const std::vector<unsigned char> b = small_image();
  const int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  const int64_t size = static_cast<int64_t>(b.size());
  const FieldCase cases[] = {
      {"dim 0", nf::kOffDim, 8, 0, IVF_ERR_CORRUPT_DATA},
      {"dim -1", nf::kOffDim, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"dim 2 (plausible, inconsistent)", nf::kOffDim, 8, 2, IVF_ERR_CORRUPT_DATA},
      {"dim 2^24+1", nf::kOffDim, 8, (int64_t{1} << 24) + 1, IVF_ERR_CORRUPT_DATA},
      {"dim max", nf::kOffDim, 8, kMax, IVF_ERR_CORRUPT_DATA},
      {"dim min", nf::kOffDim, 8, kMin, IVF_ERR_CORRUPT_DATA},
      {"nlist 0", nf::kOffNlist, 8, 0, IVF_ERR_CORRUPT_DATA},
      {"nlist -1", nf::kOffNlist, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"nlist 5", nf::kOffNlist, 8, 5, IVF_ERR_CORRUPT_DATA},
      {"nlist 2^30 (size overflows nothing, file too short)", nf::kOffNlist, 8, int64_t{1} << 30, IVF_ERR_CORRUPT_DATA},
      {"nlist max", nf::kOffNlist, 8, kMax, IVF_ERR_CORRUPT_DATA},
      {"ntotal 0", nf::kOffNtotal, 8, 0, IVF_ERR_CORRUPT_DATA},
      {"ntotal -1", nf::kOffNtotal, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"ntotal 21", nf::kOffNtotal, 8, 21, IVF_ERR_CORRUPT_DATA},
      {"ntotal 2^61 (bytes overflow 64 bits)", nf::kOffNtotal, 8, int64_t{1} << 61, IVF_ERR_CORRUPT_DATA},
      {"ntotal max", nf::kOffNtotal, 8, kMax, IVF_ERR_CORRUPT_DATA},
      {"file size 0", nf::kOffFileSize, 8, 0, IVF_ERR_CORRUPT_DATA},
      {"file size -1", nf::kOffFileSize, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"file size +1", nf::kOffFileSize, 8, size + 1, IVF_ERR_CORRUPT_DATA},
      {"file size -1 byte", nf::kOffFileSize, 8, size - 1, IVF_ERR_CORRUPT_DATA},
      {"metric -1", nf::kOffMetric, 4, -1, IVF_ERR_CORRUPT_DATA},
      {"metric 3", nf::kOffMetric, 4, 3, IVF_ERR_CORRUPT_DATA},
      {"metric int32 max", nf::kOffMetric, 4, std::numeric_limits<int32_t>::max(), IVF_ERR_CORRUPT_DATA},
      // Version 3 files may store compact types: a dtype that does not match the payload's
      // size is a corrupt file, an unknown one too.
      {"dtype f16", nf::kOffDtype, 4, 1, IVF_ERR_CORRUPT_DATA},
      {"dtype u8", nf::kOffDtype, 4, 2, IVF_ERR_CORRUPT_DATA},
      {"dtype i8", nf::kOffDtype, 4, 3, IVF_ERR_CORRUPT_DATA},
      {"dtype bf16", nf::kOffDtype, 4, 4, IVF_ERR_CORRUPT_DATA},
      {"dtype 5", nf::kOffDtype, 4, 5, IVF_ERR_CORRUPT_DATA},
      {"dtype -1", nf::kOffDtype, 4, -1, IVF_ERR_CORRUPT_DATA},
      {"flags 0 (untrained, holding vectors)", nf::kOffFlags, 4, 0, IVF_ERR_CORRUPT_DATA},
      {"flags 3 (trained, unique ids: valid)", nf::kOffFlags, 4, 3, IVF_OK},
      {"flags 5 (unknown bit)", nf::kOffFlags, 4, 5, IVF_ERR_CORRUPT_DATA},
      {"flags all", nf::kOffFlags, 4, -1, IVF_ERR_CORRUPT_DATA},
      {"nprobe 0", nf::kOffNprobe, 8, 0, IVF_ERR_CORRUPT_DATA},
      {"nprobe -1", nf::kOffNprobe, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"nprobe max (valid: clamped at search)", nf::kOffNprobe, 8, kMax, IVF_OK},
      {"kmeans_iters -1", nf::kOffKmeansIters, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"kmeans_iters 0 (valid)", nf::kOffKmeansIters, 8, 0, IVF_OK},
      {"kmeans_iters huge", nf::kOffKmeansIters, 8, int64_t{1} << 40, IVF_ERR_CORRUPT_DATA},
      {"max_points 0", nf::kOffMaxPointsPerCentroid, 8, 0, IVF_ERR_CORRUPT_DATA},
      {"max_points -1", nf::kOffMaxPointsPerCentroid, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"max_points huge", nf::kOffMaxPointsPerCentroid, 8, kMax, IVF_ERR_CORRUPT_DATA},
      {"seed -1", nf::kOffSeed, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"seed max (valid)", nf::kOffSeed, 8, kMax, IVF_OK},
      {"section count 0", nf::kOffSectionCount, 4, 0, IVF_ERR_CORRUPT_DATA},
      {"section count 5", nf::kOffSectionCount, 4, 5, IVF_ERR_CORRUPT_DATA},
      {"section count -1", nf::kOffSectionCount, 4, -1, IVF_ERR_CORRUPT_DATA},
      {"header size 0", nf::kOffHeaderSize, 4, 0, IVF_ERR_CORRUPT_DATA},
      {"header size 256", nf::kOffHeaderSize, 4, 256, IVF_ERR_CORRUPT_DATA},
      {"reserved 1", nf::kOffReserved, 4, 1, IVF_ERR_CORRUPT_DATA},
      {"reserved tail", nf::kOffHeaderChecksum - 8, 8, -1, IVF_ERR_CORRUPT_DATA},
      {"version 0", nf::kOffVersion, 4, 0, IVF_ERR_VERSION_MISMATCH},
      {"version 4", nf::kOffVersion, 4, 4, IVF_ERR_VERSION_MISMATCH},
      {"version -1", nf::kOffVersion, 4, -1, IVF_ERR_VERSION_MISMATCH},
      {"big-endian marker", nf::kOffEndian, 4, 0x04030201, IVF_ERR_VERSION_MISMATCH},
      {"endian marker 0", nf::kOffEndian, 4, 0, IVF_ERR_CORRUPT_DATA},
  };
  for (const FieldCase& c : cases) {
    std::vector<unsigned char> f = b;
    if (c.width == 4) put<int32_t>(f, c.offset, static_cast<int32_t>(c.value));
    else put<int64_t>(f, c.offset, c.value);
    reseal_header(f);
    EXPECT_EQ(try_load(f), c.expected) << c.name << ": " << ivf_last_error_message();
  }
}

TEST(Corrupt, SectionContentWithValidChecksums) {
  const std::vector<unsigned char> b = small_image();
  const std::vector<Section> s = sections(b);
  const Section &cent = s[0], &offs = s[1], &vecs = s[2], &ids = s[3];
  auto check = [&](const char* name, auto edit) {
    std::vector<unsigned char> f = b;
    edit(f);
    for (const Section& x : s) reseal_section(f, x);
    EXPECT_EQ(try_load(f), IVF_ERR_CORRUPT_DATA) << name;
    EXPECT_NE(std::string(ivf_last_error_message()), "") << name;
  };
  check("offset[0] = 1", [&](auto& f) { put<int64_t>(f, offs.payload, 1); });
  check("offsets decrease", [&](auto& f) { put<int64_t>(f, offs.payload + 8, get<int64_t>(f, offs.payload + 16) + 1); });
  check("offsets end short", [&](auto& f) { put<int64_t>(f, offs.payload + offs.length - 8, 19); });
  check("offsets end long", [&](auto& f) { put<int64_t>(f, offs.payload + offs.length - 8, 21); });
  check("offset -1", [&](auto& f) { put<int64_t>(f, offs.payload + 8, -1); });
  check("offset max", [&](auto& f) { put<int64_t>(f, offs.payload + 16, std::numeric_limits<int64_t>::max()); });
  check("id -1", [&](auto& f) { put<int64_t>(f, ids.payload + 8 * 7, -1); });
  check("vector NaN", [&](auto& f) { put<float>(f, vecs.payload + 4 * 5, std::numeric_limits<float>::quiet_NaN()); });
  check("vector +Inf", [&](auto& f) { put<float>(f, vecs.payload + vecs.length - 4, std::numeric_limits<float>::infinity()); });
  check("centroid -Inf", [&](auto& f) { put<float>(f, cent.payload, -std::numeric_limits<float>::infinity()); });
  check("section tag", [&](auto& f) { f[vecs.header] = 'X'; });
  check("sections swapped tags", [&](auto& f) { std::swap(f[cent.header], f[offs.header]); });
  check("section reserved", [&](auto& f) { f[ids.header + 4] = 1; });
  check("section length +4", [&](auto& f) { put<uint64_t>(f, cent.header + 8, cent.length + 4); });
  check("section length 0", [&](auto& f) { put<uint64_t>(f, vecs.header + 8, 0); });
  check("section length huge", [&](auto& f) { put<uint64_t>(f, ids.header + 8, ~uint64_t{0}); });
}

TEST(Corrupt, GarbageIsRejected) {
  std::mt19937 rng(7);
  const std::vector<unsigned char> good = small_image();
  for (int i = 0; i < 3000; ++i) {
    std::vector<unsigned char> g(1 + rng() % 1200);
    for (auto& c : g) c = static_cast<unsigned char>(rng());
    const int prefix = i % 3;  // raw garbage, behind our magic (+version), or behind a FAISS fourcc
    if (prefix == 1) std::memcpy(g.data(), good.data(), std::min<std::size_t>(g.size(), 16));
    if (prefix == 2) std::memcpy(g.data(), "IwFl", std::min<std::size_t>(g.size(), 4));
    const ivf_status s = try_load(g);
    ASSERT_TRUE(s == IVF_ERR_CORRUPT_DATA || s == IVF_ERR_UNSUPPORTED || s == IVF_ERR_VERSION_MISMATCH)
        << "garbage " << i << " gave " << s << ": " << ivf_last_error_message();
    if (prefix == 1) EXPECT_EQ(s, IVF_ERR_CORRUPT_DATA) << ivf_last_error_message();
  }
}

}  // namespace
