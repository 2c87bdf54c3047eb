// Persistence entry points (docs/file-format.md). A save exports one published state (never
// a mix of two) and writes it; mutations may publish newer states meanwhile. Loads build a
// complete new handle before anything reaches *out.
#include <memory>
#include <string>
#include <utility>

#include "../../core/element_convert.hpp"
#include "../../core/io/index_file.hpp"
#include "../../core/io/native_format.hpp"
#include "guard.hpp"
#include "handles.hpp"

using namespace ivfgpu;
using namespace ivfgpu::capi;

namespace {

const Index& impl_of(const ivf_index* index, const char* what) {
  if (index == nullptr || !index->impl) invalid(std::string(what) + ": index is NULL");
  return *index->impl;
}

struct Snapshot {
  HostModel model;
  BuildParams params;
};

Snapshot snapshot_of(const ivf_index* index) { return Snapshot{index->impl->snapshot(), index->impl->params()}; }

// A validated image becomes a handle: the backend (and device) are the caller's choice.
std::unique_ptr<ivf_index> handle_from(io::IndexImage image, const ivf_params* params) {
  auto handle = std::make_unique<ivf_index>();
  const BuildParams build = io::load_params(image, build_params_of(params));
  // A caller's storage type converts the file's rows (an f32 index opened as uint8, say).
  convert_model(image.model, static_cast<ElementType>(build.storage));
  handle->impl = std::make_unique<Index>(std::move(image.model), build);
  return handle;
}

}  // namespace

extern "C" {

IVF_API ivf_status ivf_save(const ivf_index* index, const char* path) {
  return guarded([&] {
    impl_of(index, "ivf_save");
    if (path == nullptr || *path == '\0') invalid("ivf_save: path is NULL or empty");
    const Snapshot s = snapshot_of(index);
    io::save_native_file(path, s.model, s.params);
  });
}

IVF_API ivf_status ivf_save_faiss(const ivf_index* index, const char* path) {
  return guarded([&] {
    const Index& idx = impl_of(index, "ivf_save_faiss");
    if (path == nullptr || *path == '\0') invalid("ivf_save_faiss: path is NULL or empty");
    if (idx.params().metric == Metric::Cosine)
      fail(Errc::Unsupported, "ivf_save_faiss: FAISS has no cosine IndexIVFFlat (only L2 and inner product)");
    const Snapshot s = snapshot_of(index);
    io::save_faiss_file(path, s.model, s.params);
  });
}

IVF_API ivf_status ivf_load(const char* path, const ivf_params* params, ivf_index** out) {
  return guarded([&] {
    if (path == nullptr || *path == '\0') invalid("ivf_load: path is NULL or empty");
    if (out == nullptr) invalid("ivf_load: out is NULL");
    const progress::Scope progress = progress_of(params, progress::Stage::Load);
    auto handle = handle_from(io::load_index_file(path), params);
    progress::finish();  // may cancel: the handle is then freed, none returned
    *out = handle.release();
  });
}

IVF_API ivf_status ivf_serialize(const ivf_index* index, void* buffer, size_t capacity, size_t* size) {
  // Set before the guard can report BufferTooSmall, which documents *size as the bytes needed.
  size_t needed = 0;
  const ivf_status status = guarded([&] {
    const Index& idx = impl_of(index, "ivf_serialize");
    if (size == nullptr) invalid("ivf_serialize: size is NULL");
    // The size and the bytes come from the same published state.
    const StatePtr state = idx.state();
    needed = static_cast<size_t>(io::native_size(idx.dim(), idx.params().nlist, state->ntotal(), state->trained(),
                                                   element_size(idx.storage())));
    if (buffer == nullptr) return;
    if (capacity < needed)
      fail(Errc::BufferTooSmall, "ivf_serialize: the buffer holds " + std::to_string(capacity) +
                                     " bytes, the index needs " + std::to_string(needed));
    const HostModel model = idx.export_model(*state);
    io::serialize_native(model, idx.params(), buffer, capacity);
  });
  if (status == IVF_OK || status == IVF_ERR_BUFFER_TOO_SMALL) *size = needed;
  return status;
}

IVF_API ivf_status ivf_deserialize(const void* buffer, size_t size, const ivf_params* params, ivf_index** out) {
  return guarded([&] {
    if (buffer == nullptr) invalid("ivf_deserialize: buffer is NULL");
    if (out == nullptr) invalid("ivf_deserialize: out is NULL");
    const progress::Scope progress = progress_of(params, progress::Stage::Load);
    auto handle = handle_from(io::read_index(buffer, size), params);
    progress::finish();
    *out = handle.release();
  });
}

}  // extern "C"
