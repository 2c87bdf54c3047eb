// Typed engine errors. The engine throws core::Error; capi/ maps Errc to ivf_status at the
// C boundary. core/ never sees the C header, so the codes are its own.
#pragma once

#include <stdexcept>
#include <string>

namespace ivfgpu {

enum class Errc {
  InvalidArgument,
  OutOfDeviceMemory,
  OutOfHostMemory,
  Cuda,
  Unsupported,
  InvalidState,
  BufferTooSmall,
  Io,
  CorruptData,
  VersionMismatch,
  DeviceLost,
  Internal,
  Cancelled,
};

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

[[noreturn]] inline void fail(Errc code, const std::string& message) { throw Error(code, message); }

inline void require(bool condition, Errc code, const char* message) {
  if (!condition) fail(code, message);
}

}  // namespace ivfgpu
