// Bounded sequential input for the parsers. The total size is known before the first byte is
// read, so every length taken from the input is compared with what is left before it sizes an
// allocation or a copy: a hostile length fails as "truncated", never as a huge allocation or
// an out-of-bounds read.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ivfgpu::io {

static_assert(std::endian::native == std::endian::little,
              "the file formats are little-endian and read by memcpy: a big-endian host needs byte swapping");

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  uint64_t size() const { return size_; }
  uint64_t position() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Throws CorruptData ("truncated") unless at least n bytes remain. `what` names the field.
  void expect(uint64_t n, const char* what) const;
  // Copies the next n bytes to dst (after expect(n)).
  void read(void* dst, uint64_t n, const char* what);
  void skip(uint64_t n, const char* what);
  // The first n bytes of the input, without moving (n <= size()).
  void peek_front(void* dst, std::size_t n);

  template <class T>
  T read_pod(const char* what) {
    T v;
    read(&v, sizeof v, what);
    return v;
  }

 protected:
  explicit ByteSource(uint64_t size) : size_(size) {}
  void set_size(uint64_t size) { size_ = size; }
  // Exactly n bytes at offset `at`, which the caller has checked to lie inside the input.
  virtual void read_at(uint64_t at, void* dst, uint64_t n) = 0;

 private:
  uint64_t size_;
  uint64_t pos_ = 0;
};

class MemorySource final : public ByteSource {
 public:
  MemorySource(const void* data, std::size_t size) : ByteSource(size), data_(static_cast<const unsigned char*>(data)) {}

 private:
  void read_at(uint64_t at, void* dst, uint64_t n) override;
  const unsigned char* data_;
};

// A regular file opened read-only; its size is taken once, at open.
class FileSource final : public ByteSource {
 public:
  explicit FileSource(const std::string& path);
  ~FileSource() override;

 private:
  void read_at(uint64_t at, void* dst, uint64_t n) override;
  std::string path_;
  int fd_ = -1;
};

}  // namespace ivfgpu::io
