// The native libivfgpu index file (docs/file-format.md is the specification): a fixed
// 128-byte header with its own checksum, then four sections (centroids, list offsets, vectors,
// ids), each with a tag, a length and an XXH64 checksum. Little-endian throughout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "byte_sink.hpp"
#include "byte_source.hpp"
#include "fourcc.hpp"
#include "index_image.hpp"

namespace ivfgpu::io {

namespace native {

inline constexpr unsigned char kMagic[8] = {0x89, 'I', 'V', 'F', '\r', '\n', 0x1a, '\n'};
// Version 2 (this library) adds the unique-ids flag; version 1 files still load.
inline constexpr uint32_t kVersion = 3;  // 3: the dtype field may name a compact storage type
inline constexpr uint32_t kOldestVersion = 1;
inline constexpr uint32_t kEndianMarker = 0x01020304;  // stored as 04 03 02 01
inline constexpr uint32_t kSectionCount = 4;
inline constexpr uint32_t kFlagTrained = 1;
inline constexpr uint32_t kFlagUniqueIds = 2;  // version 2

// Header field offsets (bytes from the start of the file).
inline constexpr std::size_t kOffMagic = 0, kOffVersion = 8, kOffEndian = 12, kOffHeaderSize = 16,
                             kOffFlags = 20, kOffFileSize = 24, kOffDim = 32, kOffNlist = 40,
                             kOffNtotal = 48, kOffMetric = 56, kOffDtype = 60, kOffNprobe = 64,
                             kOffKmeansIters = 72, kOffMaxPointsPerCentroid = 80, kOffSeed = 88,
                             kOffSectionCount = 96, kOffReserved = 100, kOffHeaderChecksum = 120,
                             kHeaderSize = 128;
// Section header: tag, reserved (0), payload length, checksum of (these 16 bytes + payload).
inline constexpr std::size_t kSectionHeaderSize = 24, kOffSectionChecksum = 16;

inline constexpr uint32_t kTagCentroids = fourcc("CENT"), kTagOffsets = fourcc("OFFS"),
                          kTagVectors = fourcc("VECS"), kTagIds = fourcc("IDS_");

// Limits a reader enforces (the C API's own bounds).
inline constexpr int64_t kMaxDim = int64_t{1} << 24;
inline constexpr int64_t kMaxNlist = int64_t{1} << 30;

}  // namespace native

// Exact size in bytes of the native file of a model of this shape.
uint64_t native_size(int64_t dim, int64_t nlist, int64_t ntotal, bool trained, std::size_t element_bytes = 4);
// Writes model (which must be valid) and params in the native format.
void write_native(const HostModel& model, const BuildParams& params, ByteSink& out);
// Reads and validates a native file from the start of `in`. Errc::CorruptData,
// VersionMismatch or Unsupported on bad input; never trusts a length before checking it.
IndexImage read_native(ByteSource& in);

}  // namespace ivfgpu::io
