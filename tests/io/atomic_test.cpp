// Crash safety of ivf_save / ivf_save_faiss: a write that fails part-way (a real EFBIG from
// the kernel under RLIMIT_FSIZE), a rename that fails, a missing directory and a process
// killed mid-save all leave the previous file loadable and unchanged; failures leave no
// temporary file behind.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "io_test_util.hpp"

using namespace iotest;

namespace {

// Lowers the file-size limit for the current process (the kernel then fails write() with
// EFBIG past it; SIGXFSZ is ignored so that the failure is a status, not a death).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit lim = old_;
    lim.rlim_cur = bytes;
    active_ = ::setrlimit(RLIMIT_FSIZE, &lim) == 0;
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  bool active() const { return active_; }

 private:
  rlimit old_{};
  sighandler_t old_handler_;
  bool active_ = false;
};

ivf_status load_status(const std::string& path) {
  ivf_index* raw = nullptr;
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  const ivf_status s = ivf_load(path.c_str(), cpu.get(), &raw);
  if (s == IVF_OK) ivf_free(raw);
  return s;
}

using SaveFn = ivf_status (*)(const ivf_index*, const char*);

class AtomicSave : public ::testing::TestWithParam<SaveFn> {};

TEST_P(AtomicSave, FailingWriteLeavesTheOldFileAndNoTemporary) {
  TempDir dir;
  const std::string path = dir.file("index.bin");
  IndexPtr small = make_index(8, 4, 50, IVF_METRIC_L2, IVF_BACKEND_CPU);
  ASSERT_EQ(GetParam()(small.get(), path.c_str()), IVF_OK) << ivf_last_error_message();
  const std::vector<unsigned char> before = read_bytes(path);
  ASSERT_LT(before.size(), 16u * 1024);

  IndexPtr big = make_index(32, 8, 4000, IVF_METRIC_L2, IVF_BACKEND_CPU);  // ~580 KB
  for (rlim_t limit : {rlim_t{0}, rlim_t{100}, rlim_t{4096}, rlim_t{300000}}) {
    ivf_status s;
    {
      FileSizeLimit guard(limit);
      ASSERT_TRUE(guard.active()) << "cannot lower RLIMIT_FSIZE";
      s = GetParam()(big.get(), path.c_str());
    }
    EXPECT_EQ(s, IVF_ERR_IO) << "limit " << limit;
    EXPECT_NE(std::string(ivf_last_error_message()).find("write"), std::string::npos) << ivf_last_error_message();
    EXPECT_EQ(read_bytes(path), before) << "the old file changed (limit " << limit << ")";
    EXPECT_EQ(load_status(path), IVF_OK);
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"index.bin"}) << "a temporary file was left behind";
  }
  // Without the limit the same save succeeds and replaces the file.
  ASSERT_EQ(GetParam()(big.get(), path.c_str()), IVF_OK);
  EXPECT_GT(read_bytes(path).size(), 500000u);
  EXPECT_EQ(dir.entries().size(), 1u);
}

TEST_P(AtomicSave, FailingRenameLeavesNoTemporary) {
  TempDir dir;
  IndexPtr index = make_index(8, 4, 50, IVF_METRIC_L2, IVF_BACKEND_CPU);
  // The target is a non-empty directory: everything succeeds up to rename(), which fails.
  const std::string target = dir.file("occupied");
  ASSERT_EQ(::mkdir(target.c_str(), 0755), 0);
  write_bytes(target + "/keep", {1, 2, 3});
  EXPECT_EQ(GetParam()(index.get(), target.c_str()), IVF_ERR_IO);
  EXPECT_NE(std::string(ivf_last_error_message()).find("rename"), std::string::npos) << ivf_last_error_message();
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"occupied"});
  EXPECT_EQ(read_bytes(target + "/keep"), (std::vector<unsigned char>{1, 2, 3}));
  std::remove((target + "/keep").c_str());
}

TEST_P(AtomicSave, MissingDirectoryIsAnIoError) {
  TempDir dir;
  IndexPtr index = make_index(8, 4, 50, IVF_METRIC_L2, IVF_BACKEND_CPU);
  EXPECT_EQ(GetParam()(index.get(), dir.file("no/such/dir/x").c_str()), IVF_ERR_IO);
  EXPECT_EQ(GetParam()(index.get(), (dir.path() + "/").c_str()), IVF_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(dir.entries().empty());
}

TEST_P(AtomicSave, ReplacingKeepsOnlyTheNewContent) {
  TempDir dir;
  const std::string path = dir.file("i");
  IndexPtr a = make_index(8, 4, 50, IVF_METRIC_L2, IVF_BACKEND_CPU, 0, 1);
  IndexPtr b = make_index(8, 4, 70, IVF_METRIC_L2, IVF_BACKEND_CPU, 0, 2);
  ASSERT_EQ(GetParam()(a.get(), path.c_str()), IVF_OK);
  ASSERT_EQ(GetParam()(b.get(), path.c_str()), IVF_OK);
  ivf_index* raw = nullptr;
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  ASSERT_EQ(ivf_load(path.c_str(), cpu.get(), &raw), IVF_OK);
  IndexPtr loaded(raw);
  EXPECT_EQ(info(loaded.get(), IVF_INFO_NTOTAL), 70);
  EXPECT_EQ(dir.entries().size(), 1u);
}

TEST_P(AtomicSave, ConcurrentSavesToOnePathLeaveAWholeFile) {
  TempDir dir;
  const std::string path = dir.file("shared");
  IndexPtr a = make_index(8, 4, 300, IVF_METRIC_L2, IVF_BACKEND_CPU, 0, 1);
  IndexPtr b = make_index(8, 4, 500, IVF_METRIC_L2, IVF_BACKEND_CPU, 0, 2);
  std::thread ta([&] { for (int i = 0; i < 10; ++i) EXPECT_EQ(GetParam()(a.get(), path.c_str()), IVF_OK); });
  std::thread tb([&] { for (int i = 0; i < 10; ++i) EXPECT_EQ(GetParam()(b.get(), path.c_str()), IVF_OK); });
  ta.join();
  tb.join();
  EXPECT_EQ(load_status(path), IVF_OK);
  EXPECT_EQ(dir.entries().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Formats, AtomicSave, ::testing::Values(&ivf_save, &ivf_save_faiss),
                         [](const auto& info) { return std::string(info.index == 0 ? "Native" : "Faiss"); });

TEST(AtomicSaveKill, KilledMidSaveLeavesTheOldFileLoadable) {
  TempDir dir;
  const std::string path = dir.file("victim.ivf");
  IndexPtr old_index = make_index(8, 4, 50, IVF_METRIC_L2, IVF_BACKEND_CPU);
  ASSERT_EQ(ivf_save(old_index.get(), path.c_str()), IVF_OK);
  const std::vector<unsigned char> before = read_bytes(path);
  IndexPtr big = make_index(64, 16, 40000, IVF_METRIC_L2, IVF_BACKEND_CPU);  // ~11 MB per save
  int killed_mid_save = 0;
  for (int round = 0; round < 6; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (;;) {  // until killed
        const ivf_status s = ivf_save(big.get(), path.c_str());
        if (s != IVF_OK) ::_exit(3);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + 17 * round));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    // Whatever moment the kill hit, the file is one whole index: the old or a new one.
    const std::vector<unsigned char> now = read_bytes(path);
    const ivf_status s = load_status(path);
    EXPECT_EQ(s, IVF_OK) << "round " << round << ": " << ivf_last_error_message();
    if (now == before) ++killed_mid_save;
    // A killed process cannot clean up: its temporary file may remain (documented); remove it.
    for (const std::string& name : dir.entries())
      if (name != "victim.ivf") {
        EXPECT_EQ(name.rfind(".victim.ivf.ivftmp-", 0), 0u) << "unexpected file " << name;
        std::remove(dir.file(name).c_str());
      }
  }
  std::printf("kill test: %d of 6 kills landed before the first rename\n", killed_mid_save);
}

}  // namespace
