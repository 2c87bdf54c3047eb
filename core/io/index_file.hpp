// Entry points of core/io used by the C layer and the fuzzers: load by magic from a file or a
// memory image, save atomically, serialise into a caller buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "index_image.hpp"

namespace ivfgpu::io {

// The native format or a FAISS IndexIVFFlat, chosen by the first bytes (docs/file-format.md
// §Detection). Errc::CorruptData, VersionMismatch, Unsupported, Io; the result is validated.
IndexImage read_index(const void* data, std::size_t size);
IndexImage load_index_file(const std::string& path);

// Atomic saves (io/atomic_file.hpp).
void save_native_file(const std::string& path, const HostModel& model, const BuildParams& params);
void save_faiss_file(const std::string& path, const HostModel& model, const BuildParams& params);

// Writes the native image into [buffer, buffer + capacity); returns the bytes written.
// Errc::BufferTooSmall when capacity < native_size(...).
std::size_t serialize_native(const HostModel& model, const BuildParams& params, void* buffer, std::size_t capacity);

}  // namespace ivfgpu::io
