#include "index_file.hpp"

#include <cstring>

#include "../errors.hpp"
#include "atomic_file.hpp"
#include "byte_source.hpp"
#include "checked.hpp"
#include "faiss_format.hpp"
#include "native_format.hpp"

namespace ivfgpu::io {

namespace {

IndexImage read_detected(ByteSource& in) {
  if (in.size() < 4)
    fail(Errc::CorruptData, "truncated: " + std::to_string(in.size()) + " bytes cannot hold an index file");
  unsigned char head[4];
  in.peek_front(head, sizeof head);
  if (std::memcmp(head, native::kMagic, 4) == 0) return read_native(in);  // all 8 bytes checked there
  if (looks_like_faiss(head)) return read_faiss(in);                      // IwFl, or Unsupported naming it
  fail(Errc::CorruptData, "unknown magic: neither a libivfgpu index file nor a FAISS index");
}

}  // namespace

BuildParams load_params(const IndexImage& image, const BuildParams& caller) {
  BuildParams p = image.params;
  p.backend = caller.backend;
  p.device = caller.device;
  p.num_threads = caller.num_threads;
  p.device_budget = caller.device_budget;  // a property of the machine, not of the file
  p.dynamic_batching = caller.dynamic_batching;  // and of the service
  p.shards = caller.shards;  // the same file opens on any number of parts
  p.shard_mode = caller.shard_mode;
  p.shard_devices = caller.shard_devices;
  if (caller.storage != 0) p.storage = caller.storage;  // convert_storage() makes the model match
  return p;
}

IndexImage read_index(const void* data, std::size_t size) {
  MemorySource in(data, size);
  return read_detected(in);
}

IndexImage load_index_file(const std::string& path) {
  FileSource in(path);
  return read_detected(in);
}

void save_native_file(const std::string& path, const HostModel& model, const BuildParams& params) {
  write_file_atomic(path, [&](ByteSink& out) { write_native(model, params, out); });
}

void save_faiss_file(const std::string& path, const HostModel& model, const BuildParams& params) {
  if (model.type != ElementType::F32)  // refuse before a temporary file exists
    fail(Errc::Unsupported, std::string("FAISS IndexIVFFlat stores f32 vectors; this index stores ") +
                                element_name(model.type) + ": save it with ivf_save");
  if (model.metric == Metric::Cosine)  // refuse before a temporary file exists
    fail(Errc::Unsupported, "FAISS has no cosine IndexIVFFlat: only L2 and inner-product indexes can be written as FAISS files");
  write_file_atomic(path, [&](ByteSink& out) { write_faiss(model, params, out); });
}

std::size_t serialize_native(const HostModel& model, const BuildParams& params, void* buffer, std::size_t capacity) {
  const std::size_t need = to_size(native_size(model.dim, model.nlist, model.ntotal(), model.trained, element_size(model.type)), "index image");
  if (capacity < need)
    fail(Errc::BufferTooSmall, "serialize: the buffer holds " + std::to_string(capacity) + " bytes, the index needs " +
                                   std::to_string(need));
  MemorySink out(buffer, capacity);
  write_native(model, params, out);
  if (out.written() != need) fail(Errc::Internal, "serialize: wrote " + std::to_string(out.written()) + " bytes, computed " + std::to_string(need));
  return need;
}

}  // namespace ivfgpu::io
