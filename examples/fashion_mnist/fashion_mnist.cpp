// The main job: build an IVF-Flat index on real data (Fashion-MNIST, 60,000 x 784 training
// images as the base, 10,000 test images as queries), search it at several nprobe, and print
// recall@10 against exact neighbours and the speed, on the GPU when one is usable, else the CPU.
//
//   fashion_mnist [--dir /usr/share/datasets/fashion-mnist] [--nlist 1024] [--k 10]
//                 [--backend auto|cpu|cuda] [--queries N]
//
// The exact neighbours are computed once with a BLAS GEMM (cached next to the binary), so the
// recall column does not depend on the library being measured.
#include <cblas.h>
#include <ivfgpu/ivfgpu.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "fashion_mnist: %s\n", msg.c_str());
  std::exit(1);
}

void check(ivf_status s, const char* what) {
  if (s != IVF_OK) die(std::string(what) + ": " + ivf_status_string(s) + ": " + ivf_last_error_message());
}

uint32_t be32(const unsigned char* p) { return (uint32_t(p[0]) << 24) | (p[1] << 16) | (p[2] << 8) | p[3]; }

// IDX image file (gzip-compressed, as Debian ships it) -> rows of float pixels.
std::vector<float> read_idx_images(const std::string& path, int64_t& rows, int64_t& dim) {
  std::FILE* probe = std::fopen(path.c_str(), "rb");
  if (!probe) die("cannot open " + path + " (install Debian's dataset-fashion-mnist, or pass --dir)");
  std::fclose(probe);
  std::string cmd = "gzip -dc '" + path + "'";
  std::FILE* f = popen(cmd.c_str(), "r");
  if (!f) die("cannot run gzip on " + path);
  unsigned char header[16];
  if (std::fread(header, 1, 16, f) != 16 || be32(header) != 0x00000803) die(path + " is not an IDX image file");
  rows = be32(header + 4);
  dim = int64_t(be32(header + 8)) * be32(header + 12);
  std::vector<unsigned char> pixels(static_cast<std::size_t>(rows * dim));
  if (std::fread(pixels.data(), 1, pixels.size(), f) != pixels.size()) die(path + " is truncated");
  pclose(f);
  return std::vector<float>(pixels.begin(), pixels.end());
}

// Exact k nearest (squared L2) of each query by GEMM: ||x||^2 - 2 q.x, in query blocks.
std::vector<int64_t> exact_neighbours(const std::vector<float>& base, int64_t nb, const std::vector<float>& q,
                                      int64_t nq, int64_t dim, int64_t k) {
  std::vector<float> norms(nb);
  for (int64_t i = 0; i < nb; ++i) {
    float s = 0;
    for (int64_t j = 0; j < dim; ++j) s += base[i * dim + j] * base[i * dim + j];
    norms[i] = s;
  }
  std::vector<int64_t> out(static_cast<std::size_t>(nq * k));
  const int64_t block = 500;
  std::vector<float> scores(static_cast<std::size_t>(block * nb));
  std::vector<int64_t> order(static_cast<std::size_t>(nb));
  for (int64_t q0 = 0; q0 < nq; q0 += block) {
    const int64_t rows = std::min(block, nq - q0);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(rows), int(nb), int(dim), -2.0f, q.data() + q0 * dim,
                int(dim), base.data(), int(dim), 0.0f, scores.data(), int(nb));
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores.data() + r * nb;
      for (int64_t i = 0; i < nb; ++i) s[i] += norms[i];
      for (int64_t i = 0; i < nb; ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [s](int64_t a, int64_t b) { return s[a] != s[b] ? s[a] < s[b] : a < b; });
      std::copy(order.begin(), order.begin() + k, out.begin() + (q0 + r) * k);
    }
    std::fprintf(stderr, "\r  exact neighbours (once, cached): %lld / %lld queries", (long long)(q0 + rows), (long long)nq);
  }
  std::fprintf(stderr, "\n");
  return out;
}

std::vector<int64_t> cached_exact_neighbours(const std::string& cache, const std::vector<float>& base, int64_t nb,
                                             const std::vector<float>& q, int64_t nq, int64_t dim, int64_t k) {
  std::vector<int64_t> gt(static_cast<std::size_t>(nq * k));
  if (std::FILE* f = std::fopen(cache.c_str(), "rb")) {
    const bool ok = std::fread(gt.data(), sizeof(int64_t), gt.size(), f) == gt.size() && std::fgetc(f) == EOF;
    std::fclose(f);
    if (ok) return gt;
  }
  gt = exact_neighbours(base, nb, q, nq, dim, k);
  if (std::FILE* f = std::fopen(cache.c_str(), "wb")) {
    std::fwrite(gt.data(), sizeof(int64_t), gt.size(), f);
    std::fclose(f);
  }
  return gt;
}

double recall(const std::vector<int64_t>& ids, const std::vector<int64_t>& gt, int64_t nq, int64_t k) {
  int64_t hits = 0;
  for (int64_t q = 0; q < nq; ++q)
    for (int64_t j = 0; j < k; ++j)
      hits += std::count(ids.begin() + q * k, ids.begin() + (q + 1) * k, gt[q * k + j]) > 0;
  return double(hits) / double(nq * k);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/usr/share/datasets/fashion-mnist", backend_name = "auto";
  int64_t nlist = 1024, k = 10, max_queries = 10000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--dir") dir = argv[i + 1];
    else if (a == "--nlist") nlist = std::atoll(argv[i + 1]);
    else if (a == "--k") k = std::atoll(argv[i + 1]);
    else if (a == "--backend") backend_name = argv[i + 1];
    else if (a == "--queries") max_queries = std::atoll(argv[i + 1]);
    else die("unknown option " + a);
  }
  const int64_t backend = backend_name == "cpu" ? IVF_BACKEND_CPU : backend_name == "cuda" ? IVF_BACKEND_CUDA : IVF_BACKEND_AUTO;

  int64_t nb = 0, dim = 0, nq = 0, qdim = 0;
  std::fprintf(stderr, "loading Fashion-MNIST from %s\n", dir.c_str());
  auto base = read_idx_images(dir + "/train-images-idx3-ubyte.gz", nb, dim);
  auto queries = read_idx_images(dir + "/t10k-images-idx3-ubyte.gz", nq, qdim);
  if (qdim != dim) die("base and query dimensions differ");
  nq = std::min(nq, max_queries);
  const std::string cache = std::string(argv[0]) + ".exact_k" + std::to_string(k) + "_nq" + std::to_string(nq) + ".bin";
  auto gt = cached_exact_neighbours(cache, base, nb, queries, nq, dim, k);

  ivf_params* params = nullptr;
  check(ivf_params_create(&params), "ivf_params_create");
  check(ivf_params_set_int(params, IVF_PARAM_NLIST, nlist), "nlist");
  check(ivf_params_set_int(params, IVF_PARAM_BACKEND, backend), "backend");
  ivf_index* index = nullptr;
  check(ivf_create(&index, dim, params), "ivf_create");
  int64_t used_backend = 0, device = -1;
  check(ivf_index_info(index, IVF_INFO_BACKEND, &used_backend), "info");
  check(ivf_index_info(index, IVF_INFO_DEVICE, &device), "info");
  const std::string where = used_backend == IVF_BACKEND_CUDA ? "GPU (CUDA device " + std::to_string(device) + ")"
                                                             : std::string("CPU (no usable CUDA device, or --backend cpu)");
  std::fprintf(stderr, "training %lld lists on %lld vectors on the %s ...\n", (long long)nlist, (long long)nb, where.c_str());
  auto t0 = Clock::now();
  check(ivf_train(index, base.data(), IVF_DTYPE_F32, nb, dim), "ivf_train");
  const double train_s = seconds_since(t0);
  t0 = Clock::now();
  check(ivf_add(index, base.data(), IVF_DTYPE_F32, nb, dim, nullptr), "ivf_add");
  const double add_s = seconds_since(t0);

  std::printf("libivfgpu %s: Fashion-MNIST, %lld x %lld base, %lld queries, nlist %lld, k %lld\n", ivf_version(),
              (long long)nb, (long long)dim, (long long)nq, (long long)nlist, (long long)k);
  std::printf("backend: %s\ntrain %.2f s, add %.2f s\n\n", where.c_str(), train_s, add_s);
  std::printf("%8s %10s %12s %12s\n", "nprobe", "recall@10", "QPS", "batch ms");
  std::vector<int64_t> ids(static_cast<std::size_t>(nq * k));
  std::vector<float> dists(ids.size());
  for (int64_t nprobe : {1, 2, 4, 8, 16, 32, 64}) {
    if (nprobe > nlist) break;
    check(ivf_params_set_int(params, IVF_PARAM_NPROBE, nprobe), "nprobe");
    // Warm-up, then the median of 3 timed batches (just the one when a batch takes seconds,
    // as on the CPU backend).
    t0 = Clock::now();
    check(ivf_search(index, params, queries.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data()), "ivf_search");
    std::vector<double> times{seconds_since(t0)};
    if (times[0] < 1.0) {
      times.clear();
      for (int rep = 0; rep < 3; ++rep) {
        t0 = Clock::now();
        check(ivf_search(index, params, queries.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data()), "ivf_search");
        times.push_back(seconds_since(t0));
      }
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    std::printf("%8lld %10.3f %12.0f %12.2f\n", (long long)nprobe, recall(ids, gt, nq, k), double(nq) / median,
                median * 1e3);
    std::fflush(stdout);
  }
  ivf_free(index);
  ivf_params_free(params);
  return 0;
}
