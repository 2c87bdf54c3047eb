// Atomic replacement of a file: the content goes to a temporary file in the same directory
// (same filesystem, so rename is atomic), which is flushed (fsync) and then renamed over the
// target; the directory is fsynced so that the rename itself survives a power cut.
#pragma once

#include <functional>
#include <string>

#include "byte_sink.hpp"

namespace ivfgpu::io {

// Runs produce(sink) into a temporary file and renames it over `path`. On any failure (an
// exception from produce, a failed write, fsync or rename) the temporary file is removed, the
// exception propagates and `path` is untouched. Errors of the system calls are Errc::Io.
// A process killed part-way leaves `path` intact and may leave the temporary file, named
// ".<basename>.ivftmp-<pid>-<n>" in the same directory.
void write_file_atomic(const std::string& path, const std::function<void(ByteSink&)>& produce);

// The prefix of temporary files for `path`'s base name (tests look for leftovers with it).
std::string temp_file_prefix(const std::string& base_name);

}  // namespace ivfgpu::io
