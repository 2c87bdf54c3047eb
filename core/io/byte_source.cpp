#include "byte_source.hpp"

#include "../progress.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../errors.hpp"

namespace ivfgpu::io {

namespace {

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  fail(Errc::Io, what + " " + path + ": " + std::strerror(err));
}

// open + fstat; the descriptor is closed again on any failure.
int open_regular(const std::string& path, uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block us
  if (fd < 0) io_error("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    io_error("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(Errc::Io, "cannot load " + path + ": not a regular file");
  }
  size = static_cast<uint64_t>(st.st_size);
#ifdef POSIX_FADV_SEQUENTIAL
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
  return fd;
}

}  // namespace

void ByteSource::expect(uint64_t n, const char* what) const {
  if (n > remaining())
    fail(Errc::CorruptData, std::string("truncated: ") + what + " needs " + std::to_string(n) + " bytes at offset " +
                                std::to_string(pos_) + ", only " + std::to_string(remaining()) + " left");
}

void ByteSource::read(void* dst, uint64_t n, const char* what) {
  expect(n, what);
  if (n == 0) return;
  read_at(pos_, dst, n);
  pos_ += n;
  // Reading is most of a load: 0..90% of its progress (the rest is building the index).
  progress::set(0.9 * static_cast<double>(pos_) / static_cast<double>(size_ > 0 ? size_ : 1));
}

void ByteSource::skip(uint64_t n, const char* what) {
  expect(n, what);
  pos_ += n;
}

void ByteSource::peek_front(void* dst, std::size_t n) {
  if (n > size_) fail(Errc::Internal, "peek_front beyond the input");
  if (n != 0) read_at(0, dst, n);
}

void MemorySource::read_at(uint64_t at, void* dst, uint64_t n) { std::memcpy(dst, data_ + at, n); }

FileSource::FileSource(const std::string& path) : ByteSource(0), path_(path) {
  uint64_t size = 0;
  fd_ = open_regular(path_, size);  // nothing after this can throw
  set_size(size);
}

FileSource::~FileSource() {
  if (fd_ >= 0) ::close(fd_);
}

void FileSource::read_at(uint64_t at, void* dst, uint64_t n) {
  auto* out = static_cast<unsigned char*>(dst);
  while (n > 0) {
    // Linux transfers at most 0x7ffff000 bytes per call; ask for 1 GiB at a time.
    const std::size_t chunk = n > (uint64_t{1} << 30) ? std::size_t{1} << 30 : static_cast<std::size_t>(n);
    const ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(at));
    if (got < 0) {
      if (errno == EINTR) continue;
      io_error("cannot read", path_, errno);
    }
    if (got == 0) fail(Errc::CorruptData, "truncated: " + path_ + " became shorter while it was read");
    out += got;
    at += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
}

}  // namespace ivfgpu::io
