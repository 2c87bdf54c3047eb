// What the demo (examples/fashion_mnist) and the benchmark (bench/ivfgpu_bench) share on the
// command line: one spelling and one check for each common option, usage and errors (CLI11),
// the backend check, and progress on a terminal. Each program adds its own options on top.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ivftools {

// --base FILE, --query FILE, --groundtruth FILE: .fvecs / .bvecs vectors, .ivecs neighbour ids
// (IDX images too for --base / --query). Each must exist; --groundtruth needs --query.
struct DataFiles {
  std::string base, query, groundtruth;
  CLI::Option* base_opt = nullptr;
  CLI::Option* query_opt = nullptr;
  CLI::Option* groundtruth_opt = nullptr;
};
void add_data_options(CLI::App& app, DataFiles& files);

// A positive count: names is e.g. "--k" or "--nq,--queries" (a second spelling).
CLI::Option* add_count_option(CLI::App& app, const std::string& names, int64_t& value, const std::string& help);
// --nq N: how many queries.
CLI::Option* add_nq_option(CLI::App& app, int64_t& nq, const std::string& help, const std::string& names = "--nq");
// --nlist N, a positive count.
CLI::Option* add_nlist_option(CLI::App& app, int64_t& nlist);
// A comma-separated list of positive counts (--nprobe, --k, --batch).
CLI::Option* add_count_list_option(CLI::App& app, const std::string& name, std::vector<int64_t>& values,
                                   const std::string& help);
// --backend auto|cpu|cuda|gpu (gpu: another name for cuda).
CLI::Option* add_backend_option(CLI::App& app, std::string& backend);

// A byte count as written on a command line: a number (a fraction allowed) with an optional
// suffix K, M, G or T (powers of 1024, either case; "B" or "iB" may follow), or B / none for
// bytes: "0", "4096", "512M", "8G", "1.5GiB". Throws std::invalid_argument naming the text when
// it is malformed, negative or too large for int64.
int64_t parse_bytes(const std::string& text);
// --NAME BYTES: a byte count as parse_bytes reads it (0 allowed).
CLI::Option* add_bytes_option(CLI::App& app, const std::string& name, int64_t& bytes, const std::string& help);

// Parses the command line. --help prints the options to stdout and exits 0; an error (unknown
// option, missing or malformed value, failed check) prints the error and the usage to stderr
// and exits 2.
void parse_or_exit(CLI::App& app, int argc, char** argv);

// An error in the options found after parsing (files that do not fit together, a count the
// data cannot meet): "<program>: <message>" and a pointer to --help on stderr, exit 2. The
// message names the offending option.
[[noreturn]] void usage_error(const CLI::App& app, const std::string& message);

// IVF_BACKEND_* for --backend. For cuda (or gpu) it checks now that a CUDA device is usable and
// otherwise fails with usage_error rather than let the work run elsewhere.
int64_t resolve_backend(const CLI::App& app, const std::string& backend);

// True when stderr is a terminal: progress and status lines are shown only then.
bool interactive();

// "what: done / total" on stderr, rewritten in place; shown only on a terminal and only once
// the work has taken more than a second. The destructor ends the line.
class Progress {
 public:
  Progress(std::string what, int64_t total);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void update(int64_t done);

 private:
  std::string what_;
  int64_t total_;
  std::chrono::steady_clock::time_point start_;
  bool enabled_;
  bool shown_ = false;
};

}  // namespace ivftools
