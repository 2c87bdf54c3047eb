#include "cli.hpp"

#include <ivfgpu/ivfgpu.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

namespace ivftools {

namespace {

// Validators whose name stays out of the help (the type name already says it) and whose
// message names the value.
CLI::Validator existing_file() { return CLI::Validator(CLI::ExistingFile).description(""); }

CLI::Validator positive() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno != 0) return "not a whole number: " + value;
        if (v < 1) return "must be at least 1, not " + value;
        return {};
      },
      "");
}

}  // namespace

void add_data_options(CLI::App& app, DataFiles& files) {
  files.base_opt = app.add_option("--base", files.base, "base vectors: .fvecs, .bvecs or IDX images (.gz too)")
                       ->type_name("FILE")
                       ->check(existing_file());
  files.query_opt = app.add_option("--query", files.query, "query vectors, same kinds as --base")
                        ->type_name("FILE")
                        ->check(existing_file());
  files.groundtruth_opt =
      app.add_option("--groundtruth", files.groundtruth,
                     "exact neighbours of the queries, .ivecs (0-based rows of --base, at least k per query)")
          ->type_name("FILE")
          ->check(existing_file())
          ->needs(files.query_opt);
}

CLI::Option* add_count_option(CLI::App& app, const std::string& names, int64_t& value, const std::string& help) {
  return app.add_option(names, value, help)->type_name("N")->check(positive());
}

CLI::Option* add_nq_option(CLI::App& app, int64_t& nq, const std::string& help, const std::string& names) {
  return add_count_option(app, names, nq, help);
}

CLI::Option* add_nlist_option(CLI::App& app, int64_t& nlist) {
  return add_count_option(app, "--nlist", nlist, "number of inverted lists (k-means centroids)")->capture_default_str();
}

CLI::Option* add_count_list_option(CLI::App& app, const std::string& name, std::vector<int64_t>& values,
                                   const std::string& help) {
  return app.add_option(name, values, help)
      ->type_name("N,N,...")
      ->delimiter(',')
      ->check(positive())
      ->capture_default_str();
}

CLI::Option* add_backend_option(CLI::App& app, std::string& backend) {
  return app
      .add_option("--backend", backend,
                  "auto: the GPU when one is usable, else the CPU; cpu; cuda (or gpu): the GPU, an error without one")
      ->type_name("auto|cpu|cuda|gpu")
      ->check(CLI::Validator(CLI::IsMember({"auto", "cpu", "cuda", "gpu"})).description(""))
      ->capture_default_str();
}

int64_t parse_bytes(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    throw std::invalid_argument("not a byte count (" + why + "; e.g. 0, 4096, 512M, 8G): " + text);
  };
  std::size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  if (i == 0) bad("no number");
  char* end = nullptr;
  errno = 0;
  const std::string number = text.substr(0, i);
  const double value = std::strtod(number.c_str(), &end);
  if (*end != '\0' || errno != 0) bad("malformed number");
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 1;
  if (!unit.empty() && std::string("KMGT").find(unit[0]) != std::string::npos) {
    for (const char u : std::string("KMGT")) {
      scale *= 1024;
      if (u == unit[0]) break;
    }
    unit.erase(0, 1);
    if (unit == "IB" || unit == "B") unit.clear();
  } else if (unit == "B") {
    unit.clear();
  }
  if (!unit.empty()) bad("unknown unit");
  const double bytes = value * scale;
  if (!(bytes < 9.2e18)) bad("too large");
  return static_cast<int64_t>(bytes + 0.5);
}

CLI::Option* add_bytes_option(CLI::App& app, const std::string& name, int64_t& bytes, const std::string& help) {
  return app.add_option(name, bytes, help)
      ->type_name("BYTES")
      ->transform(CLI::Validator(
          [](std::string& value) -> std::string {
            try {
              value = std::to_string(parse_bytes(value));
            } catch (const std::invalid_argument& e) {
              return e.what();
            }
            return {};
          },
          ""));
}

void parse_or_exit(CLI::App& app, int argc, char** argv) {
  // The error, naming the option, then the usage line.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return a->get_name() + ": " + e.what() + "\nUsage: " + a->get_name() + " [OPTIONS]; run " + a->get_name() +
           " --help for the options.\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --help-all are "errors" with exit code 0: app.exit prints the help.
    const int code = app.exit(e, std::cout, std::cerr);
    std::exit(code == 0 ? 0 : 2);
  }
}

void usage_error(const CLI::App& app, const std::string& message) {
  std::fprintf(stderr, "%s: %s\nUsage: %s [OPTIONS]; run %s --help for the options.\n", app.get_name().c_str(),
               message.c_str(), app.get_name().c_str(), app.get_name().c_str());
  std::exit(2);
}

int64_t resolve_backend(const CLI::App& app, const std::string& backend) {
  if (backend == "cpu") return IVF_BACKEND_CPU;
  if (backend == "auto") return IVF_BACKEND_AUTO;
  int32_t devices = 0;
  const ivf_status s = ivf_cuda_device_count(&devices);
  if (s != IVF_OK)
    usage_error(app, "--backend " + backend + ": cannot query CUDA devices: " + ivf_status_string(s) + ": " +
                         ivf_last_error_message());
  if (devices == 0)
    usage_error(app, "--backend " + backend +
                         ": no usable CUDA device (no GPU or driver, or this libivfgpu was built without CUDA); "
                         "use --backend cpu, or auto to take the GPU only when there is one");
  return IVF_BACKEND_CUDA;
}

bool interactive() { return isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string what, int64_t total)
    : what_(std::move(what)), total_(total), start_(std::chrono::steady_clock::now()), enabled_(interactive()) {}

Progress::~Progress() {
  if (shown_) {
    update(total_);
    std::fprintf(stderr, "\n");
  }
}

void Progress::update(int64_t done) {
  if (!enabled_) return;
  // IVFGPU_PROGRESS_DELAY_MS (default 1000) lets the tests see the progress of short work.
  static const long delay_ms = [] {
    const char* env = std::getenv("IVFGPU_PROGRESS_DELAY_MS");
    return env ? std::strtol(env, nullptr, 10) : 1000L;
  }();
  if (!shown_ && std::chrono::steady_clock::now() - start_ < std::chrono::milliseconds(delay_ms)) return;
  shown_ = true;
  std::fprintf(stderr, "\r%s: %lld / %lld (%.1f s)", what_.c_str(), static_cast<long long>(done),
               static_cast<long long>(total_),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  std::fflush(stderr);
}

}  // namespace ivftools
