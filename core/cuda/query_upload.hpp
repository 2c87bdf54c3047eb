// A large host-memory batch's queries cross to the device in pieces on a second stream, and the
// coarse stage (GEMM and top-nprobe) of each piece runs while the next one crosses. Only the
// coarse stage is pieced: cutting the list scan too costs the GPU as much as the copy time it
// hides (bench/RESULTS.md, "Large host batches cut into pieces"), while coarse work splits by
// rows at no cost.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "device_context.hpp"

namespace ivfgpu::cuda {

// What the piece count depends on: a chunk of `rows` host queries, `bytes` in all, scored
// against `nlist` centroids on a device of `sm_count` SMs, in page-locked memory or not.
struct UploadShape {
  std::size_t bytes = 0;
  int64_t rows = 0;
  int64_t nlist = 0;
  int sm_count = 1;
  bool page_locked = false;
};

// How many pieces the chunk crosses in; 1 means one copy on the search stream, as before.
// Pageable queries cross in one copy: the driver stages them through its own buffers at the
// host's memcpy rate, and pieces measured no faster and often slower (bench/RESULTS.md).
// IVFGPU_UPLOAD_PIECES=N (read at every call, so the benchmark and tests compare counts in one
// process) pins the count for either kind of memory (1 to 16, within one row a piece).
int upload_pieces(const UploadShape& shape);

// Whether the driver reads [p, p + bytes) directly: its first and last bytes are page-locked
// (ivf_host_alloc, ivf_host_register, or the caller's own cudaHostAlloc / cudaHostRegister).
bool page_locked(const void* p, std::size_t bytes);

// Copies pieces of one chunk's queries on the worker's upload stream (made at first use). The
// first copy waits for everything queued on the search stream before the upload began (the
// previous chunk may still read the destination), and the search stream waits for each piece
// before the work enqueued after piece() returns, so stream-ordered frees of the destination
// on the search stream stay behind every copy.
class QueryUpload {
 public:
  QueryUpload(Worker& worker, cudaStream_t search);
  QueryUpload(const QueryUpload&) = delete;
  QueryUpload& operator=(const QueryUpload&) = delete;

  // Enqueues the copy of `bytes` from host `src` to device `dst`.
  void piece(void* dst, const void* src, std::size_t bytes);

 private:
  cudaStream_t upload_;
  cudaStream_t search_;
  cudaEvent_t event_;
};

}  // namespace ivfgpu::cuda
