#include "native_format.hpp"

#include "../element_convert.hpp"

#include <cstring>
#include <exception>
#include <limits>
#include <string>

#include "../errors.hpp"
#include "checked.hpp"
#include "fourcc.hpp"
#include "payload_checks.hpp"
#include "xxhash_inline.hpp"

namespace ivfgpu::io {

using namespace native;

namespace {

template <class T>
void put_at(unsigned char* p, std::size_t off, T v) {
  std::memcpy(p + off, &v, sizeof v);
}
template <class T>
T get_at(const unsigned char* p, std::size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

void write_section(ByteSink& out, uint32_t tag, const void* data, uint64_t bytes) {
  unsigned char sh[kSectionHeaderSize] = {};
  put_at<uint32_t>(sh, 0, tag);
  put_at<uint32_t>(sh, 4, 0);
  put_at<uint64_t>(sh, 8, bytes);
  Xxh64Stream hash;
  hash.update(sh, kOffSectionChecksum);
  hash.update(data, bytes);
  put_at<uint64_t>(sh, kOffSectionChecksum, hash.digest());
  out.write(sh, sizeof sh);
  out.write(data, bytes);
}

// Reads one section of exactly `bytes` payload bytes into dst in 1 MiB pieces, hashing and
// value-checking each piece (check(piece, piece_bytes, first_byte) throws) while it is in
// cache. A value error is reported only once the checksum matched, so that a flipped bit
// always reads as a checksum failure.
template <class Check>
void read_section(ByteSource& in, uint32_t tag, const char* name, void* dst, uint64_t bytes, Check check) {
  unsigned char sh[kSectionHeaderSize];
  in.read(sh, sizeof sh, name);
  const uint32_t found = get_at<uint32_t>(sh, 0);
  if (found != tag)
    fail(Errc::CorruptData, std::string(name) + " section: tag " + fourcc_text(found) + ", expected " + fourcc_text(tag));
  if (get_at<uint32_t>(sh, 4) != 0) fail(Errc::CorruptData, std::string(name) + " section: reserved field is not 0");
  const uint64_t length = get_at<uint64_t>(sh, 8);
  if (length != bytes)
    fail(Errc::CorruptData, std::string(name) + " section: length " + std::to_string(length) + ", the header implies " +
                                std::to_string(bytes));
  in.expect(bytes, name);
  Xxh64Stream hash;
  hash.update(sh, kOffSectionChecksum);
  auto* p = static_cast<unsigned char*>(dst);
  std::exception_ptr value_error;
  constexpr uint64_t kChunk = uint64_t{1} << 20;  // a multiple of every element size
  for (uint64_t done = 0; done < bytes;) {
    const std::size_t n = static_cast<std::size_t>(bytes - done < kChunk ? bytes - done : kChunk);
    in.read(p + done, n, name);
    hash.update(p + done, n);
    if (!value_error) {
      try {
        check(p + done, n, done);
      } catch (const Error&) {
        value_error = std::current_exception();
      }
    }
    done += n;
  }
  if (hash.digest() != get_at<uint64_t>(sh, kOffSectionChecksum))
    fail(Errc::CorruptData, std::string(name) + " section: checksum mismatch");
  if (value_error) std::rethrow_exception(value_error);
}

void no_check(const unsigned char*, std::size_t, uint64_t) {}

}  // namespace

uint64_t native_size(int64_t dim, int64_t nlist, int64_t ntotal, bool trained, std::size_t element_bytes) {
  const auto d = static_cast<uint64_t>(dim), l = static_cast<uint64_t>(nlist), n = static_cast<uint64_t>(ntotal);
  const char* what = "file size";
  uint64_t size = kHeaderSize + kSectionCount * kSectionHeaderSize;
  if (trained) size = checked_add(size, checked_mul(checked_mul(l, d, what), sizeof(float), what), what);
  size = checked_add(size, checked_mul(checked_add(l, 1, what), sizeof(int64_t), what), what);
  size = checked_add(size, checked_mul(checked_mul(n, d, what), element_bytes, what), what);
  size = checked_add(size, checked_mul(n, sizeof(int64_t), what), what);
  return size;
}

void write_native(const HostModel& m, const BuildParams& p, ByteSink& out) {
  unsigned char h[kHeaderSize] = {};
  std::memcpy(h + kOffMagic, kMagic, sizeof kMagic);
  put_at<uint32_t>(h, kOffVersion, kVersion);
  put_at<uint32_t>(h, kOffEndian, kEndianMarker);
  put_at<uint32_t>(h, kOffHeaderSize, static_cast<uint32_t>(kHeaderSize));
  put_at<uint32_t>(h, kOffFlags, (m.trained ? kFlagTrained : 0) | (p.unique_ids ? kFlagUniqueIds : 0));
  put_at<uint64_t>(h, kOffFileSize, native_size(m.dim, m.nlist, m.ntotal(), m.trained, element_size(m.type)));
  put_at<int64_t>(h, kOffDim, m.dim);
  put_at<int64_t>(h, kOffNlist, m.nlist);
  put_at<int64_t>(h, kOffNtotal, m.ntotal());
  put_at<int32_t>(h, kOffMetric, static_cast<int32_t>(m.metric));
  put_at<int32_t>(h, kOffDtype, static_cast<int32_t>(m.type));
  put_at<int64_t>(h, kOffNprobe, p.nprobe);
  put_at<int64_t>(h, kOffKmeansIters, p.kmeans_iters);
  put_at<int64_t>(h, kOffMaxPointsPerCentroid, p.max_points_per_centroid);
  put_at<int64_t>(h, kOffSeed, p.seed);
  put_at<uint32_t>(h, kOffSectionCount, kSectionCount);
  put_at<uint64_t>(h, kOffHeaderChecksum, XXH64(h, kOffHeaderChecksum, 0));
  out.write(h, sizeof h);
  write_section(out, kTagCentroids, m.trained ? m.centroids.data() : nullptr,
                m.trained ? m.centroids.size() * sizeof(float) : 0);
  write_section(out, kTagOffsets, m.list_offsets.data(), m.list_offsets.size() * sizeof(int64_t));
  write_section(out, kTagVectors, m.row_data(), static_cast<uint64_t>(m.ntotal()) * m.row_bytes());
  write_section(out, kTagIds, m.ids.data(), m.ids.size() * sizeof(int64_t));
}

IndexImage read_native(ByteSource& in) {
  unsigned char h[kHeaderSize];
  in.read(h, sizeof kMagic, "magic");
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0) fail(Errc::CorruptData, "not a libivfgpu index file (bad magic)");
  in.read(h + kOffVersion, 8, "format version");
  const uint32_t version = get_at<uint32_t>(h, kOffVersion);
  if (version < kOldestVersion || version > kVersion)
    fail(Errc::VersionMismatch, "index file format version " + std::to_string(version) +
                                    " is not one this library reads (it reads versions " +
                                    std::to_string(kOldestVersion) + " to " + std::to_string(kVersion) + ")");
  const uint32_t endian = get_at<uint32_t>(h, kOffEndian);
  if (endian == 0x04030201u) fail(Errc::VersionMismatch, "index file was written big-endian; this library reads little-endian files");
  if (endian != kEndianMarker) fail(Errc::CorruptData, "bad endianness marker");
  in.read(h + kOffHeaderSize, kHeaderSize - kOffHeaderSize, "header");
  if (XXH64(h, kOffHeaderChecksum, 0) != get_at<uint64_t>(h, kOffHeaderChecksum))
    fail(Errc::CorruptData, "header checksum mismatch");

  // The header is what its writer wrote; now check that the writer made sense.
  if (get_at<uint32_t>(h, kOffHeaderSize) != kHeaderSize) fail(Errc::CorruptData, "header size is not 128");
  const uint32_t flags = get_at<uint32_t>(h, kOffFlags);
  const uint32_t known = version >= 2 ? (kFlagTrained | kFlagUniqueIds) : kFlagTrained;
  if ((flags & ~known) != 0) fail(Errc::CorruptData, "unknown header flags " + std::to_string(flags));
  const bool trained = (flags & kFlagTrained) != 0;
  const int64_t dim = get_at<int64_t>(h, kOffDim), nlist = get_at<int64_t>(h, kOffNlist),
                ntotal = get_at<int64_t>(h, kOffNtotal);
  check_range(dim, 1, kMaxDim, "dimension");
  check_range(nlist, 1, kMaxNlist, "nlist");
  check_range(ntotal, 0, std::numeric_limits<int64_t>::max(), "ntotal");
  if (!trained && ntotal != 0) fail(Errc::CorruptData, "an untrained index holds " + std::to_string(ntotal) + " vectors");
  const int32_t metric = get_at<int32_t>(h, kOffMetric), dtype = get_at<int32_t>(h, kOffDtype);
  check_range(metric, 0, 2, "metric");
  // Versions 1 and 2 store f32 only; 3 adds the compact types (issue 11).
  check_range(dtype, 0, version >= 3 ? 4 : 0, "dtype");
  const auto type = static_cast<ElementType>(dtype);
  BuildParams params;
  params.nlist = nlist;
  params.metric = static_cast<Metric>(metric);
  params.nprobe = get_at<int64_t>(h, kOffNprobe);
  params.kmeans_iters = get_at<int64_t>(h, kOffKmeansIters);
  params.max_points_per_centroid = get_at<int64_t>(h, kOffMaxPointsPerCentroid);
  params.seed = get_at<int64_t>(h, kOffSeed);
  params.unique_ids = (flags & kFlagUniqueIds) != 0;
  params.storage = dtype;
  check_range(params.nprobe, 1, std::numeric_limits<int64_t>::max(), "nprobe");
  check_range(params.kmeans_iters, 0, 1000000, "kmeans_iters");
  check_range(params.max_points_per_centroid, 1, int64_t{1} << 40, "max_points_per_centroid");
  check_range(params.seed, 0, std::numeric_limits<int64_t>::max(), "seed");
  if (get_at<uint32_t>(h, kOffSectionCount) != kSectionCount) fail(Errc::CorruptData, "section count is not 4");
  for (std::size_t i = kOffReserved; i < kOffHeaderChecksum; ++i)
    if (h[i] != 0) fail(Errc::CorruptData, "reserved header bytes are not 0");

  // Sizes: overflow-checked, and the whole file must be exactly that long before anything
  // is allocated.
  const uint64_t expected = native_size(dim, nlist, ntotal, trained, element_size(type));
  const uint64_t declared = get_at<uint64_t>(h, kOffFileSize);
  if (declared != expected)
    fail(Errc::CorruptData, "header says the file is " + std::to_string(declared) + " bytes; its shape needs " +
                                std::to_string(expected));
  if (in.size() < expected)
    fail(Errc::CorruptData, "truncated: the file is " + std::to_string(in.size()) + " bytes, its header says " +
                                std::to_string(expected));
  if (in.size() > expected)
    fail(Errc::CorruptData, "the file has " + std::to_string(in.size() - expected) + " bytes after its last section");

  IndexImage image;
  image.params = params;
  HostModel& m = image.model;
  m.dim = dim;
  m.metric = params.metric;
  m.nlist = nlist;
  m.trained = trained;
  const auto d = static_cast<std::size_t>(dim), l = static_cast<std::size_t>(nlist), n = static_cast<std::size_t>(ntotal);
  m.centroids.resize(trained ? l * d : 0);
  read_section(in, kTagCentroids, "centroids", m.centroids.data(), m.centroids.size() * sizeof(float),
               [&](const unsigned char* p, std::size_t bytes, uint64_t first) {
                 check_finite(reinterpret_cast<const float*>(p), bytes / 4, first / 4, dim, "centroids");
               });
  m.list_offsets.resize(l + 1);
  read_section(in, kTagOffsets, "list offsets", m.list_offsets.data(), m.list_offsets.size() * sizeof(int64_t), no_check);
  check_offsets(m.list_offsets.data(), nlist, ntotal, "list offsets");
  m.type = type;
  if (type == ElementType::F32) {
    m.vectors.resize(n * d);
    read_section(in, kTagVectors, "vectors", m.vectors.data(), m.vectors.size() * sizeof(float),
                 [&](const unsigned char* p, std::size_t bytes, uint64_t first) {
                   check_finite(reinterpret_cast<const float*>(p), bytes / 4, first / 4, dim, "vectors");
                 });
  } else {
    const std::size_t es = element_size(type);
    m.packed.resize(n * d * es);
    read_section(in, kTagVectors, "vectors", m.packed.data(), m.packed.size(),
                 [&](const unsigned char* p, std::size_t bytes, uint64_t first) {
                   if (type != ElementType::F16 && type != ElementType::BF16) return;  // integers: all values valid
                   const std::vector<float> f = decode_rows(p, type, 1, static_cast<int64_t>(bytes / es));
                   check_finite(f.data(), f.size(), first / es, dim, "vectors");
                 });
  }
  m.ids.resize(n);
  read_section(in, kTagIds, "ids", m.ids.data(), m.ids.size() * sizeof(int64_t),
               [&](const unsigned char* p, std::size_t bytes, uint64_t first) {
                 check_ids(reinterpret_cast<const int64_t*>(p), bytes / 8, first / 8, "ids");
               });
  if (trained) m.compute_centroid_norms();
  m.validate();
  return image;
}

}  // namespace ivfgpu::io
