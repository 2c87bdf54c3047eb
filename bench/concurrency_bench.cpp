// concurrency_bench: what a service that ingests while it serves sees (issue: "a writer
// starves under search load"). N threads search back to back, first alone, then with one
// writer adding batches; reports search latency p50/p99 and QPS both ways, and the add latency
// under load next to the same adds on an idle index. Public C API only.
//
//   concurrency_bench [--n 1000000] [--dim 128] [--nlist 1024] [--nprobe 16] [--batch 1]
//                     [--k 10] [--threads 32] [--seconds 5] [--add-rows 10000]
//                     [--writer add|mixed] [--backend auto|cpu|cuda] [--json FILE]
// --writer mixed cycles add, update and remove batches of --add-rows (the last two on ids
// the index holds), reporting each operation's latency.
// --clients N is the serving mode of issue 14: N threads of batch-1 searches (--threads N
// --batch 1); --window-us W > 0 creates the index with IVF_PARAM_DYNAMIC_BATCHING and searches
// with IVF_PARAM_BATCH_WINDOW_US = W, and reports how many calls were merged.
// --nprobe and --window-us take comma lists: each pair is measured on the one index, in turn
// (the JSON file then holds one line per pair; each pair's writer phase adds to the index, so
// later pairs search a larger one). --writer none measures searches alone.
#include <ivfgpu/ivfgpu.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "datasets.hpp"
#include "measure.hpp"

namespace {

using ivftools::check;
using ivftools::Clock;
using ivftools::ms_since;
using ivftools::percentile;




struct Options {
  int64_t n = 1000000, dim = 128, nlist = 1024, batch = 1, k = 10, threads = 32, add_rows = 10000;
  int64_t nprobe = 16, window_us = 0;  // the pair being measured (window > 0: dynamic batching)
  std::vector<int64_t> nprobes{16}, windows{0};
  double seconds = 5;
  bool mixed = false, writer = true;
  int32_t backend = IVF_BACKEND_AUTO;
  std::string json;
};

[[noreturn]] void usage(int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: concurrency_bench [--n N] [--dim D] [--nlist L] [--nprobe P] [--batch B] [--k K]\n"
               "                         [--threads T] [--seconds S] [--add-rows R] [--backend auto|cpu|cuda]\n"
               "                         [--json FILE] [--clients N] [--window-us W[,W...]]\n"
               "                         [--writer add|mixed|none]   (--nprobe also takes a list)\n");
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  std::map<std::string, int64_t*> ints = {{"--n", &o.n},         {"--dim", &o.dim},         {"--nlist", &o.nlist},
                                          {"--batch", &o.batch}, {"--k", &o.k},             {"--threads", &o.threads},
                                          {"--add-rows", &o.add_rows}};
  // A comma list of integers >= least.
  auto list = [](const char* name, const char* v, int64_t least) {
    std::vector<int64_t> out;
    for (const char* c = v;;) {
      char* end = nullptr;
      const long long x = std::strtoll(c, &end, 10);
      if (end == c || x < least || (*end != ',' && *end != '\0')) {
        std::fprintf(stderr, "%s: expected a comma list of integers >= %lld, got '%s'\n", name, (long long)least, v);
        usage(2);
      }
      out.push_back(x);
      if (*end == '\0') return out;
      c = end + 1;
    }
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") usage(0);
    if (i + 1 >= argc) usage(2);
    const char* v = argv[++i];
    char* end = nullptr;
    if (auto it = ints.find(a); it != ints.end()) {
      *it->second = std::strtoll(v, &end, 10);
      if (*end != '\0' || *it->second <= 0) {
        std::fprintf(stderr, "%s: expected a positive integer, got '%s'\n", a.c_str(), v);
        usage(2);
      }
    } else if (a == "--seconds") {
      o.seconds = std::strtod(v, &end);
      if (*end != '\0' || o.seconds <= 0) usage(2);
    } else if (a == "--backend") {
      const std::string b = v;
      o.backend = b == "cpu" ? IVF_BACKEND_CPU : b == "cuda" || b == "gpu" ? IVF_BACKEND_CUDA : b == "auto" ? IVF_BACKEND_AUTO : -1;
      if (o.backend < 0) usage(2);
    } else if (a == "--nprobe") {
      o.nprobes = list("--nprobe", v, 1);
    } else if (a == "--writer") {
      const std::string w = v;
      if (w != "add" && w != "mixed" && w != "none") usage(2);
      o.mixed = w == "mixed";
      o.writer = w != "none";
    } else if (a == "--json") {
      o.json = v;
    } else if (a == "--clients") {
      o.threads = std::strtoll(v, &end, 10);
      if (*end != '\0' || o.threads <= 0) usage(2);
      o.batch = 1;
    } else if (a == "--window-us") {
      o.windows = list("--window-us", v, 0);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      usage(2);
    }
  }
  return o;
}

struct Phase {
  std::vector<double> search_ms, add_ms, update_ms, remove_ms;
  double seconds = 0;
  int64_t queries = 0;
};

// T searcher threads for `seconds`; with `writer`, one more thread adds `rows` at a time.
Phase run_phase(ivf_index* idx, const Options& o, const ivftools::Matrix& q, const ivftools::Matrix& extra, bool writer) {
  Phase ph;
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(static_cast<std::size_t>(o.threads));
  std::vector<std::thread> pool;
  ivf_params* sp = nullptr;
  check(ivf_params_create(&sp), "params");
  check(ivf_params_set_int(sp, IVF_PARAM_NPROBE, o.nprobe), "nprobe");
  check(ivf_params_set_int(sp, IVF_PARAM_BATCH_WINDOW_US, o.window_us), "window");
  const auto t0 = Clock::now();
  for (int64_t t = 0; t < o.threads; ++t)
    pool.emplace_back([&, t] {
      std::vector<int64_t> ids(static_cast<std::size_t>(o.batch * o.k));
      std::vector<float> d(ids.size());
      int64_t at = (t * 7919) % (q.n - o.batch + 1);
      while (!stop.load(std::memory_order_relaxed)) {
        const auto s0 = Clock::now();
        check(ivf_search(idx, sp, q.data.data() + at * q.dim, IVF_DTYPE_F32, o.batch, q.dim, o.k, ids.data(), d.data()),
              "search");
        lat[t].push_back(ms_since(s0));
        at = (at + o.batch) % (q.n - o.batch + 1);
      }
    });
  std::thread w;
  if (writer)
    w = std::thread([&] {
      int64_t at = 0, first_id = 0;
      std::vector<int64_t> ids(static_cast<std::size_t>(o.add_rows));
      for (int64_t op = 0; !stop.load(); ++op) {
        const float* rows = extra.data.data() + at * extra.dim;
        const int kind = o.mixed ? static_cast<int>(op % 3) : 0;
        for (int64_t i = 0; i < o.add_rows; ++i) ids[i] = first_id + i;  // ids the index holds
        const auto a0 = Clock::now();
        if (kind == 0) {
          check(ivf_add(idx, rows, IVF_DTYPE_F32, o.add_rows, extra.dim, nullptr), "add");
          ph.add_ms.push_back(ms_since(a0));
        } else if (kind == 1) {
          check(ivf_update(idx, nullptr, rows, IVF_DTYPE_F32, o.add_rows, extra.dim, ids.data()), "update");
          ph.update_ms.push_back(ms_since(a0));
        } else {
          check(ivf_remove(idx, nullptr, ids.data(), o.add_rows, nullptr), "remove");
          ph.remove_ms.push_back(ms_since(a0));
          first_id += o.add_rows;
        }
        at = (at + o.add_rows) % (extra.n - o.add_rows + 1);
      }
    });
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  for (auto& th : pool) th.join();
  if (w.joinable()) w.join();
  ph.seconds = ms_since(t0) / 1000.0;
  for (auto& l : lat) ph.search_ms.insert(ph.search_ms.end(), l.begin(), l.end());
  ph.queries = static_cast<int64_t>(ph.search_ms.size()) * o.batch;
  ivf_params_free(sp);
  return ph;
}

// One (nprobe, window) pair: searches alone, then (unless --writer none) beside one writer.
void measure(ivf_index* idx, const Options& o, const ivftools::Matrix& q, const ivftools::Matrix& extra,
             const std::vector<double>& idle_add, std::ofstream* json) {
  int64_t merged0 = 0;
  check(ivf_index_info(idx, IVF_INFO_MERGED_SEARCHES, &merged0), "info");
  const Phase alone = run_phase(idx, o, q, extra, false);
  const Phase loaded = o.writer ? run_phase(idx, o, q, extra, true) : Phase{};

  const double p50a = percentile(alone.search_ms, 0.5), p99a = percentile(alone.search_ms, 0.99);
  std::printf("\nnprobe %lld, window %lld us\n%-22s %10s %10s %12s\n", (long long)o.nprobe, (long long)o.window_us,
              "searches", "p50 ms", "p99 ms", "QPS");
  std::printf("%-22s %10.3f %10.3f %12.0f\n", "alone", p50a, p99a, alone.queries / alone.seconds);
  double p50w = 0, p99w = 0;
  if (o.writer) {
    p50w = percentile(loaded.search_ms, 0.5);
    p99w = percentile(loaded.search_ms, 0.99);
    std::printf("%-22s %10.3f %10.3f %12.0f\n", "with one writer", p50w, p99w, loaded.queries / loaded.seconds);
    std::printf("search p99 with a writer / alone: %.2fx (goal <= 2x)\n", p99a > 0 ? p99w / p99a : 0.0);
  }
  if (o.window_us > 0) {
    int64_t merged = 0;
    check(ivf_index_info(idx, IVF_INFO_MERGED_SEARCHES, &merged), "info");
    std::printf("dynamic batching, window %lld us: %lld of %lld calls answered in merged batches\n",
                (long long)o.window_us, (long long)(merged - merged0),
                (long long)(alone.search_ms.size() + loaded.search_ms.size()));
  }
  if (o.writer) {
    std::printf("\n%-22s %8s %10s %10s %10s\n", "adds", "count", "p50 ms", "p99 ms", "max ms");
    std::printf("%-22s %8zu %10.2f %10.2f %10.2f\n", "idle index", idle_add.size(), percentile(idle_add, 0.5),
                percentile(idle_add, 0.99), percentile(idle_add, 1.0));
    auto row = [](const char* name, const std::vector<double>& v) {
      if (!v.empty())
        std::printf("%-22s %8zu %10.2f %10.2f %10.2f\n", name, v.size(), percentile(v, 0.5), percentile(v, 0.99),
                    percentile(v, 1.0));
    };
    row("under search load", loaded.add_ms);
    row("updates under load", loaded.update_ms);
    row("removes under load", loaded.remove_ms);
  }
  if (json != nullptr) {
    *json << "{\"n\":" << o.n << ",\"dim\":" << o.dim << ",\"nlist\":" << o.nlist << ",\"nprobe\":" << o.nprobe
          << ",\"batch\":" << o.batch << ",\"threads\":" << o.threads << ",\"window_us\":" << o.window_us
          << ",\"add_rows\":" << o.add_rows << ",\"search_p50_ms_alone\":" << p50a << ",\"search_p99_ms_alone\":" << p99a
          << ",\"qps_alone\":" << alone.queries / alone.seconds;
    if (o.writer)
      *json << ",\"search_p50_ms_writer\":" << p50w << ",\"search_p99_ms_writer\":" << p99w
            << ",\"qps_writer\":" << loaded.queries / loaded.seconds << ",\"adds_under_load\":" << loaded.add_ms.size()
            << ",\"add_p50_ms_load\":" << percentile(loaded.add_ms, 0.5)
            << ",\"add_p99_ms_load\":" << percentile(loaded.add_ms, 0.99)
            << ",\"add_p50_ms_idle\":" << percentile(idle_add, 0.5)
            << ",\"update_p50_ms_load\":" << percentile(loaded.update_ms, 0.5)
            << ",\"remove_p50_ms_load\":" << percentile(loaded.remove_ms, 0.5);
    *json << "}\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::printf("libivfgpu %s concurrency_bench: %lld x %lld, nlist %lld, k %lld, batch %lld, %lld searchers\n",
              ivf_version(), (long long)o.n, (long long)o.dim, (long long)o.nlist, (long long)o.k, (long long)o.batch,
              (long long)o.threads);
  const ivftools::Matrix base = ivftools::gaussian_mixture(o.n, o.dim, o.nlist, 1, 2);
  const ivftools::Matrix q = ivftools::gaussian_mixture(std::max<int64_t>(10000, o.batch), o.dim, o.nlist, 1, 3);
  const ivftools::Matrix extra = ivftools::gaussian_mixture(std::max<int64_t>(4 * o.add_rows, 100000), o.dim, o.nlist, 1, 4);
  ivf_params* p = nullptr;
  check(ivf_params_create(&p), "params");
  check(ivf_params_set_int(p, IVF_PARAM_NLIST, o.nlist), "nlist");
  check(ivf_params_set_int(p, IVF_PARAM_BACKEND, o.backend), "backend");
  // A window of 0 keeps a call alone, so one index with the option on measures every window.
  if (*std::max_element(o.windows.begin(), o.windows.end()) > 0)
    check(ivf_params_set_int(p, IVF_PARAM_DYNAMIC_BATCHING, 1), "dynamic batching");
  ivf_index* idx = nullptr;
  check(ivf_create(&idx, o.dim, p), "create");
  int64_t backend = 0;
  check(ivf_index_info(idx, IVF_INFO_BACKEND, &backend), "info");
  check(ivf_train(idx, base.data.data(), IVF_DTYPE_F32, o.n, o.dim), "train");
  check(ivf_add(idx, base.data.data(), IVF_DTYPE_F32, o.n, o.dim, nullptr), "add");
  std::printf("backend: %s\n", backend == IVF_BACKEND_CUDA ? "CUDA" : "CPU");

  // Adds on an idle index, for comparison.
  std::vector<double> idle_add;
  if (o.writer)
    for (int i = 0; i < 5; ++i) {
      const auto a0 = Clock::now();
      check(ivf_add(idx, extra.data.data() + i * o.add_rows * o.dim, IVF_DTYPE_F32, o.add_rows, o.dim, nullptr), "add");
      idle_add.push_back(ms_since(a0));
    }
  std::ofstream json;
  if (!o.json.empty()) json.open(o.json);
  for (const int64_t nprobe : o.nprobes)
    for (const int64_t window : o.windows) {
      o.nprobe = nprobe;
      o.window_us = window;
      measure(idx, o, q, extra, idle_add, o.json.empty() ? nullptr : &json);
    }
  int64_t graphs = 0;
  check(ivf_index_info(idx, IVF_INFO_GRAPH_SEARCHES, &graphs), "info");
  std::printf("\nsearches answered by a captured graph (latency path): %lld\n", (long long)graphs);
  ivf_free(idx);
  ivf_params_free(p);
  return 0;
}
