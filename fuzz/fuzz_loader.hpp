// What both fuzz targets do with one input: parse it, and when the parser accepts it, prove
// the result usable (an index is built on the CPU backend and searched) and stable (written
// back and read again, it gives the same model). Rejection must be one of the documented
// errors; anything else -- a crash, a sanitizer report, another error code -- is a finding.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <vector>

#include "core/errors.hpp"
#include "core/index.hpp"
#include "core/io/byte_sink.hpp"
#include "core/io/byte_source.hpp"
#include "core/io/faiss_format.hpp"
#include "core/io/index_file.hpp"
#include "core/io/native_format.hpp"

namespace ivfgpu::fuzz {

[[noreturn]] inline void finding(const char* what) {
  std::fprintf(stderr, "fuzz finding: %s\n", what);
  std::abort();
}

inline bool same_model(const HostModel& a, const HostModel& b) {
  return a.dim == b.dim && a.metric == b.metric && a.nlist == b.nlist && a.trained == b.trained &&
         a.centroids == b.centroids && a.list_offsets == b.list_offsets && a.vectors == b.vectors && a.ids == b.ids;
}

inline void use_image(const io::IndexImage& image) {
  BuildParams p;
  p.backend = BackendKind::Cpu;
  p.num_threads = 1;
  Index index(image.model, io::load_params(image, p));
  if (index.is_trained()) {
    const int64_t k = 3;
    std::vector<float> query(static_cast<std::size_t>(index.dim()), 0.5f);
    std::vector<int64_t> ids(k);
    std::vector<float> dists(k);
    SearchRequest args;
    args.queries = MatrixView::host_f32(query.data(), 1, index.dim());
    args.k = k;
    args.ids = ids.data();
    args.dists = dists.data();
    index.search(args);
  }
  // Written back, in the native format and (metric permitting) as FAISS, it reads the same.
  io::CountingSink count;
  io::write_native(image.model, image.params, count);
  std::vector<unsigned char> bytes(count.written());
  io::MemorySink out(bytes.data(), bytes.size());
  io::write_native(image.model, image.params, out);
  if (!same_model(io::read_index(bytes.data(), bytes.size()).model, image.model)) finding("native round trip differs");
  if (image.model.metric != Metric::Cosine) {
    io::CountingSink fcount;
    io::write_faiss(image.model, image.params, fcount);
    std::vector<unsigned char> fbytes(fcount.written());
    io::MemorySink fout(fbytes.data(), fbytes.size());
    io::write_faiss(image.model, image.params, fout);
    io::MemorySource in(fbytes.data(), fbytes.size());
    if (!same_model(io::read_faiss(in).model, image.model)) finding("FAISS round trip differs");
  }
}

template <class Parse>
int run_one(const uint8_t* data, std::size_t size, Parse parse) {
  try {
    use_image(parse(data, size));
  } catch (const Error& e) {
    switch (e.code()) {
      case Errc::CorruptData:
      case Errc::VersionMismatch:
      case Errc::Unsupported:
        break;
      default:
        std::fprintf(stderr, "unexpected error: %s\n", e.what());
        finding("a loader failed with an undocumented error code");
    }
  } catch (const std::bad_alloc&) {
    finding("out of memory on a small input: a length was trusted before it was checked");
  }
  return 0;
}

}  // namespace ivfgpu::fuzz
