// Writes the seed corpus of the fuzz targets: tiny indexes of every structural kind, in the
// native format (corpus/native) and as FAISS IndexIVFFlat files (corpus/faiss). Generated,
// never copied from real data: `ivfgpu_make_seeds <fuzz/corpus>` reproduces the committed files.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/index.hpp"
#include "core/io/byte_sink.hpp"
#include "core/io/faiss_format.hpp"
#include "core/io/native_format.hpp"

using namespace ivfgpu;

namespace {

std::vector<float> grid_data(int64_t n, int64_t dim, uint32_t seed) {
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  uint32_t s = seed;
  for (float& v : x) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>((s >> 24) % 16) - 7.5f;  // small, exactly representable values
  }
  return x;
}

struct Spec {
  const char* name;
  int64_t dim, nlist, n;
  Metric metric;
  bool train;
  int64_t id_base;  // -1: sequential ids
};

void write_file(const std::string& path, const std::function<void(io::ByteSink&)>& produce) {
  io::CountingSink count;
  produce(count);
  std::vector<unsigned char> bytes(count.written());
  io::MemorySink sink(bytes.data(), bytes.size());
  produce(sink);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  std::printf("%s: %zu bytes\n", path.c_str(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir holding native/ and faiss/>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const Spec specs[] = {
      {"l2_d4_nlist4", 4, 4, 24, Metric::L2, true, -1},
      {"ip_d3_nlist8_sparse", 3, 8, 9, Metric::InnerProduct, true, 5000000000},
      {"cosine_d2_nlist2", 2, 2, 6, Metric::Cosine, true, 7},
      {"l2_d1_nlist1", 1, 1, 3, Metric::L2, true, -1},
      {"untrained_d2_nlist3", 2, 3, 0, Metric::L2, false, -1},
      {"empty_trained_d5_nlist2", 5, 2, 0, Metric::L2, true, -1},
  };
  for (const Spec& s : specs) {
    BuildParams p;
    p.backend = BackendKind::Cpu;
    p.nlist = s.nlist;
    p.metric = s.metric;
    p.kmeans_iters = 5;
    p.num_threads = 1;
    p.nprobe = 2;
    Index index(s.dim, p);
    if (s.train) {
      const std::vector<float> t = grid_data(std::max<int64_t>(s.nlist * 4, 8), s.dim, 11);
      index.train(t.data(), static_cast<int64_t>(t.size()) / s.dim);
    }
    if (s.n > 0) {
      const std::vector<float> x = grid_data(s.n, s.dim, 29);
      std::vector<int64_t> ids(static_cast<std::size_t>(s.n));
      for (int64_t i = 0; i < s.n; ++i) ids[i] = s.id_base < 0 ? i : s.id_base + 3 * i;
      index.add(x.data(), s.n, ids.data());
    }
    const HostModel m = index.snapshot();
    const BuildParams& bp = index.params();
    write_file(dir + "/native/" + s.name + ".ivf", [&](io::ByteSink& out) { io::write_native(m, bp, out); });
    if (s.metric != Metric::Cosine)
      write_file(dir + "/faiss/" + s.name + ".faiss", [&](io::ByteSink& out) { io::write_faiss(m, bp, out); });
  }
  return 0;
}
