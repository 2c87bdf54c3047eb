// Benchmark data: the synthetic Gaussian mixture of docs/performance.md, and loaders for
// .fvecs, .bvecs and IDX (Fashion-MNIST) files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

struct Matrix {
  int64_t n = 0;
  int64_t dim = 0;
  std::vector<float> data;
};

// C = 4 * nlist centres with N(0,1) coordinates (drawn from centre_seed); each row picks a
// centre uniformly and adds 0.35 * N(0,1) to every coordinate (drawn from seed). Generated in
// fixed blocks with their own generators, in parallel; the result depends only on the seeds.
Matrix gaussian_mixture(int64_t n, int64_t dim, int64_t nlist, uint64_t centre_seed, uint64_t seed);

// Throws std::runtime_error on a missing or malformed file. max_rows <= 0: all rows.
Matrix load_fvecs(const std::string& path, int64_t max_rows = 0);
Matrix load_bvecs(const std::string& path, int64_t max_rows = 0);
// IDX images (e.g. Fashion-MNIST train-images-idx3-ubyte): each image a row of uint8 as float.
Matrix load_idx_images(const std::string& path, int64_t max_rows = 0);
// By extension: .fvecs, .bvecs, otherwise IDX.
Matrix load_any(const std::string& path, int64_t max_rows = 0);

}  // namespace bench
