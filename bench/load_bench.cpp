// load_bench: the device memory a load needs, sampled from outside (bench/device_run.sh `load`:
// nvidia-smi every 10 ms) over three processes: `--phase save` builds an index of the synthetic
// mixture and saves it; `--phase empty` holds an empty CUDA index for a second (the CUDA
// context and pool baseline); `--phase load` loads the file, holds it a second and searches
// once. Peak of `load` less peak of `empty`, over the index's device bytes, is the load's peak
// as a multiple of the index's size. Public C API only.
// With --device-budget BYTES (e.g. 2G, 512M; load phase only) the load phase then also opens the
// same file with IVF_PARAM_DEVICE_BUDGET set (its lists into pinned host memory, README "Indexes
// larger than the GPU"), times that open and its first search next to the full load, and prints
// both ("open end ..." and a "load ... s, open ... s" line). Without it the output is as before.
//   load_bench --phase save|empty|load [--n 1000000] [--dim 128] [--nlist 1024] [--file PATH]
//              [--device-budget BYTES]
#include <ivfgpu/ivfgpu.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "datasets.hpp"
#include "measure.hpp"

namespace {

using ivftools::check;
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  int64_t n = 1000000, dim = 128, nlist = 1024, budget = 0;
  std::string file = "/tmp/load_bench.ivf", phase;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n") n = std::atoll(argv[i + 1]);
    else if (a == "--dim") dim = std::atoll(argv[i + 1]);
    else if (a == "--nlist") nlist = std::atoll(argv[i + 1]);
    else if (a == "--file") file = argv[i + 1];
    else if (a == "--phase") phase = argv[i + 1];
    else if (a == "--device-budget") {
      try {
        budget = ivftools::parse_bytes(argv[i + 1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "--device-budget: %s\n", e.what());
        return 2;
      }
    } else {
      std::fprintf(stderr,
                   "usage: load_bench --phase save|empty|load [--n N] [--dim D] [--nlist L] [--file PATH] "
                   "[--device-budget BYTES]\n");
      return 2;
    }
  }
  if (phase == "empty") {
    // The same fixed costs as the load phase (CUDA context, pool, cuBLAS handle and workspace
    // from a search), with almost no index.
    const ivftools::Matrix tiny = ivftools::gaussian_mixture(4 * 64, dim, 64, 1, 2);
    ivf_params* p = nullptr;
    check(ivf_params_create(&p), "params");
    check(ivf_params_set_int(p, IVF_PARAM_NLIST, 64), "nlist");
    ivf_index* idx = nullptr;
    check(ivf_create(&idx, dim, p), "create");
    check(ivf_train(idx, tiny.data.data(), IVF_DTYPE_F32, tiny.n, dim), "train");
    check(ivf_add(idx, tiny.data.data(), IVF_DTYPE_F32, tiny.n, dim, nullptr), "add");
    int64_t id = 0;
    float d = 0;
    check(ivf_search(idx, nullptr, tiny.data.data(), IVF_DTYPE_F32, 1, dim, 1, &id, &d), "search");
    std::this_thread::sleep_for(std::chrono::seconds(1));
    ivf_free(idx);
    ivf_params_free(p);
    return 0;
  }
  if (phase == "save") {
    const ivftools::Matrix base = ivftools::gaussian_mixture(n, dim, nlist, 1, 2);
    ivf_params* p = nullptr;
    check(ivf_params_create(&p), "params");
    check(ivf_params_set_int(p, IVF_PARAM_NLIST, nlist), "nlist");
    ivf_index* idx = nullptr;
    check(ivf_create(&idx, dim, p), "create");
    check(ivf_train(idx, base.data.data(), IVF_DTYPE_F32, n, dim), "train");
    check(ivf_add(idx, base.data.data(), IVF_DTYPE_F32, n, dim, nullptr), "add");
    check(ivf_save(idx, file.c_str()), "save");
    ivf_free(idx);
    ivf_params_free(p);
    return 0;
  }
  if (phase != "load") {
    std::fprintf(stderr, "--phase must be save, empty or load\n");
    return 2;
  }
  const double t0 = now_s();
  std::printf("load start %.3f\n", t0);
  std::fflush(stdout);
  ivf_index* idx = nullptr;
  check(ivf_load(file.c_str(), nullptr, &idx), "load");
  const double t1 = now_s();
  int64_t bytes = 0, backend = 0;
  check(ivf_index_info(idx, IVF_INFO_DEVICE_MEMORY_BYTES, &bytes), "info");
  check(ivf_index_info(idx, IVF_INFO_BACKEND, &backend), "info");
  std::printf("load end %.3f: %.2f s, %s, index device memory %.1f MiB\nindex_mib %.1f\n", t1, t1 - t0,
              backend == IVF_BACKEND_CUDA ? "CUDA" : "CPU", bytes / 1048576.0, bytes / 1048576.0);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::vector<float> q(static_cast<std::size_t>(dim), 0.5f);
  int64_t id = 0;
  float d = 0;
  check(ivf_search(idx, nullptr, q.data(), IVF_DTYPE_F32, 1, dim, 1, &id, &d), "search");
  ivf_free(idx);
  if (budget > 0) {
    // The same file opened with a device budget: the lists go to pinned host memory, the device
    // gets the centroids and the budget's fixed parts; the first search streams what it probes.
    ivf_params* p = nullptr;
    check(ivf_params_create(&p), "params");
    check(ivf_params_set_int(p, IVF_PARAM_DEVICE_BUDGET, budget), "device budget");
    const double o0 = now_s();
    std::printf("open start %.3f\n", o0);
    std::fflush(stdout);
    ivf_index* opened = nullptr;
    check(ivf_load(file.c_str(), p, &opened), "load with a device budget");
    const double o1 = now_s();
    int64_t obytes = 0, reported = 0, lists = 0, resident = 0, host_tier = 0;
    check(ivf_index_info(opened, IVF_INFO_DEVICE_MEMORY_BYTES, &obytes), "info");
    check(ivf_index_info(opened, IVF_INFO_DEVICE_BUDGET, &reported), "info");
    check(ivf_index_info(opened, IVF_INFO_RESIDENT_LISTS, &lists), "info");
    check(ivf_index_info(opened, IVF_INFO_RESIDENT_BYTES, &resident), "info");
    check(ivf_index_info(opened, IVF_INFO_HOST_TIER_BYTES, &host_tier), "info");
    std::printf("open end %.3f: %.2f s, device budget %.1f MiB (reported %.1f MiB), index device memory %.1f MiB, "
                "%lld lists resident (%.1f MiB), host tier %.1f MiB\n",
                o1, o1 - o0, budget / 1048576.0, reported / 1048576.0, obytes / 1048576.0, (long long)lists,
                resident / 1048576.0, host_tier / 1048576.0);
    const double s0 = now_s();
    check(ivf_search(opened, nullptr, q.data(), IVF_DTYPE_F32, 1, dim, 1, &id, &d), "search after the open");
    const double s1 = now_s();
    int64_t streamed = 0;
    check(ivf_index_info(opened, IVF_INFO_STREAMED_BYTES, &streamed), "info");
    std::printf("open first search %.4f s, streamed %.1f MiB\n", s1 - s0, streamed / 1048576.0);
    std::printf("load %.2f s, open (device budget %.1f MiB) %.2f s\n", t1 - t0, budget / 1048576.0, o1 - o0);
    std::fflush(stdout);
    ivf_free(opened);
    ivf_params_free(p);
  }
  std::remove(file.c_str());
  return 0;
}
