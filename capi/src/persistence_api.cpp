// Persistence entry points. Placeholder until the file format lands: every call is refused
// with IVF_ERR_UNSUPPORTED so that the ABI (and the function table) is complete from day one.
#include "guard.hpp"
#include "handles.hpp"

using namespace ivfgpu;
using namespace ivfgpu::capi;

namespace {
void not_yet(const char* what) {
  fail(Errc::Unsupported, std::string(what) + ": index files are not supported by this build yet");
}
}  // namespace

extern "C" {

IVF_API ivf_status ivf_save(const ivf_index*, const char*) {
  return guarded([] { not_yet("ivf_save"); });
}
IVF_API ivf_status ivf_load(const char*, const ivf_params*, ivf_index**) {
  return guarded([] { not_yet("ivf_load"); });
}
IVF_API ivf_status ivf_serialize(const ivf_index*, void*, size_t, size_t*) {
  return guarded([] { not_yet("ivf_serialize"); });
}
IVF_API ivf_status ivf_deserialize(const void*, size_t, const ivf_params*, ivf_index**) {
  return guarded([] { not_yet("ivf_deserialize"); });
}
IVF_API ivf_status ivf_save_faiss(const ivf_index*, const char*) {
  return guarded([] { not_yet("ivf_save_faiss"); });
}

}  // extern "C"
