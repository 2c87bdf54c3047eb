#include "byte_sink.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../errors.hpp"

namespace ivfgpu::io {

void MemorySink::write(const void* data, std::size_t n) {
  if (n > capacity_ - static_cast<std::size_t>(written_))
    fail(Errc::Internal, "serialiser wrote past the size it computed");
  if (n != 0) std::memcpy(data_ + written_, data, n);
  written_ += n;
}

FdSink::FdSink(int fd, std::string path) : fd_(fd), path_(std::move(path)), buffer_(std::size_t{1} << 20) {}

void FdSink::write(const void* data, std::size_t n) {
  if (n == 0) return;  // data may be NULL (an empty vector's data())
  const auto* p = static_cast<const unsigned char*>(data);
  written_ += n;
  if (n <= buffer_.size() - used_) {  // small fields gather in the buffer
    std::memcpy(buffer_.data() + used_, p, n);
    used_ += n;
    return;
  }
  flush();
  if (n >= buffer_.size()) {  // large payloads go straight to the file
    write_all(p, n);
  } else {
    std::memcpy(buffer_.data(), p, n);
    used_ = n;
  }
}

void FdSink::flush() {
  write_all(buffer_.data(), used_);
  used_ = 0;
}

void FdSink::write_all(const unsigned char* data, std::size_t n) {
  while (n > 0) {
    const std::size_t chunk = n > (std::size_t{1} << 30) ? std::size_t{1} << 30 : n;
    const ssize_t put = ::write(fd_, data, chunk);
    if (put < 0) {
      if (errno == EINTR) continue;
      fail(Errc::Io, "cannot write " + path_ + ": " + std::strerror(errno));
    }
    data += put;
    n -= static_cast<std::size_t>(put);
  }
}

}  // namespace ivfgpu::io
