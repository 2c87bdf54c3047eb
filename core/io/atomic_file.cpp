#include "atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "../errors.hpp"

namespace ivfgpu::io {

namespace {

std::atomic<uint64_t> g_temp_counter{0};

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  fail(Errc::Io, what + " " + path + ": " + std::strerror(err));
}

// The temporary file; removed by the destructor unless committed.
class TempFile {
 public:
  TempFile(const std::string& dir, const std::string& base) {
    for (int attempt = 0; attempt < 100; ++attempt) {
      path_ = dir + temp_file_prefix(base) + std::to_string(::getpid()) + "-" +
              std::to_string(g_temp_counter.fetch_add(1));
      // 0666: the umask applies, as for any file the caller creates.
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) return;
      if (errno != EEXIST) io_error("cannot create a temporary file", path_, errno);
    }
    fail(Errc::Io, "cannot create a temporary file beside " + dir + base + ": names exhausted");
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

  void sync_and_close() {
    if (::fsync(fd_) != 0) io_error("cannot flush (fsync)", path_, errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) io_error("cannot close", path_, errno);
  }
  void rename_to(const std::string& target) {
    if (::rename(path_.c_str(), target.c_str()) != 0) io_error("cannot rename " + path_ + " to", target, errno);
    committed_ = true;
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

void sync_directory(const std::string& dir) {
  const std::string d = dir.empty() ? "." : dir;
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) io_error("saved, but cannot open the directory to flush it", d, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems cannot fsync a directory (EINVAL); the rename is then as durable as they allow.
  if (rc != 0 && err != EINVAL) io_error("saved, but cannot flush (fsync) the directory", d, err);
}

}  // namespace

std::string temp_file_prefix(const std::string& base_name) { return "." + base_name + ".ivftmp-"; }

void write_file_atomic(const std::string& path, const std::function<void(ByteSink&)>& produce) {
  if (path.empty()) fail(Errc::InvalidArgument, "save: the path is empty");
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..")
    fail(Errc::InvalidArgument, "save: " + path + " names a directory, not a file");
  TempFile temp(dir.empty() ? std::string() : dir, base);
  {
    FdSink sink(temp.fd(), temp.path());
    produce(sink);
    sink.flush();
  }
  temp.sync_and_close();
  temp.rename_to(path);
  sync_directory(dir);
}

}  // namespace ivfgpu::io
