#include "datasets.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

namespace bench {

Matrix gaussian_mixture(int64_t n, int64_t dim, int64_t nlist, uint64_t centre_seed, uint64_t seed) {
  const int64_t centres = 4 * nlist;
  std::vector<float> c(static_cast<std::size_t>(centres * dim));
  {
    std::mt19937_64 rng(centre_seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (auto& v : c) v = g(rng);
  }
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
        for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
          const float* ci = c.data() + pick(rng) * dim;
          float* row = m.data.data() + i * dim;
          for (int64_t j = 0; j < dim; ++j) row[j] = ci[j] + 0.35f * g(rng);
        }
      }
    });
  for (auto& th : pool) th.join();
  return m;
}

namespace {

template <typename T>
Matrix load_vecs(const std::string& path, int64_t max_rows) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  Matrix m;
  int32_t d = 0;
  std::vector<T> row;
  while ((max_rows <= 0 || m.n < max_rows) && f.read(reinterpret_cast<char*>(&d), 4)) {
    if (d <= 0 || (m.dim != 0 && d != m.dim)) throw std::runtime_error("bad dimension in " + path);
    m.dim = d;
    row.resize(d);
    if (!f.read(reinterpret_cast<char*>(row.data()), static_cast<std::streamsize>(sizeof(T) * d)))
      throw std::runtime_error("truncated " + path);
    m.data.insert(m.data.end(), row.begin(), row.end());
    ++m.n;
  }
  if (m.n == 0) throw std::runtime_error("no vectors in " + path);
  return m;
}

uint32_t be32(const unsigned char* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | p[3]; }

}  // namespace

Matrix load_fvecs(const std::string& path, int64_t max_rows) { return load_vecs<float>(path, max_rows); }
Matrix load_bvecs(const std::string& path, int64_t max_rows) { return load_vecs<uint8_t>(path, max_rows); }

Matrix load_idx_images(const std::string& path, int64_t max_rows) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  unsigned char h[16];
  if (!f.read(reinterpret_cast<char*>(h), 16) || be32(h) != 0x00000803u)
    throw std::runtime_error(path + " is not an IDX3 ubyte file");
  Matrix m;
  m.n = be32(h + 4);
  m.dim = int64_t(be32(h + 8)) * be32(h + 12);
  if (max_rows > 0) m.n = std::min(m.n, max_rows);
  std::vector<unsigned char> raw(static_cast<std::size_t>(m.n * m.dim));
  if (!f.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size())))
    throw std::runtime_error("truncated " + path);
  m.data.assign(raw.begin(), raw.end());
  return m;
}

Matrix load_any(const std::string& path, int64_t max_rows) {
  auto ends = [&](const char* s) {
    const std::string e(s);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".fvecs")) return load_fvecs(path, max_rows);
  if (ends(".bvecs")) return load_bvecs(path, max_rows);
  return load_idx_images(path, max_rows);
}

}  // namespace bench
