// The main job: build an IVF-Flat index on real data, search it at several nprobe, and print
// recall@k against exact neighbours and the speed, on the GPU when one is usable, else the
// CPU. The data is Fashion-MNIST by default (60,000 x 784 training images as the base, the
// 10,000 test images as queries) or any .fvecs / .bvecs files (--base, --query), with their
// ground truth (--groundtruth .ivecs) when there is one. `fashion_mnist --help` lists the options.
//
// Without --groundtruth the exact neighbours are computed once with a BLAS GEMM and cached next
// to the binary under a hash of the base, the queries and k, so the recall column does not
// depend on the library being measured and other data never reuses a stale cache.
#include <cblas.h>
#include <ivfgpu/ivfgpu.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cli.hpp"
#include "datasets.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "fashion_mnist: %s\n", msg.c_str());
  std::exit(1);
}

void check(ivf_status s, const char* what) {
  if (s != IVF_OK) die(std::string(what) + ": " + ivf_status_string(s) + ": " + ivf_last_error_message());
}

// A status line on stderr, only on a terminal.
void status(const std::string& line) {
  if (ivftools::interactive()) std::fprintf(stderr, "%s\n", line.c_str());
}

// Exact k nearest (squared L2) of each query by GEMM: ||x||^2 - 2 q.x, in query blocks.
std::vector<int64_t> exact_neighbours(const std::vector<float>& base, int64_t nb, const std::vector<float>& q,
                                      int64_t nq, int64_t dim, int64_t k) {
  std::vector<float> norms(static_cast<std::size_t>(nb));
  for (int64_t i = 0; i < nb; ++i) {
    float s = 0;
    for (int64_t j = 0; j < dim; ++j) s += base[i * dim + j] * base[i * dim + j];
    norms[i] = s;
  }
  std::vector<int64_t> out(static_cast<std::size_t>(nq * k));
  const int64_t block = 500;
  std::vector<float> scores(static_cast<std::size_t>(std::min(block, nq) * nb));
  std::vector<int64_t> order(static_cast<std::size_t>(nb));
  ivftools::Progress progress("exact neighbours (once, cached)", nq);
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
    progress.update(q0 + rows);
  }
  return out;
}

// The cache file: a header naming what it was computed from, then nq x k int64 ids. A file whose
// header does not match (other data, k or query count; another version) is recomputed.
struct CacheHeader {
  std::array<char, 8> magic{{'I', 'V', 'F', 'E', 'X', 'A', 'C', '1'}};
  uint64_t content_hash = 0;
  int64_t nb = 0, nq = 0, dim = 0, k = 0;
};

uint64_t content_hash(const std::vector<float>& base, const std::vector<float>& queries, std::size_t query_values) {
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  XXH3_64bits_update(st, base.data(), base.size() * sizeof(float));
  XXH3_64bits_update(st, queries.data(), query_values * sizeof(float));
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

// The directory of this program (the cache lives beside it, in the build tree).
std::string program_dir() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return ".";
  std::string path(buf.data(), static_cast<std::size_t>(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::vector<int64_t> cached_exact_neighbours(const std::vector<float>& base, int64_t nb, const std::vector<float>& q,
                                             int64_t nq, int64_t dim, int64_t k) {
  CacheHeader want;
  want.content_hash = content_hash(base, q, static_cast<std::size_t>(nq * dim));
  want.nb = nb;
  want.nq = nq;
  want.dim = dim;
  want.k = k;
  char name[64];
  std::snprintf(name, sizeof name, "/fashion_mnist.exact-%016llx-k%lld.bin",
                static_cast<unsigned long long>(want.content_hash), static_cast<long long>(k));
  const std::string cache = program_dir() + name;
  std::vector<int64_t> gt(static_cast<std::size_t>(nq * k));
  if (std::FILE* f = std::fopen(cache.c_str(), "rb")) {
    CacheHeader got;
    const bool ok = std::fread(&got, sizeof got, 1, f) == 1 && std::memcmp(&got, &want, sizeof got) == 0 &&
                    std::fread(gt.data(), sizeof(int64_t), gt.size(), f) == gt.size() && std::fgetc(f) == EOF;
    std::fclose(f);
    if (ok) return gt;
  }
  gt = exact_neighbours(base, nb, q, nq, dim, k);
  // Written beside and renamed, so an interrupted run never leaves a partial cache.
  const std::string tmp = cache + ".tmp" + std::to_string(getpid());
  if (std::FILE* f = std::fopen(tmp.c_str(), "wb")) {
    const bool ok = std::fwrite(&want, sizeof want, 1, f) == 1 &&
                    std::fwrite(gt.data(), sizeof(int64_t), gt.size(), f) == gt.size();
    if (std::fclose(f) == 0 && ok) std::rename(tmp.c_str(), cache.c_str());
    std::remove(tmp.c_str());
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

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int main(int argc, char** argv) {
  // Every option, in one place. The names and checks shared with bench/ivfgpu_bench come from
  // tools/cli.hpp.
  CLI::App app{"The main job: index real data with libivfgpu, search it at several nprobe and print recall@k and "
               "queries per second. Fashion-MNIST by default; --base/--query (and --groundtruth) for SIFT1M, "
               "GIST1M, BIGANN slices or your own .fvecs/.bvecs files.",
               "fashion_mnist"};
  std::string dir = "/usr/share/datasets/fashion-mnist", backend_name = "auto";
  ivftools::DataFiles files;
  int64_t nlist = 1024, k = 10, nq = 0;
  std::vector<int64_t> nprobes = {1, 2, 4, 8, 16, 32, 64};
  auto* dir_opt = app.add_option("--dir", dir,
                                 "Fashion-MNIST directory (IDX files as Debian's dataset-fashion-mnist installs them)")
                      ->type_name("PATH")
                      ->check(CLI::Validator(CLI::ExistingDirectory).description(""))
                      ->capture_default_str();
  ivftools::add_data_options(app, files);
  files.base_opt->excludes(dir_opt)->needs(files.query_opt);
  files.query_opt->needs(files.base_opt);
  auto* nq_opt = ivftools::add_nq_option(app, nq, "search only the first N queries (default: all); --queries N is the "
                                                  "older spelling, still accepted",
                                         "--nq,--queries");
  ivftools::add_nlist_option(app, nlist);
  ivftools::add_count_option(app, "--k", k, "neighbours per query; recall@k is measured")->capture_default_str();
  ivftools::add_count_list_option(app, "--nprobe", nprobes, "lists probed per query, one table row each (those above "
                                                            "--nlist are left out)");
  ivftools::add_backend_option(app, backend_name);
  bool pageable = false;
  app.add_flag("--pageable", pageable,
               "leave the queries and results in ordinary (pageable) memory instead of registering them with "
               "ivf_host_register: a CUDA search then copies them at the host's memcpy rate");
  ivftools::parse_or_exit(app, argc, argv);

  // Check everything before any work: the backend, then the files' shapes against each other
  // and against the counts asked for.
  const int64_t backend = ivftools::resolve_backend(app, backend_name);
  const bool fashion = files.base.empty();
  const std::string base_path = fashion ? dir + "/train-images-idx3-ubyte.gz" : files.base;
  const std::string query_path = fashion ? dir + "/t10k-images-idx3-ubyte.gz" : files.query;
  const char* base_opt_name = fashion ? "--dir" : "--base";
  const char* query_opt_name = fashion ? "--dir" : "--query";
  ivftools::Shape bs, qs, gs;
  try {
    bs = ivftools::peek_vectors(base_path);
  } catch (const std::exception& e) {
    ivftools::usage_error(app, std::string(base_opt_name) + ": " + e.what() +
                                   (fashion ? " (install Debian's dataset-fashion-mnist, or pass --base/--query)" : ""));
  }
  try {
    qs = ivftools::peek_vectors(query_path);
  } catch (const std::exception& e) {
    ivftools::usage_error(app, std::string(query_opt_name) + ": " + e.what());
  }
  if (qs.dim != bs.dim)
    ivftools::usage_error(app, std::string(query_opt_name) + ": the queries have " + std::to_string(qs.dim) +
                                   " dimensions, the base vectors " + std::to_string(bs.dim));
  if (nq_opt->count() == 0) nq = qs.n;
  if (nq > qs.n)
    ivftools::usage_error(app, "--nq " + std::to_string(nq) + ": " + query_path + " holds only " +
                                   std::to_string(qs.n) + " queries");
  if (k > bs.n)
    ivftools::usage_error(app, "--k " + std::to_string(k) + ": more than the " + std::to_string(bs.n) +
                                   " base vectors");
  if (nlist > bs.n)
    ivftools::usage_error(app, "--nlist " + std::to_string(nlist) + ": more lists than the " + std::to_string(bs.n) +
                                   " base vectors");
  if (!files.groundtruth.empty()) {
    try {
      gs = ivftools::peek_ids(files.groundtruth);
    } catch (const std::exception& e) {
      ivftools::usage_error(app, std::string("--groundtruth: ") + e.what());
    }
    if (gs.n < nq)
      ivftools::usage_error(app, "--groundtruth: " + std::to_string(gs.n) + " rows for " + std::to_string(nq) +
                                     " queries (--nq)");
    if (gs.dim < k)
      ivftools::usage_error(app, "--k " + std::to_string(k) + ": --groundtruth holds only " + std::to_string(gs.dim) +
                                     " neighbours per query");
  }

  const std::string data_name = fashion ? std::string("Fashion-MNIST") : basename_of(base_path);
  status("loading " + base_path + " and " + query_path);
  ivftools::Matrix base, queries;
  std::vector<int64_t> gt(static_cast<std::size_t>(nq * k));
  try {
    base = ivftools::load_any(base_path);
    queries = ivftools::load_any(query_path, nq);
    if (!files.groundtruth.empty()) {
      const ivftools::IdMatrix g = ivftools::load_ivecs(files.groundtruth, nq);
      for (int64_t q = 0; q < nq; ++q)
        for (int64_t j = 0; j < k; ++j) {
          const int32_t id = g.data[q * g.dim + j];
          if (id < 0 || id >= base.n)
            die("--groundtruth: id " + std::to_string(id) + " in row " + std::to_string(q) +
                " is not a row of --base (" + std::to_string(base.n) + " rows): ground truth of other data?");
          gt[q * k + j] = id;
        }
    }
  } catch (const std::exception& e) {
    die(e.what());
  }
  const int64_t nb = base.n, dim = base.dim;
  if (files.groundtruth.empty()) gt = cached_exact_neighbours(base.data, nb, queries.data, nq, dim, k);

  ivf_params* params = nullptr;
  check(ivf_params_create(&params), "ivf_params_create");
  check(ivf_params_set_int(params, IVF_PARAM_NLIST, nlist), "--nlist");
  check(ivf_params_set_int(params, IVF_PARAM_BACKEND, backend), "--backend");
  ivf_index* index = nullptr;
  check(ivf_create(&index, dim, params), "ivf_create");
  int64_t used_backend = 0, device = -1;
  check(ivf_index_info(index, IVF_INFO_BACKEND, &used_backend), "info");
  check(ivf_index_info(index, IVF_INFO_DEVICE, &device), "info");
  const std::string where = used_backend == IVF_BACKEND_CUDA ? "GPU (CUDA device " + std::to_string(device) + ")"
                            : backend == IVF_BACKEND_CPU     ? std::string("CPU (--backend cpu)")
                                                             : std::string("CPU (no usable CUDA device)");
  status("training " + std::to_string(nlist) + " lists on " + std::to_string(nb) + " vectors on the " + where + " ...");
  // The library reports each long call's progress through a callback on its parameters
  // (ivf_params_set_progress); on a terminal it becomes a progress line.
  // The line counts in its own unit (percent of training, rows added).
  struct Line {
    ivftools::Progress progress;
    int64_t total;
  };
  const auto show = [](ivf_progress_stage, double fraction, void* user) -> int32_t {
    auto* line = static_cast<Line*>(user);
    line->progress.update(static_cast<int64_t>(fraction * static_cast<double>(line->total) + 0.5));
    return 0;  // never cancel
  };
  auto t0 = Clock::now();
  {
    Line line{ivftools::Progress("training (%)", 100), 100};
    check(ivf_params_set_progress(params, show, &line), "progress");
    check(ivf_train_ex(index, params, base.data.data(), IVF_DTYPE_F32, nb, dim), "ivf_train");
  }
  const double train_s = seconds_since(t0);
  t0 = Clock::now();
  {
    Line line{ivftools::Progress("adding", nb), nb};
    check(ivf_params_set_progress(params, show, &line), "progress");
    check(ivf_add_ex(index, params, base.data.data(), IVF_DTYPE_F32, nb, dim, nullptr), "ivf_add");
  }
  check(ivf_params_set_progress(params, nullptr, nullptr), "progress");
  const double add_s = seconds_since(t0);

  std::vector<int64_t> ids(static_cast<std::size_t>(nq * k));
  std::vector<float> dists(ids.size());
  // The queries and results are reused by every batch: page-locked once, each batch's copies
  // run at the bus's rate instead of the host's memcpy rate (31 MB of queries: ~0.6 ms instead
  // of ~3 ms on the H200 machine). Not fatal where it fails (e.g. a low RLIMIT_MEMLOCK).
  std::vector<void*> registered;
  if (!pageable) {
    const auto pin = [&](void* p, std::size_t bytes) {
      if (ivf_host_register(p, bytes) == IVF_OK)
        registered.push_back(p);
      else
        std::fprintf(stderr, "note: queries and results stay in pageable memory: %s\n", ivf_last_error_message());
    };
    pin(queries.data.data(), queries.data.size() * sizeof(float));
    pin(ids.data(), ids.size() * sizeof(int64_t));
    pin(dists.data(), dists.size() * sizeof(float));
  }
  int32_t gpus = 0;
  if (ivf_cuda_device_count(&gpus) != IVF_OK) gpus = 0;
  std::printf("libivfgpu %s: %s, %lld x %lld base, %lld queries, nlist %lld, k %lld\n", ivf_version(),
              data_name.c_str(), (long long)nb, (long long)dim, (long long)nq, (long long)nlist, (long long)k);
  std::printf("backend: %s\ntrain %.2f s, add %.2f s\nqueries and results: %s\n\n", where.c_str(), train_s, add_s,
              registered.size() < 3 ? "pageable"
              : gpus > 0               ? "page-locked (ivf_host_register)"
                                            : "registered (no effect without a CUDA device)");
  const std::string recall_header = "recall@" + std::to_string(k);
  std::printf("%8s %10s %12s %12s\n", "nprobe", recall_header.c_str(), "QPS", "batch ms");
  for (int64_t nprobe : nprobes) {
    if (nprobe > nlist) continue;
    check(ivf_params_set_int(params, IVF_PARAM_NPROBE, nprobe), "--nprobe");
    // Warm-up, then the median of timed batches: 15 of a few milliseconds (the GPU: one host's
    // hiccup moves a median of 3), 3 of longer ones, just the one when a batch takes seconds
    // (as on the CPU backend).
    t0 = Clock::now();
    check(ivf_search(index, params, queries.data.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data()),
          "ivf_search");
    std::vector<double> times{seconds_since(t0)};
    if (times[0] < 1.0) {
      const int reps = times[0] < 0.01 ? 15 : 3;
      times.clear();
      for (int rep = 0; rep < reps; ++rep) {
        t0 = Clock::now();
        check(ivf_search(index, params, queries.data.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), dists.data()),
              "ivf_search");
        times.push_back(seconds_since(t0));
      }
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    std::printf("%8lld %10.3f %12.0f %12.2f\n", (long long)nprobe, recall(ids, gt, nq, k), double(nq) / median,
                median * 1e3);
    std::fflush(stdout);
  }
  for (void* p : registered) (void)ivf_host_unregister(p);
  ivf_free(index);
  ivf_params_free(params);
  return 0;
}
