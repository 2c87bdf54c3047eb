// ivfgpu_bench: QPS, recall@k, latency, build time and device memory of libivfgpu through its
// public C API. Sweeps nprobe x k x batch size, prints a table and writes JSON and CSV
// (bench/plot.sh draws recall-QPS curves from the JSON). `ivfgpu_bench --help` lists the options;
// docs/performance.md says how to benchmark.
//
// Without --base the data is the synthetic mixture of docs/performance.md. Recall is measured
// against --groundtruth when given, else against an exhaustive search (nprobe = nlist) of the
// same index, which is exact.
//
// --device-budget BYTES builds the index with IVF_PARAM_DEVICE_BUDGET (lists in pinned host
// memory, the device caching the most-probed ones; README "Indexes larger than the GPU"), and
// --zipf S skews the synthetic queries so that the lists they land in are hot or cold (a Zipf law
// over the mixture's centres). After each timed configuration the bench reads the host tier's
// counters (IVF_INFO_RESIDENT_LISTS ... IVF_INFO_STREAMED_BYTES): the cache hits, misses and
// bytes streamed during that configuration's timed searches, and the streaming rate.
//
// --dtype f32|f16|bf16|u8|i8 stores the rows in that type (IVF_PARAM_STORAGE_TYPE); rows and
// queries are handed over in f32 and the library converts. u8 and i8 take integers only, so
// they imply --integer-data, which quantises the synthetic mixture with one affine map for every
// row and query: round(128 + 32 x) clamped to [0, 255] (i8: the same values minus 128, which
// changes no L2 distance). Give --integer-data to an f32 (or f16) run to measure the same data as
// a u8 run. --query-dtype storage passes the queries in the storage type instead of f32.
#include <ivfgpu/ivfgpu.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef IVFGPU_BENCH_DEVICE_MEMORY
#include <cuda_runtime.h>
#endif

#include "cli.hpp"
#include "datasets.hpp"
#include "measure.hpp"

namespace {

using ivftools::check;
using ivftools::Clock;
using ivftools::median;
using ivftools::percentile;
using ivftools::seconds_since;

// --dtype: the name on the command line and in the output, its ivf_dtype and element bytes.
struct DType {
  const char* name;
  ivf_dtype value;
  std::size_t bytes;
};
constexpr DType kDTypes[] = {{"f32", IVF_DTYPE_F32, 4},
                             {"f16", IVF_DTYPE_F16, 2},
                             {"bf16", IVF_DTYPE_BF16, 2},
                             {"u8", IVF_DTYPE_U8, 1},
                             {"i8", IVF_DTYPE_I8, 1}};
const DType& dtype_named(const std::string& name) {
  for (const DType& t : kDTypes)
    if (name == t.name) return t;
  return kDTypes[0];
}
bool is_integer(const DType& t) { return t.value == IVF_DTYPE_U8 || t.value == IVF_DTYPE_I8; }

// --integer-data: one affine map for every row and query, x -> round(128 + 32 x) clamped to
// [0, 255] (the mixture's coordinates have a standard deviation of about 1.06, so +-4 sigma
// fill the range); for i8 the same minus 128.
void quantise(std::vector<float>& v, bool signed_range) {
  for (float& x : v) {
    const float q = std::min(255.0f, std::max(0.0f, std::nearbyint(128.0f + 32.0f * x)));
    x = signed_range ? q - 128.0f : q;
  }
}

// f32 to binary16 / bfloat16, round to nearest, ties to even (the library's rounding).
uint16_t to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    float a;
    std::memcpy(&a, &ax, 4);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t h = ((((ax >> 23) & 0xffu) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
  const uint32_t rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Queries in the storage type (--query-dtype storage). Integer types need integers in range:
// otherwise the name of the first value that is not is returned in `bad`.
std::vector<unsigned char> encode_queries(const std::vector<float>& q, int64_t dim, const DType& t, std::string& bad) {
  std::vector<unsigned char> out(q.size() * t.bytes);
  const float lo = t.value == IVF_DTYPE_I8 ? -128.0f : 0.0f, hi = t.value == IVF_DTYPE_I8 ? 127.0f : 255.0f;
  for (std::size_t i = 0; i < q.size(); ++i) {
    uint16_t h = 0;
    switch (t.value) {
      case IVF_DTYPE_F16: h = to_f16(q[i]); std::memcpy(&out[2 * i], &h, 2); break;
      case IVF_DTYPE_BF16: h = to_bf16(q[i]); std::memcpy(&out[2 * i], &h, 2); break;
      case IVF_DTYPE_U8:
      case IVF_DTYPE_I8:
        if (!(q[i] >= lo && q[i] <= hi && q[i] == std::nearbyint(q[i]))) {
          bad = std::to_string(q[i]) + " (query " + std::to_string(static_cast<int64_t>(i) / dim) + ")";
          return {};
        }
        out[i] = static_cast<unsigned char>(static_cast<int>(q[i]) & 0xff);
        break;
      default: std::memcpy(&out[4 * i], &q[i], 4); break;
    }
  }
  return out;
}

// The host tier's counters (IVF_INFO_*); all 0 for an index without a device budget. And the
// time split searches of several parts spent merging (0 for one part).
struct Tier {
  int64_t resident_lists = 0, resident_bytes = 0, host_tier_bytes = 0, cache_hits = 0, cache_misses = 0,
          streamed_bytes = 0, merge_ns = 0;
};

Tier read_tier(const ivf_index* idx) {
  Tier t;
  check(ivf_index_info(idx, IVF_INFO_RESIDENT_LISTS, &t.resident_lists), "info");
  check(ivf_index_info(idx, IVF_INFO_RESIDENT_BYTES, &t.resident_bytes), "info");
  check(ivf_index_info(idx, IVF_INFO_HOST_TIER_BYTES, &t.host_tier_bytes), "info");
  check(ivf_index_info(idx, IVF_INFO_CACHE_HITS, &t.cache_hits), "info");
  check(ivf_index_info(idx, IVF_INFO_CACHE_MISSES, &t.cache_misses), "info");
  check(ivf_index_info(idx, IVF_INFO_STREAMED_BYTES, &t.streamed_bytes), "info");
  check(ivf_index_info(idx, IVF_INFO_MERGE_NANOSECONDS, &t.merge_ns), "info");
  return t;
}

struct Row {
  int64_t nprobe, k, batch;
  double qps, recall, p50_ms, p99_ms, mean_ms;
  // The host tier after the configuration's timed searches, and what those searches did: cache
  // hits and misses, their hit rate (-1 when none were counted), bytes streamed host-to-device
  // and the rate over the timed seconds.
  Tier tier;
  int64_t hits = 0, misses = 0, streamed = 0;
  double hit_rate = -1, stream_gbps = 0, search_s = 0;
  // Several parts: seconds of the timed searches spent merging, and their share.
  double merge_s = 0, merge_share = 0;
};

// Every option, in one place: add a field here and its line in add_options.
struct Options {
  int64_t n = 1000000, dim = 128, nlist = 1024, nq = 10000, reps = 3, seed = 1, max_base = 0;
  int64_t device_budget = 0;
  int64_t add_batch = 0;           // --add-batch: rows per ivf_add (0: all in one call)
  int64_t shards = 1;              // --devices: parts of the index (IVF_PARAM_SHARDS)
  std::string shard_mode = "split";
  double zipf = 0;
  std::string add_order = "random";  // --add-order
  ivftools::DataFiles files;
  std::string json_path, csv_path, backend = "auto";
  std::string dtype = "f32", query_dtype = "f32";  // --dtype, --query-dtype
  bool integer_data = false;                       // --integer-data (implied by --dtype u8 / i8)
  bool no_recall = false;
  std::string memory = "host";  // --memory: where queries and results live
  std::vector<int64_t> nprobes = {1, 4, 16, 64, 256}, ks = {10, 100}, batches = {1, 100, 10000};
};

void add_options(CLI::App& app, Options& o) {
  ivftools::add_count_option(app, "--n", o.n, "synthetic data: base vectors")->capture_default_str();
  ivftools::add_count_option(app, "--dim", o.dim, "synthetic data: dimensions")->capture_default_str();
  ivftools::add_nlist_option(app, o.nlist);
  ivftools::add_nq_option(app, o.nq, "queries (the first N of --query)")->capture_default_str();
  ivftools::add_data_options(app, o.files);
  ivftools::add_count_option(app, "--max-base", o.max_base, "read at most N rows of --base");
  ivftools::add_count_list_option(app, "--nprobe", o.nprobes, "lists probed per query");
  ivftools::add_count_list_option(app, "--k", o.ks, "neighbours per query");
  ivftools::add_count_list_option(app, "--batch", o.batches, "queries per ivf_search call");
  ivftools::add_count_option(app, "--reps", o.reps, "timed repetitions (the median counts)")->capture_default_str();
  ivftools::add_backend_option(app, o.backend);
  app.add_option("--json", o.json_path, "write the run as JSON (bench/plot.sh draws it)")->type_name("FILE");
  app.add_option("--csv", o.csv_path, "write the result rows as CSV")->type_name("FILE");
  app.add_option("--seed", o.seed, "synthetic data: seed")->type_name("N")->capture_default_str();
  app.add_flag("--no-recall", o.no_recall, "skip the ground truth (recall is reported as -1)");
  app.add_option("--memory", o.memory,
                 "where queries and results live: host (pageable memory, as most callers have them), pinned "
                 "(host memory from ivf_host_alloc: the queries copied there once, results copied out after the "
                 "timed calls) or device (IVF_MEMORY_DEVICE: copied to the GPU once, results copied back after the "
                 "timed calls)")
      ->check(CLI::IsMember({"host", "pinned", "device"}))
      ->capture_default_str();
  app.add_option("--devices", o.shards,
                 "IVF_PARAM_SHARDS: build the index over this many parts (CUDA devices 0, 1, ... wrapping round "
                 "the usable ones; CPU parts with --backend cpu)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))
      ->capture_default_str();
  app.add_option("--shard-mode", o.shard_mode, "with --devices > 1: split (each part ~1/G of the rows) or replicate")
      ->check(CLI::IsMember({"split", "replicate"}))
      ->capture_default_str();
  app.add_option("--add-batch", o.add_batch,
                 "rows per ivf_add call (0: every row in one call); large indexes add in slices so that the "
                 "library's per-call temporaries stay small")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  ivftools::add_bytes_option(app, "--device-budget", o.device_budget,
                             "IVF_PARAM_DEVICE_BUDGET: device memory the index may hold, e.g. 8G, 512M (K, M, G, T: "
                             "powers of 1024); the lists live in pinned host memory and the device caches the "
                             "most-probed ones; each result row then also prints the cache hits, misses, hit rate "
                             "and bytes streamed of its timed searches (CUDA; the CPU backend has nothing to limit). "
                             "0: unlimited")
      ->capture_default_str();
  app.add_option("--dtype", o.dtype,
                 "IVF_PARAM_STORAGE_TYPE: the element type the index stores its rows in (f32, f16, bf16, u8, i8); "
                 "rows are handed over in f32 and converted by the library (f16 and bf16 round to nearest even; u8 "
                 "and i8 take integers in range only). u8 and i8 imply --integer-data for the synthetic data; "
                 "--base data is used as it is (a .bvecs file fits u8)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "u8", "i8"}))
      ->type_name("f32|f16|bf16|u8|i8")
      ->capture_default_str();
  app.add_option("--query-dtype", o.query_dtype,
                 "f32: queries are passed in f32 (the distance to each decoded stored row is computed in fp32); "
                 "storage: in the --dtype type (f16 / bf16 rounded to nearest even; u8 / i8 queries against "
                 "integer rows give exact integer distances)")
      ->check(CLI::IsMember({"f32", "storage"}))
      ->type_name("f32|storage")
      ->capture_default_str();
  app.add_flag("--integer-data", o.integer_data,
               "synthetic data: quantise the mixture to integers with one affine map for every row and query, "
               "round(128 + 32 x) clamped to [0, 255] (for --dtype i8 the same minus 128: no L2 distance changes), "
               "so that an f32 or f16 run measures the same data as a u8 run. Implied by --dtype u8 and i8");
  app.add_option("--zipf", o.zipf,
                 "synthetic queries only: S > 0 draws each query's mixture centre with probability "
                 "proportional to rank^-S (Zipf) over the 4 x nlist centres instead of uniformly, so that a few "
                 "lists are hot (k-means gathers about four centres to a list, so the lists' load is the sum of "
                 "their centres'); the base vectors stay uniform; the run prints the share of the hottest centres. "
                 "0: off")
      ->type_name("S")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            char* end = nullptr;
            const double v = std::strtod(value.c_str(), &end);
            if (value.empty() || *end != '\0' || !(v >= 0 && v < 1e6)) return "must be a number >= 0, not " + value;
            return {};
          },
          ""))
      ->capture_default_str();
  app.add_option("--add-order", o.add_order,
                 "synthetic data: the order rows are generated in (random), or sorted by their first coordinate "
                 "(an insertion order that drifts, as a stream of topics or of time does: each list's early rows "
                 "are then unlike its later ones)")
      ->check(CLI::IsMember({"random", "sorted"}))
      ->capture_default_str();
}

// The rows of m in ascending order of their first coordinate (ties as they were).
void sort_rows_by_first_coordinate(ivftools::Matrix& m) {
  std::vector<int64_t> order(static_cast<std::size_t>(m.n));
  for (int64_t i = 0; i < m.n; ++i) order[static_cast<std::size_t>(i)] = i;
  const auto first = [&](int64_t r) { return m.data[static_cast<std::size_t>(r * m.dim)]; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return first(a) < first(b); });
  std::vector<float> sorted(m.data.size());
  for (int64_t i = 0; i < m.n; ++i)
    std::copy_n(m.data.begin() + order[static_cast<std::size_t>(i)] * m.dim, m.dim,
                sorted.begin() + i * m.dim);
  m.data.swap(sorted);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Benchmark of libivfgpu through its public C API: QPS, recall@k, latency, build time and memory "
               "over nprobe x k x batch size, on the synthetic mixture of docs/performance.md or on "
               ".fvecs/.bvecs/IDX files.",
               "ivfgpu_bench"};
  Options opt;
  add_options(app, opt);
  opt.files.query_opt->needs(opt.files.base_opt);
  ivftools::parse_or_exit(app, argc, argv);
  const int64_t backend_value = ivftools::resolve_backend(app, opt.backend);
  int64_t n = opt.n, dim = opt.dim, nq = opt.nq;
  const int64_t nlist = opt.nlist, reps = opt.reps, seed = opt.seed, max_base = opt.max_base;
  const std::string &base_path = opt.files.base, &query_path = opt.files.query, &gt_path = opt.files.groundtruth;
  const bool recall = !opt.no_recall;
  const std::vector<int64_t>&nprobes = opt.nprobes, &ks = opt.ks, &batches = opt.batches;
  const int64_t kmax = *std::max_element(ks.begin(), ks.end());
  // Check the files against each other before any work.
  if (!base_path.empty()) {
    try {
      const ivftools::Shape bs = ivftools::peek_vectors(base_path);
      const ivftools::Shape qs = ivftools::peek_vectors(query_path.empty() ? base_path : query_path);
      if (qs.dim != bs.dim)
        ivftools::usage_error(app, "--query: the queries have " + std::to_string(qs.dim) +
                                       " dimensions, the base vectors " + std::to_string(bs.dim));
      if (!gt_path.empty()) {
        const ivftools::Shape gs = ivftools::peek_ids(gt_path);
        if (gs.n < std::min(nq, qs.n))
          ivftools::usage_error(app, "--groundtruth: " + std::to_string(gs.n) + " rows for " +
                                         std::to_string(std::min(nq, qs.n)) + " queries (--nq)");
        if (gs.dim < kmax)
          ivftools::usage_error(app, "--k " + std::to_string(kmax) + ": --groundtruth holds only " +
                                         std::to_string(gs.dim) + " neighbours per query");
      }
    } catch (const std::exception& e) {
      ivftools::usage_error(app, e.what());
    }
  } else if (!gt_path.empty()) {
    ivftools::usage_error(app, "--groundtruth needs --base (the synthetic data has no ground truth file)");
  }
  if (opt.zipf > 0 && !base_path.empty())
    ivftools::usage_error(app, "--zipf skews the synthetic queries: it cannot be used with --base");
  if (opt.add_order != "random" && !base_path.empty())
    ivftools::usage_error(app, "--add-order orders the synthetic rows: --base data is added as it is");
  const DType& dtype = dtype_named(opt.dtype);
  const bool storage_queries = opt.query_dtype == "storage" && dtype.value != IVF_DTYPE_F32;
  const DType& qtype = storage_queries ? dtype : kDTypes[0];
  if (opt.integer_data && !base_path.empty())
    ivftools::usage_error(app, "--integer-data quantises the synthetic mixture: --base data is used as it is");
  const bool integer_data = base_path.empty() && (opt.integer_data || is_integer(dtype));

  auto t0 = Clock::now();
  ivftools::Matrix base, queries;
  std::string data_name;
  try {
    if (!base_path.empty()) {
      base = ivftools::load_any(base_path, max_base);
      queries = ivftools::load_any(query_path.empty() ? base_path : query_path, nq);
      data_name = base_path;
    } else {
      base = ivftools::gaussian_mixture(n, dim, nlist, static_cast<uint64_t>(seed), static_cast<uint64_t>(seed) + 1000);
      queries = ivftools::gaussian_mixture(nq, dim, nlist, static_cast<uint64_t>(seed), static_cast<uint64_t>(seed) + 2000,
                                           opt.zipf);
      data_name = "synthetic mixture";
      if (opt.add_order == "sorted") {
        sort_rows_by_first_coordinate(base);
        data_name = "synthetic mixture, rows sorted by their first coordinate";
      }
      if (integer_data) {
        quantise(base.data, dtype.value == IVF_DTYPE_I8);
        quantise(queries.data, dtype.value == IVF_DTYPE_I8);
        data_name = dtype.value == IVF_DTYPE_I8 ? "synthetic mixture as integers -128..127"
                                                : "synthetic mixture as integers 0..255";
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ivfgpu_bench: %s\n", e.what());
    return 1;
  }
  n = base.n;
  dim = base.dim;
  nq = queries.n;
  std::printf("data: %s, %lld x %lld, %lld queries (%.1f s)\n", data_name.c_str(), (long long)n, (long long)dim,
              (long long)nq, seconds_since(t0));
  if (opt.zipf > 0) {
    const int64_t hot = std::max<int64_t>(1, 4 * nlist / 100);
    std::printf("queries: Zipf(s = %g) over the %lld mixture centres: the hottest %lld (1%%) draw %.1f%% of them, "
                "the hottest %lld (10%%) %.1f%%\n",
                opt.zipf, (long long)(4 * nlist), (long long)hot, 100 * ivftools::zipf_share(nlist, opt.zipf, hot),
                (long long)std::max<int64_t>(1, 4 * nlist / 10),
                100 * ivftools::zipf_share(nlist, opt.zipf, std::max<int64_t>(1, 4 * nlist / 10)));
  }

  ivf_params* bp = nullptr;
  check(ivf_params_create(&bp), "ivf_params_create");
  check(ivf_params_set_int(bp, IVF_PARAM_NLIST, nlist), "nlist");
  check(ivf_params_set_int(bp, IVF_PARAM_BACKEND, backend_value), "backend");
  if (opt.device_budget > 0) check(ivf_params_set_int(bp, IVF_PARAM_DEVICE_BUDGET, opt.device_budget), "device budget");
  check(ivf_params_set_int(bp, IVF_PARAM_STORAGE_TYPE, dtype.value), "--dtype");
  if (opt.shards > 1) {
    check(ivf_params_set_int(bp, IVF_PARAM_SHARDS, opt.shards), "devices");
    check(ivf_params_set_int(bp, IVF_PARAM_SHARD_MODE, opt.shard_mode == "replicate" ? IVF_SHARD_REPLICATE : IVF_SHARD_SPLIT),
          "shard mode");
  }
  ivf_index* idx = nullptr;
  check(ivf_create(&idx, dim, bp), "ivf_create");
  int64_t used_backend = 0;
  check(ivf_index_info(idx, IVF_INFO_BACKEND, &used_backend), "info");
  t0 = Clock::now();
  check(ivf_train(idx, base.data.data(), IVF_DTYPE_F32, n, dim), "ivf_train");
  const double train_s = seconds_since(t0);
  t0 = Clock::now();
  const int64_t add_step = opt.add_batch > 0 ? opt.add_batch : std::max<int64_t>(n, 1);
  for (int64_t r0 = 0; r0 < n; r0 += add_step)
    check(ivf_add(idx, base.data.data() + r0 * dim, IVF_DTYPE_F32, std::min(add_step, n - r0), dim, nullptr),
          "ivf_add");
  const double add_s = seconds_since(t0);
  int64_t dev_bytes = 0, host_bytes = 0, list_bytes = 0, storage = 0;
  check(ivf_index_info(idx, IVF_INFO_DEVICE_MEMORY_BYTES, &dev_bytes), "info");
  check(ivf_index_info(idx, IVF_INFO_HOST_MEMORY_BYTES, &host_bytes), "info");
  check(ivf_index_info(idx, IVF_INFO_RESIDENT_BYTES, &list_bytes), "info");
  check(ivf_index_info(idx, IVF_INFO_STORAGE_TYPE, &storage), "info");
  if (storage != dtype.value) {
    std::fprintf(stderr, "ivfgpu_bench: the index stores type %lld, not --dtype %s\n", (long long)storage, dtype.name);
    return 1;
  }
  std::printf("backend %s, dtype %s (queries %s), train %.3f s, add %.3f s, device memory %.1f MiB (lists %.1f MiB), "
              "host memory %.1f MiB\n",
              used_backend == IVF_BACKEND_CUDA ? "cuda" : "cpu", dtype.name, qtype.name, train_s, add_s,
              dev_bytes / 1048576.0, list_bytes / 1048576.0, host_bytes / 1048576.0);
  // Several parts: where each lives and what it holds, and how results cross between devices.
  std::vector<int64_t> part_devices, part_bytes;
  int64_t peer_merge = 0;
  if (opt.shards > 1) {
    for (int64_t p = 0; p < opt.shards; ++p) {
      int64_t d = -1, b = 0;
      check(ivf_index_info(idx, IVF_INFO_PART_DEVICE(p), &d), "info");
      check(ivf_index_info(idx, IVF_INFO_PART_DEVICE_MEMORY_BYTES(p), &b), "info");
      part_devices.push_back(d);
      part_bytes.push_back(b);
      std::printf("part %lld: device %lld, %.1f MiB\n", (long long)p, (long long)d, b / 1048576.0);
    }
    check(ivf_index_info(idx, IVF_INFO_PEER_MERGE, &peer_merge), "info");
    std::printf("results cross devices by %s\n", peer_merge ? "peer copies" : "host memory (or stay on one device)");
  }
  int64_t budget = 0;
  check(ivf_index_info(idx, IVF_INFO_DEVICE_BUDGET, &budget), "info");
  const bool show_tier = opt.device_budget > 0 || budget > 0;
  if (show_tier) {
    const Tier t = read_tier(idx);
    std::printf("device budget %lld bytes = %.1f MiB (the index reports %lld%s): %lld lists resident (%.1f MiB), "
                "host tier %.1f MiB\n",
                (long long)opt.device_budget, opt.device_budget / 1048576.0, (long long)budget,
                used_backend == IVF_BACKEND_CUDA ? "" : "; the CPU backend has nothing to limit",
                (long long)t.resident_lists, t.resident_bytes / 1048576.0, t.host_tier_bytes / 1048576.0);
  }

  // The queries as ivf_search takes them: f32, or (--query-dtype storage) the storage type.
  std::vector<unsigned char> typed_queries;
  if (storage_queries) {
    std::string bad;
    typed_queries = encode_queries(queries.data, dim, dtype, bad);
    if (!bad.empty()) {
      std::fprintf(stderr, "ivfgpu_bench: --query-dtype storage: %s queries need integers in range, found %s\n",
                   dtype.name, bad.c_str());
      return 1;
    }
  }
  const unsigned char* qbytes =
      storage_queries ? typed_queries.data() : reinterpret_cast<const unsigned char*>(queries.data.data());
  ivf_params* sp = nullptr;
  check(ivf_params_create(&sp), "ivf_params_create");
  // --memory device: the queries are copied to the device once; each call writes its results
  // to device memory (at the same offsets as in the host arrays), and flush() copies the
  // results of the calls since the last flush to the host arrays outside the timed region.
  // --memory pinned: the same, in page-locked host memory (ivf_host_alloc) and IVF_MEMORY_HOST.
  const bool device_memory = opt.memory == "device", pinned_memory = opt.memory == "pinned";
  struct Pending {
    int64_t* ids;
    float* dists;
    int64_t first, count;
  };
  std::vector<Pending> pending;
  unsigned char* d_queries = nullptr;
  int64_t* d_ids = nullptr;
  float* d_dists = nullptr;
  if (device_memory) {
#ifdef IVFGPU_BENCH_DEVICE_MEMORY
    const std::size_t qb = static_cast<std::size_t>(nq * dim) * qtype.bytes, rb = static_cast<std::size_t>(nq * kmax);
    if (cudaMalloc(&d_queries, qb) != cudaSuccess || cudaMalloc(&d_ids, rb * sizeof(int64_t)) != cudaSuccess ||
        cudaMalloc(&d_dists, rb * sizeof(float)) != cudaSuccess ||
        cudaMemcpy(d_queries, qbytes, qb, cudaMemcpyHostToDevice) != cudaSuccess) {
      std::fprintf(stderr, "ivfgpu_bench: --memory device: cannot place the queries on the device\n");
      return 1;
    }
    check(ivf_params_set_int(sp, IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE), "memory kind");
#else
    std::fprintf(stderr, "ivfgpu_bench: --memory device needs a build with CUDA\n");
    return 1;
#endif
  }
  unsigned char* p_queries = nullptr;
  int64_t* p_ids = nullptr;
  float* p_dists = nullptr;
  if (pinned_memory) {
    const std::size_t qb = static_cast<std::size_t>(nq * dim) * qtype.bytes, rb = static_cast<std::size_t>(nq * kmax);
    void *pq = nullptr, *pi = nullptr, *pd = nullptr;
    check(ivf_host_alloc(qb, &pq), "ivf_host_alloc (queries)");
    check(ivf_host_alloc(rb * sizeof(int64_t), &pi), "ivf_host_alloc (ids)");
    check(ivf_host_alloc(rb * sizeof(float), &pd), "ivf_host_alloc (distances)");
    p_queries = static_cast<unsigned char*>(pq);
    p_ids = static_cast<int64_t*>(pi);
    p_dists = static_cast<float*>(pd);
    std::memcpy(p_queries, qbytes, qb);
  }
  const auto flush = [&] {
    if (pinned_memory) {
      for (const Pending& p : pending) {
        std::memcpy(p.ids, p_ids + p.first, static_cast<std::size_t>(p.count) * sizeof(int64_t));
        std::memcpy(p.dists, p_dists + p.first, static_cast<std::size_t>(p.count) * sizeof(float));
      }
      pending.clear();
      return;
    }
#ifdef IVFGPU_BENCH_DEVICE_MEMORY
    for (const Pending& p : pending) {
      const std::size_t c = static_cast<std::size_t>(p.count);
      if (cudaMemcpy(p.ids, d_ids + p.first, c * sizeof(int64_t), cudaMemcpyDeviceToHost) != cudaSuccess ||
          cudaMemcpy(p.dists, d_dists + p.first, c * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
        std::fprintf(stderr, "ivfgpu_bench: cannot copy results back from the device\n");
        std::exit(1);
      }
    }
#endif
    pending.clear();
  };
  // Queries first .. first + rows - 1.
  auto run = [&](int64_t first, int64_t rows, int64_t k, int64_t nprobe, int64_t* ids, float* dists) {
    check(ivf_params_set_int(sp, IVF_PARAM_NPROBE, nprobe), "nprobe");
    const unsigned char* q = (device_memory ? d_queries : pinned_memory ? p_queries : qbytes) +
                             static_cast<std::size_t>(first * dim) * qtype.bytes;
    if (device_memory || pinned_memory) {
      int64_t* out_ids = (device_memory ? d_ids : p_ids) + first * k;
      float* out_dists = (device_memory ? d_dists : p_dists) + first * k;
      check(ivf_search(idx, sp, q, qtype.value, rows, dim, k, out_ids, out_dists), "ivf_search");
      if (pending.empty() || pending.back().ids != ids) pending.push_back(Pending{ids, dists, first * k, rows * k});
      return;
    }
    check(ivf_search(idx, sp, q, qtype.value, rows, dim, k, ids, dists), "ivf_search");
  };

  std::vector<int64_t> gt(static_cast<std::size_t>(nq * kmax));
  std::vector<float> gtd(gt.size());
  double exhaustive_s = 0;
  if (recall && !gt_path.empty()) {
    try {
      const ivftools::IdMatrix g = ivftools::load_ivecs(gt_path, nq);
      for (int64_t q = 0; q < nq; ++q)
        for (int64_t j = 0; j < kmax; ++j) gt[q * kmax + j] = g.data[q * g.dim + j];
    } catch (const std::exception& e) {
      std::fprintf(stderr, "--groundtruth: %s\n", e.what());
      return 1;
    }
    std::printf("ground truth: %s\n", gt_path.c_str());
  } else if (recall) {
    t0 = Clock::now();
    run(0, nq, kmax, nlist, gt.data(), gtd.data());
    flush();
    exhaustive_s = seconds_since(t0);
    std::printf("ground truth: exhaustive search (nprobe = nlist = %lld), k = %lld: %.3f s, %.0f QPS\n",
                (long long)nlist, (long long)kmax, exhaustive_s, nq / exhaustive_s);
  }

  std::vector<Row> rows;
  std::vector<int64_t> ids;
  std::vector<float> dists;
  for (int64_t k : ks) {
    for (int64_t nprobe : nprobes) {
      for (int64_t batch : batches) {
        const int64_t b = std::min(batch, nq);
        Row r{};
        r.nprobe = nprobe;
        r.k = k;
        r.batch = b;
        ids.assign(static_cast<std::size_t>(nq * k), -1);
        dists.assign(ids.size(), 0.0f);
        std::vector<double> lat;
        Tier before;  // the counters after the warm-up, before the timed searches
        if (b >= nq) {
          run(0, nq, k, nprobe, ids.data(), dists.data());  // warm-up
          before = read_tier(idx);
          std::vector<double> times;
          for (int64_t rep = 0; rep < reps; ++rep) {
            t0 = Clock::now();
            run(0, nq, k, nprobe, ids.data(), dists.data());
            times.push_back(seconds_since(t0));
            r.search_s += times.back();
          }
          r.qps = nq / median(times);
          lat = times;
        } else {
          // Calls of b queries over the first min(nq, 200 * b) queries; the middle rep counts.
          const int64_t calls = std::max<int64_t>(1, std::min<int64_t>(nq / b, b == 1 ? 200 : 50));
          run(0, b, k, nprobe, ids.data(), dists.data());  // warm-up
          before = read_tier(idx);
          std::vector<double> qps;
          for (int64_t rep = 0; rep < reps; ++rep) {
            std::vector<double> l;
            auto all = Clock::now();
            for (int64_t c = 0; c < calls; ++c) {
              t0 = Clock::now();
              run(c * b, b, k, nprobe, ids.data() + c * b * k, dists.data() + c * b * k);
              l.push_back(seconds_since(t0));
            }
            const double all_s = seconds_since(all);
            r.search_s += all_s;
            qps.push_back(calls * b / all_s);
            if (rep == 0 || l.size() > lat.size()) lat = l;
          }
          r.qps = median(qps);
        }
        flush();
        r.p50_ms = percentile(lat, 0.5) * 1e3;
        r.p99_ms = percentile(lat, 0.99) * 1e3;
        double sum = 0;
        for (double v : lat) sum += v;
        r.mean_ms = lat.empty() ? 0 : sum / lat.size() * 1e3;
        // Recall@k over the queries this configuration answered.
        const int64_t answered = b >= nq ? nq : std::min<int64_t>(nq, std::max<int64_t>(1, std::min<int64_t>(nq / b, b == 1 ? 200 : 50)) * b);
        int64_t hit = 0;
        for (int64_t q = 0; q < answered; ++q) {
          std::vector<int64_t> truth(gt.begin() + q * kmax, gt.begin() + q * kmax + k);
          std::sort(truth.begin(), truth.end());
          for (int64_t j = 0; j < k; ++j)
            if (std::binary_search(truth.begin(), truth.end(), ids[q * k + j])) ++hit;
        }
        r.recall = recall ? double(hit) / double(answered * k) : -1.0;
        r.tier = read_tier(idx);
        r.hits = r.tier.cache_hits - before.cache_hits;
        r.misses = r.tier.cache_misses - before.cache_misses;
        r.streamed = r.tier.streamed_bytes - before.streamed_bytes;
        r.hit_rate = r.hits + r.misses > 0 ? double(r.hits) / double(r.hits + r.misses) : -1.0;
        r.stream_gbps = r.search_s > 0 ? r.streamed / r.search_s / 1e9 : 0.0;
        r.merge_s = (r.tier.merge_ns - before.merge_ns) / 1e9;
        r.merge_share = r.search_s > 0 ? r.merge_s / r.search_s : 0.0;
        rows.push_back(r);
        std::printf("  k %4lld nprobe %4lld batch %5lld: %12.0f QPS  recall %.4f  p50 %.3f ms  p99 %.3f ms  mean %.3f ms\n",
                    (long long)k, (long long)nprobe, (long long)b, r.qps, r.recall, r.p50_ms, r.p99_ms, r.mean_ms);
        if (show_tier)
          std::printf("      tier: %lld lists resident (%.1f MiB), host tier %.1f MiB; timed searches: hits %lld, "
                      "misses %lld, hit rate %.3f, streamed %.1f MiB in %.3f s = %.2f GB/s\n",
                      (long long)r.tier.resident_lists, r.tier.resident_bytes / 1048576.0,
                      r.tier.host_tier_bytes / 1048576.0, (long long)r.hits, (long long)r.misses, r.hit_rate,
                      r.streamed / 1048576.0, r.search_s, r.stream_gbps);
        if (opt.shards > 1)
          std::printf("      merge: %.3f ms of %.3f s searched (%.2f%%)\n", r.merge_s * 1e3, r.search_s,
                      100.0 * r.merge_share);
        std::fflush(stdout);
      }
    }
  }

  // Summary table in the layout of docs/performance.md.
  std::printf("\n%lld x %lld, nlist %lld, %lld queries (%s), dtype %s, queries %s in %s memory, device memory %.1f MiB\n",
              (long long)n, (long long)dim, (long long)nlist, (long long)nq, data_name.c_str(), dtype.name, qtype.name,
              opt.memory.c_str(), dev_bytes / 1048576.0);
  std::printf("| nprobe | k | batch | QPS | recall | p50 ms | p99 ms |\n|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %lld | %lld | %lld | %.0f | %.4f | %.3f | %.3f |\n", (long long)r.nprobe, (long long)r.k,
                (long long)r.batch, r.qps, r.recall, r.p50_ms, r.p99_ms);
  if (show_tier) {
    std::printf("\nhost tier: device budget %.1f MiB, queries %s (s = %g)\n", opt.device_budget / 1048576.0,
                opt.zipf > 0 ? "Zipf" : "uniform", opt.zipf);
    std::printf("| nprobe | k | batch | hit rate | streamed MiB | GB/s | resident lists | resident MiB |\n"
                "|---|---|---|---|---|---|---|---|\n");
    for (const Row& r : rows)
      std::printf("| %lld | %lld | %lld | %.3f | %.1f | %.2f | %lld | %.1f |\n", (long long)r.nprobe, (long long)r.k,
                  (long long)r.batch, r.hit_rate, r.streamed / 1048576.0, r.stream_gbps,
                  (long long)r.tier.resident_lists, r.tier.resident_bytes / 1048576.0);
  }

  const char* backend_name = used_backend == IVF_BACKEND_CUDA ? "cuda" : "cpu";
  if (!opt.json_path.empty()) {
    nlohmann::ordered_json j = {{"library", std::string("libivfgpu ") + ivf_version()},
                                {"data", data_name},
                                {"n", n},
                                {"dim", dim},
                                {"nlist", nlist},
                                {"nq", nq},
                                {"backend", backend_name},
                                {"dtype", dtype.name},
                                {"query_dtype", qtype.name},
                                {"memory", opt.memory},
                                {"integer_data", integer_data},
                                {"train_s", train_s},
                                {"add_s", add_s},
                                {"device_memory_bytes", dev_bytes},
                                {"host_memory_bytes", host_bytes},
                                {"list_bytes", list_bytes},
                                {"exhaustive_s", exhaustive_s},
                                {"groundtruth", gt_path.empty() ? "exhaustive search" : gt_path},
                                {"device_budget", opt.device_budget},
                                {"devices", opt.shards},
                                {"shard_mode", opt.shard_mode},
                                {"part_devices", part_devices},
                                {"part_device_memory_bytes", part_bytes},
                                {"peer_merge", peer_merge},
                                {"zipf", opt.zipf},
                                {"results", nlohmann::ordered_json::array()}};
    // Per row, after the timing fields: the host tier after the row's timed searches
    // (resident_lists, resident_bytes, host_tier_bytes) and what those searches did (cache_hits,
    // cache_misses, hit_rate: -1 when none were counted, streamed_bytes, search_s: their total
    // seconds, stream_gbps = streamed_bytes / search_s / 1e9). All 0 without a device budget.
    for (const Row& r : rows)
      j["results"].push_back({{"nprobe", r.nprobe},
                              {"k", r.k},
                              {"batch", r.batch},
                              {"qps", r.qps},
                              {"recall", r.recall},
                              {"p50_ms", r.p50_ms},
                              {"p99_ms", r.p99_ms},
                              {"mean_ms", r.mean_ms},
                              {"resident_lists", r.tier.resident_lists},
                              {"resident_bytes", r.tier.resident_bytes},
                              {"host_tier_bytes", r.tier.host_tier_bytes},
                              {"cache_hits", r.hits},
                              {"cache_misses", r.misses},
                              {"hit_rate", r.hit_rate},
                              {"streamed_bytes", r.streamed},
                              {"search_s", r.search_s},
                              {"stream_gbps", r.stream_gbps},
                              {"merge_s", r.merge_s},
                              {"merge_share", r.merge_share}});
    std::ofstream f(opt.json_path);
    f << j.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "--json: cannot write %s\n", opt.json_path.c_str());
      return 1;
    }
  }
  if (!opt.csv_path.empty()) {
    std::ofstream f(opt.csv_path);
    f << "library,data,backend,n,dim,nlist,nq,nprobe,k,batch,qps,recall,p50_ms,p99_ms,mean_ms,dtype,query_dtype\n";
    for (const Row& r : rows)
      f << "libivfgpu " << ivf_version() << ",\"" << data_name << "\"," << backend_name << ',' << n << ',' << dim << ','
        << nlist << ',' << nq << ',' << r.nprobe << ',' << r.k << ',' << r.batch << ',' << r.qps << ',' << r.recall
        << ',' << r.p50_ms << ',' << r.p99_ms << ',' << r.mean_ms << ',' << dtype.name << ',' << qtype.name << "\n";
    if (!f) {
      std::fprintf(stderr, "--csv: cannot write %s\n", opt.csv_path.c_str());
      return 1;
    }
  }
  ivf_params_free(sp);
  (void)ivf_host_free(p_queries);
  (void)ivf_host_free(p_ids);
  (void)ivf_host_free(p_dists);
  ivf_params_free(bp);
#ifdef IVFGPU_BENCH_DEVICE_MEMORY
  cudaFree(d_queries);
  cudaFree(d_ids);
  cudaFree(d_dists);
#endif
  ivf_free(idx);
  return 0;
}
