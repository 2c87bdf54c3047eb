// libFuzzer target: the FAISS IndexIVFFlat reader, entered directly.
#include "fuzz_loader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  return ivfgpu::fuzz::run_one(data, size, [](const uint8_t* d, std::size_t n) {
    ivfgpu::io::MemorySource in(d, n);
    return ivfgpu::io::read_faiss(in);
  });
}
