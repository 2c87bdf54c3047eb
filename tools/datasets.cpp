#include "datasets.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

namespace ivftools {

namespace {

// Cumulative Zipf(s) weights of the centres, normalised to end at 1: centre c has weight
// (c + 1)^-s.
std::vector<double> zipf_cdf(int64_t centres, double s) {
  std::vector<double> cdf(static_cast<std::size_t>(centres));
  double sum = 0;
  for (int64_t c = 0; c < centres; ++c) cdf[c] = sum += std::pow(static_cast<double>(c + 1), -s);
  for (double& v : cdf) v /= sum;
  cdf.back() = 1.0;
  return cdf;
}

}  // namespace

double zipf_share(int64_t nlist, double zipf_s, int64_t hot) {
  const int64_t centres = 4 * nlist;
  hot = std::clamp<int64_t>(hot, 0, centres);
  if (hot == 0) return 0;
  if (zipf_s <= 0) return static_cast<double>(hot) / static_cast<double>(centres);
  return zipf_cdf(centres, zipf_s)[hot - 1];
}

Matrix gaussian_mixture(int64_t n, int64_t dim, int64_t nlist, uint64_t centre_seed, uint64_t seed, double zipf_s) {
  const int64_t centres = 4 * nlist;
  std::vector<float> c(static_cast<std::size_t>(centres * dim));
  {
    std::mt19937_64 rng(centre_seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (auto& v : c) v = g(rng);
  }
  const std::vector<double> cdf = zipf_s > 0 ? zipf_cdf(centres, zipf_s) : std::vector<double>{};
  Matrix m;
  m.n = n;
  m.dim = dim;
  m.data.resize(static_cast<std::size_t>(n * dim));
  constexpr int64_t kBlock = 16384;  // rows per generator
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < hw; ++t)
    pool.emplace_back([&, t] {
      for (int64_t b = t; b < blocks; b += hw) {
        std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(b));
        std::normal_distribution<float> g(0.0f, 1.0f);
        std::uniform_int_distribution<int64_t> pick(0, centres - 1);
        std::uniform_real_distribution<double> u(0.0, 1.0);
        // Uniform (as always) or, with zipf_s, the first centre whose cumulative weight passes u.
        const auto centre = [&]() -> int64_t {
          if (cdf.empty()) return pick(rng);
          const auto it = std::upper_bound(cdf.begin(), cdf.end(), u(rng));
          return std::min<int64_t>(it - cdf.begin(), centres - 1);
        };
        for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
          const float* ci = c.data() + centre() * dim;
          float* row = m.data.data() + i * dim;
          for (int64_t j = 0; j < dim; ++j) row[j] = ci[j] + 0.35f * g(rng);
        }
      }
    });
  for (auto& th : pool) th.join();
  return m;
}

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) { throw std::runtime_error(path + ": " + why); }

bool ends_with(const std::string& s, const char* suffix) {
  const std::string e(suffix);
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

// A file opened for reading, through `gzip -dc` when its name ends in .gz.
class Input {
 public:
  explicit Input(const std::string& path) : path_(path), piped_(ends_with(path, ".gz")) {
    std::FILE* probe = std::fopen(path.c_str(), "rb");
    if (!probe) fail(path, std::strerror(errno));
    if (!piped_) {
      f_ = probe;
      return;
    }
    std::fclose(probe);
    std::string quoted;
    for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    f_ = popen(("gzip -dc '" + quoted + "'").c_str(), "r");
    if (!f_) fail(path, "cannot run gzip");
  }
  ~Input() {
    if (f_) piped_ ? pclose(f_) : std::fclose(f_);
  }
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;

  // Reads exactly n bytes; false at a clean end of file before the first byte.
  bool read(void* out, std::size_t n) {
    const std::size_t got = std::fread(out, 1, n, f_);
    if (got == n) return true;
    if (got == 0 && std::feof(f_)) return false;
    fail(path_, "truncated");
  }
  int64_t size() const {  // bytes of a plain file
    std::fseek(f_, 0, SEEK_END);
    const long end = std::ftell(f_);
    std::fseek(f_, 0, SEEK_SET);
    return end;
  }

 private:
  std::string path_;
  bool piped_;
  std::FILE* f_ = nullptr;
};

enum class Kind { fvecs, bvecs, ivecs, idx };

Kind kind_of(const std::string& path) {
  if (ends_with(path, ".fvecs")) return Kind::fvecs;
  if (ends_with(path, ".bvecs")) return Kind::bvecs;
  if (ends_with(path, ".ivecs")) return Kind::ivecs;
  return Kind::idx;
}

std::size_t element_bytes(Kind k) { return k == Kind::bvecs ? 1 : 4; }

uint32_t be32(const unsigned char* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }

// TEXMEX layout: each record an int32 dimension then dim values of T, converted to Out.
template <typename T, typename Out>
std::vector<Out> load_vecs(const std::string& path, int64_t max_rows, int64_t& rows, int64_t& dim) {
  Input in(path);
  std::vector<Out> out;
  std::vector<T> row;
  int32_t d = 0;
  rows = 0;
  dim = 0;
  while ((max_rows <= 0 || rows < max_rows) && in.read(&d, 4)) {
    if (d <= 0 || (dim != 0 && d != dim)) fail(path, "bad dimension " + std::to_string(d) + " in row " + std::to_string(rows));
    dim = d;
    row.resize(static_cast<std::size_t>(d));
    if (!in.read(row.data(), sizeof(T) * row.size())) fail(path, "truncated");
    out.insert(out.end(), row.begin(), row.end());
    ++rows;
  }
  if (rows == 0) fail(path, "no vectors");
  return out;
}

}  // namespace

Shape peek_shape(const std::string& path) {
  const Kind kind = kind_of(path);
  Input in(path);
  Shape s;
  if (kind == Kind::idx) {
    unsigned char h[16];
    if (!in.read(h, 16) || be32(h) != 0x00000803u) fail(path, "not an IDX3 ubyte image file (nor .fvecs/.bvecs/.ivecs)");
    s.n = be32(h + 4);
    s.dim = int64_t(be32(h + 8)) * be32(h + 12);
    return s;
  }
  int32_t d = 0;
  if (!in.read(&d, 4)) fail(path, "empty");
  if (d <= 0) fail(path, "bad dimension " + std::to_string(d));
  const int64_t record = 4 + int64_t(d) * int64_t(element_bytes(kind));
  const int64_t bytes = in.size();
  if (bytes % record != 0)
    fail(path, "size " + std::to_string(bytes) + " is not a multiple of the record size " + std::to_string(record) +
                   " (wrong extension?)");
  s.n = bytes / record;
  s.dim = d;
  return s;
}

Shape peek_vectors(const std::string& path) {
  if (kind_of(path) == Kind::ivecs) fail(path, "holds ids (.ivecs), not vectors");
  return peek_shape(path);
}

Shape peek_ids(const std::string& path) {
  if (kind_of(path) != Kind::ivecs) fail(path, "not an .ivecs file of neighbour ids");
  return peek_shape(path);
}

Matrix load_fvecs(const std::string& path, int64_t max_rows) {
  Matrix m;
  m.data = load_vecs<float, float>(path, max_rows, m.n, m.dim);
  return m;
}
Matrix load_bvecs(const std::string& path, int64_t max_rows) {
  Matrix m;
  m.data = load_vecs<uint8_t, float>(path, max_rows, m.n, m.dim);
  return m;
}
IdMatrix load_ivecs(const std::string& path, int64_t max_rows) {
  IdMatrix m;
  m.data = load_vecs<int32_t, int32_t>(path, max_rows, m.n, m.dim);
  return m;
}

Matrix load_idx_images(const std::string& path, int64_t max_rows) {
  Input in(path);
  unsigned char h[16];
  if (!in.read(h, 16) || be32(h) != 0x00000803u) fail(path, "not an IDX3 ubyte image file");
  Matrix m;
  m.n = be32(h + 4);
  m.dim = int64_t(be32(h + 8)) * be32(h + 12);
  if (max_rows > 0) m.n = std::min(m.n, max_rows);
  std::vector<unsigned char> raw(static_cast<std::size_t>(m.n * m.dim));
  if (!raw.empty() && !in.read(raw.data(), raw.size())) fail(path, "truncated");
  m.data.assign(raw.begin(), raw.end());
  return m;
}

Matrix load_any(const std::string& path, int64_t max_rows) {
  switch (kind_of(path)) {
    case Kind::fvecs: return load_fvecs(path, max_rows);
    case Kind::bvecs: return load_bvecs(path, max_rows);
    case Kind::ivecs: fail(path, "holds ids (.ivecs), not vectors");
    case Kind::idx: break;
  }
  return load_idx_images(path, max_rows);
}

}  // namespace ivftools
