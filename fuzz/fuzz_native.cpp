// libFuzzer target: the loader behind ivf_load / ivf_deserialize (detection by magic, then
// the native reader; FAISS images reach the FAISS reader).
#include "fuzz_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  return ivfgpu::fuzz::run_one(data, size, [](const uint8_t* d, std::size_t n) { return ivfgpu::io::read_index(d, n); });
}
