#include "guard.hpp"

namespace ivfgpu::capi {

namespace {
// One message per thread. A fixed buffer rather than std::string: assigning can then never
// throw, and the pointer handed out stays valid until this thread's next call.
thread_local char t_message[1024] = "";
}  // namespace

ivf_status set_error(ivf_status status, const std::string& message) noexcept {
  const std::size_t n = message.size() < sizeof(t_message) - 1 ? message.size() : sizeof(t_message) - 1;
  message.copy(t_message, n);
  t_message[n] = '\0';
  return status;
}

void clear_error() noexcept { t_message[0] = '\0'; }

const char* last_error_message() noexcept { return t_message; }

ivf_status to_status(Errc code) noexcept {
  switch (code) {
    case Errc::InvalidArgument: return IVF_ERR_INVALID_ARGUMENT;
    case Errc::OutOfDeviceMemory: return IVF_ERR_OUT_OF_DEVICE_MEMORY;
    case Errc::OutOfHostMemory: return IVF_ERR_OUT_OF_HOST_MEMORY;
    case Errc::Cuda: return IVF_ERR_CUDA;
    case Errc::Unsupported: return IVF_ERR_UNSUPPORTED;
    case Errc::InvalidState: return IVF_ERR_INVALID_STATE;
    case Errc::BufferTooSmall: return IVF_ERR_BUFFER_TOO_SMALL;
    case Errc::Io: return IVF_ERR_IO;
    case Errc::CorruptData: return IVF_ERR_CORRUPT_DATA;
    case Errc::VersionMismatch: return IVF_ERR_VERSION_MISMATCH;
    case Errc::DeviceLost: return IVF_ERR_DEVICE_LOST;
    case Errc::Internal: return IVF_ERR_INTERNAL;
    case Errc::Cancelled: return IVF_ERR_CANCELLED;
  }
  return IVF_ERR_INTERNAL;
}

}  // namespace ivfgpu::capi
