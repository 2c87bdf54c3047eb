// Helpers shared by the index-file tests: indexes through the C API, search, bytes and files.
#pragma once

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ivfgpu/ivfgpu.h"

namespace iotest {

struct IndexDeleter {
  void operator()(ivf_index* p) const { ivf_free(p); }
};
using IndexPtr = std::unique_ptr<ivf_index, IndexDeleter>;
struct ParamsDeleter {
  void operator()(ivf_params* p) const { ivf_params_free(p); }
};
using ParamsPtr = std::unique_ptr<ivf_params, ParamsDeleter>;

// A handle value no call may write on failure.
inline ivf_index* sentinel() { return reinterpret_cast<ivf_index*>(uintptr_t{0x5a5a5a5a}); }

inline std::vector<float> make_data(int64_t n, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  // Clustered data: a few centres plus noise, so that lists differ in size.
  std::vector<float> centres(8 * static_cast<std::size_t>(dim));
  for (float& c : centres) c = 4.0f * dist(rng);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < dim; ++j) x[i * dim + j] = centres[(i % 8) * dim + j] + dist(rng);
  return x;
}

inline ParamsPtr make_params(int64_t nlist, ivf_metric metric, ivf_backend backend, int64_t nprobe = 0) {
  ivf_params* p = nullptr;
  EXPECT_EQ(ivf_params_create(&p), IVF_OK);
  ParamsPtr params(p);
  EXPECT_EQ(ivf_params_set_int(p, IVF_PARAM_NLIST, nlist), IVF_OK);
  EXPECT_EQ(ivf_params_set_int(p, IVF_PARAM_METRIC, metric), IVF_OK);
  EXPECT_EQ(ivf_params_set_int(p, IVF_PARAM_BACKEND, backend), IVF_OK);
  EXPECT_EQ(ivf_params_set_int(p, IVF_PARAM_KMEANS_ITERS, 5), IVF_OK);
  if (nprobe > 0) EXPECT_EQ(ivf_params_set_int(p, IVF_PARAM_NPROBE, nprobe), IVF_OK);
  return params;
}

inline ParamsPtr backend_params(ivf_backend backend) {
  ivf_params* p = nullptr;
  EXPECT_EQ(ivf_params_create(&p), IVF_OK);
  EXPECT_EQ(ivf_params_set_int(p, IVF_PARAM_BACKEND, backend), IVF_OK);
  return ParamsPtr(p);
}

// A trained index holding n vectors (ids: base + 7 i when id_base >= 0, else sequential).
inline IndexPtr make_index(int64_t dim, int64_t nlist, int64_t n, ivf_metric metric, ivf_backend backend,
                           int64_t id_base = -1, uint32_t seed = 1) {
  ParamsPtr params = make_params(nlist, metric, backend, nlist);
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_create(&raw, dim, params.get()), IVF_OK) << ivf_last_error_message();
  IndexPtr index(raw);
  const std::vector<float> train = make_data(std::max<int64_t>(n, nlist * 4), dim, seed);
  EXPECT_EQ(ivf_train(raw, train.data(), IVF_DTYPE_F32, static_cast<int64_t>(train.size()) / dim, dim), IVF_OK)
      << ivf_last_error_message();
  if (n > 0) {
    const std::vector<float> x = make_data(n, dim, seed + 1);
    std::vector<int64_t> ids(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[i] = id_base >= 0 ? id_base + 7 * i : i;
    EXPECT_EQ(ivf_add(raw, x.data(), IVF_DTYPE_F32, n, dim, ids.data()), IVF_OK) << ivf_last_error_message();
  }
  return index;
}

struct Results {
  std::vector<int64_t> ids;
  std::vector<float> dists;
};

inline Results search(const ivf_index* index, const std::vector<float>& queries, int64_t dim, int64_t k,
                      int64_t nprobe) {
  const int64_t n = static_cast<int64_t>(queries.size()) / dim;
  Results r{std::vector<int64_t>(static_cast<std::size_t>(n * k)), std::vector<float>(static_cast<std::size_t>(n * k))};
  ivf_params* p = nullptr;
  EXPECT_EQ(ivf_params_create(&p), IVF_OK);
  ParamsPtr params(p);
  EXPECT_EQ(ivf_params_set_int(p, IVF_PARAM_NPROBE, nprobe), IVF_OK);
  EXPECT_EQ(ivf_search(index, p, queries.data(), IVF_DTYPE_F32, n, dim, k, r.ids.data(), r.dists.data()), IVF_OK)
      << ivf_last_error_message();
  return r;
}

inline int64_t info(const ivf_index* index, ivf_info_key key) {
  int64_t v = -12345;
  EXPECT_EQ(ivf_index_info(index, key, &v), IVF_OK);
  return v;
}

inline std::vector<unsigned char> serialize(const ivf_index* index) {
  size_t size = 0;
  EXPECT_EQ(ivf_serialize(index, nullptr, 0, &size), IVF_OK) << ivf_last_error_message();
  std::vector<unsigned char> bytes(size);
  EXPECT_EQ(ivf_serialize(index, bytes.data(), bytes.size(), &size), IVF_OK) << ivf_last_error_message();
  EXPECT_EQ(size, bytes.size());
  return bytes;
}

inline std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline bool file_exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// A fresh directory under $TMPDIR (or /tmp), removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/ivfgpu-io-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = buf.data();
  }
  ~TempDir() {
    for (const std::string& name : entries()) {
      const std::string p = path_ + "/" + name;
      if (std::remove(p.c_str()) != 0) ::rmdir(p.c_str());
    }
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Names in the directory other than . and ..
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
      }
      ::closedir(d);
    }
    return names;
  }

 private:
  std::string path_;
};

// |a - b| within `rel` of the larger magnitude (with a tiny absolute floor for values near 0).
inline bool close_rel(float a, float b, double rel = 1e-4) {
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(double(a) - double(b)) <= rel * std::max(std::fabs(double(a)), std::fabs(double(b))) + 1e-6;
}

struct Comparison {
  int64_t rows_identical = 0;  // same ids in the same order
  int64_t tie_differences = 0; // positions whose id differs only among equal distances
  int64_t mismatches = 0;      // positions that differ otherwise (must be 0)
  double max_rel_error = 0.0;  // largest relative distance difference, position by position
};

// Compares result rows `ours` with reference rows, ties aside: where ids differ at a position,
// both distances must be equal (within rel) and our id must stand at that distance in the
// reference row (or tie with its k-th distance, when it fell off the reference's end).
inline Comparison compare_results(const Results& ours, const Results& ref, int64_t n, int64_t k, double rel = 1e-4) {
  Comparison c;
  for (int64_t q = 0; q < n; ++q) {
    bool identical = true;
    for (int64_t j = 0; j < k; ++j) {
      const std::size_t at = static_cast<std::size_t>(q * k + j);
      const float a = ours.dists[at], b = ref.dists[at];
      if (!std::isinf(a) && !std::isinf(b) && std::max(std::fabs(a), std::fabs(b)) > 0)
        c.max_rel_error = std::max(c.max_rel_error, std::fabs(double(a) - double(b)) / std::max(std::fabs(double(a)), std::fabs(double(b))));
      if (!close_rel(a, b, rel)) {
        ++c.mismatches;
        identical = false;
        continue;
      }
      if (ours.ids[at] == ref.ids[at]) continue;
      identical = false;
      bool tie = false;
      for (int64_t jj = 0; jj < k; ++jj) {
        const std::size_t r = static_cast<std::size_t>(q * k + jj);
        if (ref.ids[r] == ours.ids[at] && close_rel(ref.dists[r], a, rel)) tie = true;
      }
      if (!tie) tie = close_rel(a, ref.dists[static_cast<std::size_t>(q * k + k - 1)], rel);
      if (tie) ++c.tie_differences; else ++c.mismatches;
    }
    if (identical) ++c.rows_identical;
  }
  return c;
}

// ivf_deserialize of the first `size` bytes on the CPU backend, from an exact-size copy (so
// that AddressSanitizer sees any read past the end). A failure must leave *out alone and set
// a message; a success must give a usable index (searched once when trained).
inline ivf_status try_load(const std::vector<unsigned char>& bytes, std::size_t size) {
  ivf_index* out = sentinel();
  ParamsPtr cpu = backend_params(IVF_BACKEND_CPU);
  std::vector<unsigned char> exact(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
  const unsigned char none = 0;
  const ivf_status s = ivf_deserialize(exact.empty() ? &none : exact.data(), size, cpu.get(), &out);
  if (s == IVF_OK) {
    EXPECT_NE(out, sentinel());
    if (info(out, IVF_INFO_IS_TRAINED) == 1) {
      const int64_t dim = info(out, IVF_INFO_DIM);
      search(out, std::vector<float>(static_cast<std::size_t>(dim), 0.25f), dim, 3, 2);
    }
    ivf_free(out);
  } else {
    EXPECT_EQ(out, sentinel()) << "a failed load wrote *out";
    EXPECT_NE(std::string(ivf_last_error_message()), "") << "a failure without a message";
  }
  return s;
}
inline ivf_status try_load(const std::vector<unsigned char>& bytes) { return try_load(bytes, bytes.size()); }

// $IVFGPU_DATA_DIR when set (e.g. a copy of the data carried to another machine), else the
// directory the build was configured with.
inline std::string data_dir() {
  const char* env = std::getenv("IVFGPU_DATA_DIR");
  return env != nullptr ? env : IVFGPU_DATA_DIR;
}

// fvecs: records of int32 d then d floats. Empty when the file is absent.
inline std::vector<float> read_fvecs(const std::string& path, int64_t& dim) {
  const std::vector<unsigned char> bytes = read_bytes(path);
  std::vector<float> out;
  dim = 0;
  std::size_t at = 0;
  while (at + 4 <= bytes.size()) {
    int32_t d;
    std::memcpy(&d, bytes.data() + at, 4);
    if (d <= 0 || at + 4 + 4 * std::size_t(d) > bytes.size()) break;
    dim = d;
    const std::size_t old = out.size();
    out.resize(old + std::size_t(d));
    std::memcpy(out.data() + old, bytes.data() + at + 4, 4 * std::size_t(d));
    at += 4 + 4 * std::size_t(d);
  }
  return out;
}

}  // namespace iotest
