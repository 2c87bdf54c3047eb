// filter_bench: what ids cost at search time and at mutation time. Filtered search QPS at
// several selectivities next to the unfiltered figure (allow lists of random ids), and the
// latency of removes and updates on an idle index. Public C API only.
//
//   filter_bench [--n 1000000] [--dim 128] [--nlist 1024] [--nq 10000] [--nprobe 16] [--k 10]
//                [--reps 5] [--selectivity 0.01,0.1,0.5] [--backend auto|cpu|cuda] [--json FILE]
#include <ivfgpu/ivfgpu.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "datasets.hpp"
#include "measure.hpp"

namespace {

using ivftools::check;
using ivftools::Clock;
using ivftools::median;
using ivftools::ms_since;




std::vector<double> parse_list(const std::string& s) {
  std::vector<double> out;
  std::size_t at = 0;
  while (at < s.size()) {
    std::size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    out.push_back(std::stod(s.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 1000000, dim = 128, nlist = 1024, nq = 10000, nprobe = 16, k = 10, reps = 5;
  std::vector<double> sels = {0.01, 0.1, 0.5};
  int32_t backend = IVF_BACKEND_AUTO;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: filter_bench [--n N] [--dim D] [--nlist L] [--nq Q] [--nprobe P] [--k K] [--reps R]\n"
                  "                    [--selectivity S1,S2,...] [--backend auto|cpu|cuda] [--json FILE]\n");
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--n") n = std::atoll(v.c_str());
    else if (a == "--dim") dim = std::atoll(v.c_str());
    else if (a == "--nlist") nlist = std::atoll(v.c_str());
    else if (a == "--nq") nq = std::atoll(v.c_str());
    else if (a == "--nprobe") nprobe = std::atoll(v.c_str());
    else if (a == "--k") k = std::atoll(v.c_str());
    else if (a == "--reps") reps = std::atoll(v.c_str());
    else if (a == "--selectivity") sels = parse_list(v);
    else if (a == "--backend") backend = v == "cpu" ? IVF_BACKEND_CPU : v == "auto" ? IVF_BACKEND_AUTO : IVF_BACKEND_CUDA;
    else if (a == "--json") json = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const ivftools::Matrix base = ivftools::gaussian_mixture(n, dim, nlist, 1, 2);
  const ivftools::Matrix q = ivftools::gaussian_mixture(nq, dim, nlist, 1, 3);
  ivf_params* p = nullptr;
  check(ivf_params_create(&p), "params");
  check(ivf_params_set_int(p, IVF_PARAM_NLIST, nlist), "nlist");
  check(ivf_params_set_int(p, IVF_PARAM_BACKEND, backend), "backend");
  check(ivf_params_set_int(p, IVF_PARAM_UNIQUE_IDS, 1), "unique");
  ivf_index* idx = nullptr;
  check(ivf_create(&idx, dim, p), "create");
  check(ivf_train(idx, base.data.data(), IVF_DTYPE_F32, n, dim), "train");
  check(ivf_add(idx, base.data.data(), IVF_DTYPE_F32, n, dim, nullptr), "add");
  int64_t used = 0, map_bytes = 0;
  check(ivf_index_info(idx, IVF_INFO_BACKEND, &used), "info");
  check(ivf_index_info(idx, IVF_INFO_ID_MAP_BYTES, &map_bytes), "info");
  std::printf("libivfgpu %s filter_bench: %lld x %lld, nlist %lld, nq %lld, nprobe %lld, k %lld, %s, id map %.1f MB\n",
              ivf_version(), (long long)n, (long long)dim, (long long)nlist, (long long)nq, (long long)nprobe,
              (long long)k, used == IVF_BACKEND_CUDA ? "CUDA" : "CPU", map_bytes / 1e6);

  ivf_params* sp = nullptr;
  check(ivf_params_create(&sp), "params");
  check(ivf_params_set_int(sp, IVF_PARAM_NPROBE, nprobe), "nprobe");
  std::vector<int64_t> ids(static_cast<std::size_t>(nq * k));
  std::vector<float> d(ids.size());
  auto qps = [&](ivf_filter* f) {
    check(ivf_params_set_ptr(sp, IVF_PARAM_FILTER, f), "filter");
    check(ivf_search(idx, sp, q.data.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), d.data()), "warm-up");
    std::vector<double> t;
    for (int64_t r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      check(ivf_search(idx, sp, q.data.data(), IVF_DTYPE_F32, nq, dim, k, ids.data(), d.data()), "search");
      t.push_back(nq / (ms_since(t0) / 1000.0));
    }
    return median(t);
  };
  const double unfiltered = qps(nullptr);
  std::printf("\n%-14s %12s %10s\n", "selectivity", "QPS", "vs none");
  std::printf("%-14s %12.0f %9.1f%%\n", "none", unfiltered, 100.0);
  std::mt19937_64 rng(5);
  std::vector<std::pair<double, double>> rows;
  for (double s : sels) {
    std::vector<int64_t> allowed;
    for (int64_t i = 0; i < n; ++i)
      if (std::uniform_real_distribution<double>(0, 1)(rng) < s) allowed.push_back(i);
    ivf_filter* f = nullptr;
    check(ivf_filter_create(&f, allowed.data(), static_cast<int64_t>(allowed.size()), IVF_FILTER_ALLOW), "filter");
    const double v = qps(f);
    rows.emplace_back(s, v);
    std::printf("%-14g %12.0f %9.1f%%\n", s, v, 100.0 * v / unfiltered);
    ivf_filter_free(f);
  }
  // Removes and updates of 1000 ids at a time on the idle index.
  std::vector<double> rm, up;
  std::vector<int64_t> batch(1000);
  for (int r = 0; r < 5; ++r) {
    for (int64_t i = 0; i < 1000; ++i) batch[i] = (r * 1000 + i) * 97 % n;
    auto t0 = Clock::now();
    check(ivf_update(idx, nullptr, base.data.data(), IVF_DTYPE_F32, 1000, dim, batch.data()), "update");
    up.push_back(ms_since(t0));
    t0 = Clock::now();
    check(ivf_remove(idx, nullptr, batch.data(), 1000, nullptr), "remove");
    rm.push_back(ms_since(t0));
  }
  std::printf("\nremove of 1000 ids: %.2f ms (median of 5); update of 1000 ids: %.2f ms\n", median(rm), median(up));
  if (!json.empty()) {
    std::ofstream j(json);
    j << "{\"n\":" << n << ",\"dim\":" << dim << ",\"nprobe\":" << nprobe << ",\"k\":" << k << ",\"qps_unfiltered\":" << unfiltered
      << ",\"filtered\":[";
    for (std::size_t i = 0; i < rows.size(); ++i)
      j << (i ? "," : "") << "{\"selectivity\":" << rows[i].first << ",\"qps\":" << rows[i].second << "}";
    j << "],\"remove_1000_ms\":" << median(rm) << ",\"update_1000_ms\":" << median(up) << "}\n";
  }
  ivf_params_free(sp);
  ivf_params_free(p);
  ivf_free(idx);
  return 0;
}
