// Sequential output for the writers: a caller's memory buffer or a file descriptor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ivfgpu::io {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, std::size_t n) = 0;
  template <class T>
  void put(const T& v) {
    write(&v, sizeof v);
  }
  uint64_t written() const { return written_; }

 protected:
  uint64_t written_ = 0;
};

// Writes into [data, data + capacity); writing past the end is a bug of the size computation
// (Errc::Internal), never a buffer overrun.
class MemorySink final : public ByteSink {
 public:
  MemorySink(void* data, std::size_t capacity) : data_(static_cast<unsigned char*>(data)), capacity_(capacity) {}
  void write(const void* data, std::size_t n) override;

 private:
  unsigned char* data_;
  std::size_t capacity_;
};

// Counts bytes only (sizes of formats without a closed-form size).
class CountingSink final : public ByteSink {
 public:
  void write(const void*, std::size_t n) override { written_ += n; }
};

// Buffered writes to an open descriptor; failures throw Errc::Io naming `path`.
class FdSink final : public ByteSink {
 public:
  FdSink(int fd, std::string path);
  void write(const void* data, std::size_t n) override;
  void flush();

 private:
  void write_all(const unsigned char* data, std::size_t n);
  int fd_;
  std::string path_;
  std::vector<unsigned char> buffer_;
  std::size_t used_ = 0;
};

}  // namespace ivfgpu::io
