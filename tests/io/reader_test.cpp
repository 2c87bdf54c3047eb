// The engine-side building blocks of core/io: the bounded reader, checked arithmetic, the
// size computation and the sinks.
#include <limits>

#include <gtest/gtest.h>

#include "core/errors.hpp"
#include "core/io/byte_sink.hpp"
#include "core/io/byte_source.hpp"
#include "core/io/checked.hpp"
#include "core/io/checksum.hpp"
#include "core/io/native_format.hpp"
#include "core/io/payload_checks.hpp"

using namespace ivfgpu;
using namespace ivfgpu::io;

namespace {

template <class F>
Errc code_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "no exception";
  return Errc::Internal;
}

TEST(BoundedReader, NeverReadsPastTheEnd) {
  const unsigned char data[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  MemorySource in(data, sizeof data);
  EXPECT_EQ(in.read_pod<uint32_t>("a"), 0x04030201u);
  EXPECT_EQ(in.remaining(), 6u);
  EXPECT_EQ(code_of([&] { in.read_pod<uint64_t>("b"); }), Errc::CorruptData);
  EXPECT_EQ(in.position(), 4u) << "a failed read must not move";
  EXPECT_EQ(code_of([&] { in.skip(7, "c"); }), Errc::CorruptData);
  EXPECT_EQ(code_of([&] { in.expect(~uint64_t{0}, "huge"); }), Errc::CorruptData);
  in.skip(6, "rest");
  EXPECT_EQ(in.remaining(), 0u);
  unsigned char x;
  EXPECT_EQ(code_of([&] { in.read(&x, 1, "d"); }), Errc::CorruptData);
}

TEST(BoundedReader, FileSourceErrors) {
  EXPECT_EQ(code_of([] { FileSource f("/nonexistent/ivfgpu/file"); }), Errc::Io);
  EXPECT_EQ(code_of([] { FileSource f("/"); }), Errc::Io);
}

TEST(CheckedArithmetic, OverflowIsCorruptData) {
  const uint64_t big = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(checked_mul(3, 4, "x"), 12u);
  EXPECT_EQ(checked_add(3, 4, "x"), 7u);
  EXPECT_EQ(code_of([&] { checked_mul(big / 2 + 1, 2, "m"); }), Errc::CorruptData);
  EXPECT_EQ(code_of([&] { checked_add(big, 1, "a"); }), Errc::CorruptData);
  EXPECT_EQ(code_of([&] { check_range(5, 0, 4, "r"); }), Errc::CorruptData);
  EXPECT_EQ(code_of([&] { native_size(int64_t{1} << 24, int64_t{1} << 30, int64_t{1} << 40, true); }), Errc::CorruptData);
}

TEST(NativeSize, MatchesWhatTheWriterWrites) {
  for (int64_t dim : {1, 3, 129})
    for (int64_t nlist : {1, 5})
      for (int64_t n : {0, 7})
        for (bool trained : {false, true}) {
          if (!trained && n > 0) continue;
          HostModel m = HostModel::empty(dim, Metric::L2, nlist);
          m.trained = trained;
          if (trained) {
            m.centroids.assign(static_cast<std::size_t>(nlist * dim), 0.5f);
            m.compute_centroid_norms();
          }
          m.vectors.assign(static_cast<std::size_t>(n * dim), 1.0f);
          m.ids.assign(static_cast<std::size_t>(n), 3);
          m.list_offsets.back() = n;
          for (int64_t l = 1; l < nlist; ++l) m.list_offsets[l] = 0;
          CountingSink count;
          write_native(m, BuildParams{}, count);
          EXPECT_EQ(count.written(), native_size(dim, nlist, n, trained));
          std::vector<unsigned char> bytes(count.written());
          MemorySink sink(bytes.data(), bytes.size());
          write_native(m, BuildParams{}, sink);
          MemorySource in(bytes.data(), bytes.size());
          const IndexImage image = read_native(in);
          EXPECT_EQ(image.model.vectors, m.vectors);
          EXPECT_EQ(image.model.list_offsets, m.list_offsets);
        }
}

TEST(Sinks, MemorySinkRefusesToOverrun) {
  unsigned char buf[8] = {};
  MemorySink sink(buf, 4);
  sink.put<uint32_t>(1);
  EXPECT_EQ(code_of([&] { sink.put<uint8_t>(2); }), Errc::Internal);
  EXPECT_EQ(buf[4], 0);
}

TEST(PayloadChecks, FindsNonFiniteValues) {
  std::vector<float> v(1000, 1.0f);
  EXPECT_EQ(first_non_finite(v.data(), v.size()), -1);
  v[777] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(first_non_finite(v.data(), v.size()), 777);
  v[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(first_non_finite(v.data(), v.size()), 3);
  v[3] = std::numeric_limits<float>::max();  // finite
  EXPECT_EQ(first_non_finite(v.data(), v.size()), 777);
}

TEST(Checksum, IsXxh64Seed0) {
  // Reference values of XXH64 with seed 0 (xxHash's own test vectors).
  EXPECT_EQ(checksum64("", 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(checksum64("abc", 3), 0x44BC2CF5AD770999ull);
}

}  // namespace
