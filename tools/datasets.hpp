// Data for the demo and the benchmark: the synthetic Gaussian mixture of docs/performance.md,
// and readers for the ANN community's files: .fvecs, .bvecs, .ivecs (TEXMEX: SIFT1M, GIST1M,
// BIGANN slices) and IDX images (Fashion-MNIST, plain or gzip-compressed as Debian ships it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ivftools {

struct Matrix {
  int64_t n = 0;
  int64_t dim = 0;
  std::vector<float> data;
};

// Ground-truth neighbour ids, row-major n x dim (0-based rows of the base file).
struct IdMatrix {
  int64_t n = 0;
  int64_t dim = 0;
  std::vector<int32_t> data;
};

// Rows and dimension of a file, read from its header and size only (cheap: for checking
// options before any work). Throws std::runtime_error naming the file when it is unreadable,
// empty, of an unknown kind or inconsistent with its size.
struct Shape {
  int64_t n = 0;
  int64_t dim = 0;
};
Shape peek_shape(const std::string& path);
// peek_shape of a file that must hold vectors (not .ivecs) / neighbour ids (.ivecs).
Shape peek_vectors(const std::string& path);
Shape peek_ids(const std::string& path);

// C = 4 * nlist centres with N(0,1) coordinates (drawn from centre_seed); each row picks a
// centre uniformly and adds 0.35 * N(0,1) to every coordinate (drawn from seed). Generated in
// fixed blocks with their own generators, in parallel; the result depends only on the seeds.
// zipf_s > 0: each row picks centre c (0-based) with probability proportional to (c + 1)^-zipf_s
// instead, a Zipf law over the centres (centre 0 the hottest; the centres' order is random in
// space, so the hot ones are scattered). zipf_s = 0 gives exactly the uniform mixture.
Matrix gaussian_mixture(int64_t n, int64_t dim, int64_t nlist, uint64_t centre_seed, uint64_t seed,
                        double zipf_s = 0);
// The share of the rows that the hottest `hot` of the 4 * nlist centres draw under zipf_s (as
// gaussian_mixture picks them; zipf_s = 0: hot / (4 * nlist)).
double zipf_share(int64_t nlist, double zipf_s, int64_t hot);

// Throw std::runtime_error on a missing or malformed file. max_rows <= 0: all rows.
Matrix load_fvecs(const std::string& path, int64_t max_rows = 0);
Matrix load_bvecs(const std::string& path, int64_t max_rows = 0);
IdMatrix load_ivecs(const std::string& path, int64_t max_rows = 0);
// IDX images (e.g. Fashion-MNIST train-images-idx3-ubyte[.gz]): each image a row of uint8 as
// float. A name ending in .gz is read through `gzip -dc`.
Matrix load_idx_images(const std::string& path, int64_t max_rows = 0);
// By extension: .fvecs, .bvecs, otherwise IDX.
Matrix load_any(const std::string& path, int64_t max_rows = 0);

}  // namespace ivftools
