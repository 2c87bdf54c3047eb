// Callers' query and result buffers in page-locked host memory (ivf_host_alloc,
// ivf_host_register). From pageable memory the CUDA driver stages a copy through its own
// buffers at roughly the host's memcpy rate (~10 GB/s on the H200 machine); from page-locked
// memory it copies directly at the bus's rate (~50 GB/s), so a large host-memory search spends
// a fifth of the time on its copies (bench/RESULTS.md, "Pinned callers' buffers"). The searches
// need no flag: the driver recognises the memory.
//
// Every range handed out or registered is recorded, so a pointer the library did not give
// out, a double free and overlapping registrations are refused instead of corrupting the
// driver's state. Without a usable CUDA device the memory is ordinary (page-aligned) and a
// registration is only recorded: the same program runs on the CPU backend.
#pragma once

#include <cstddef>

namespace ivfgpu {

void* host_alloc(std::size_t bytes);               // InvalidArgument (0 bytes), OutOfHostMemory
void host_free(void* p);                           // InvalidArgument: not from host_alloc
void host_register(void* p, std::size_t bytes);    // InvalidArgument: NULL, 0, overlaps a known range
void host_unregister(void* p);                     // InvalidArgument: not registered by host_register

}  // namespace ivfgpu
