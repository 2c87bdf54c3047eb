#include "query_upload.hpp"

#include <algorithm>
#include <cstdlib>

#include "check.hpp"

namespace ivfgpu::cuda {

namespace {

// Each piece costs its coarse GEMM's inefficiency at fewer rows and a launch chain; what it
// hides is a share of the coarse stage. Two bounds keep pieces worth it:
// - bytes: a piece of at least ~1 MiB crosses in ~20 us from pinned memory (54 GB/s on the
//   H200's host), longer than a piece's launches;
// - rows: a piece's GEMM makes at least 1.5 waves of 128 x 128 output tiles, so it still runs
//   near the whole GEMM's rate. At 1M x 128, nlist 1024, 10,000 pinned queries (H200, p50 ms):
//   1 piece 1.144, 2 1.111, 3 1.083, 4 1.097, 6 1.118, 8 1.147 (bench/RESULTS.md); this bound
//   picks 3.
constexpr std::size_t kPieceBytes = std::size_t{1} << 20;
constexpr int64_t kTile = 128;
constexpr int kMaxPieces = 8;

int pieces_from_environment(int64_t rows) {
  const char* e = std::getenv("IVFGPU_UPLOAD_PIECES");
  if (e == nullptr || *e == '\0') return 0;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  if (end == nullptr || *end != '\0' || v < 1) return 0;
  return static_cast<int>(std::min<long long>({v, 16, std::max<int64_t>(rows, 1)}));
}

}  // namespace

int upload_pieces(const UploadShape& shape) {
  if (const int pinned = pieces_from_environment(shape.rows); pinned > 0) return pinned;
  if (!shape.page_locked) return 1;
  const auto by_bytes = static_cast<int64_t>(shape.bytes / kPieceBytes);
  const int64_t col_tiles = std::max<int64_t>(1, (shape.nlist + kTile - 1) / kTile);
  const int64_t min_rows = std::max<int64_t>(kTile, (3 * shape.sm_count / 2 + col_tiles - 1) / col_tiles * kTile);
  const int64_t by_rows = shape.rows / min_rows;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({by_bytes, by_rows, kMaxPieces})));
}

bool page_locked(const void* p, std::size_t bytes) {
  if (p == nullptr || bytes == 0) return false;
  const auto locked = [](const void* at) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, at) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return a.type == cudaMemoryTypeHost;
  };
  return locked(p) && locked(static_cast<const unsigned char*>(p) + bytes - 1);
}

QueryUpload::QueryUpload(Worker& worker, cudaStream_t search) : search_(search) {
  if (!worker.upload_stream) worker.upload_stream = make_stream();
  if (!worker.upload_event) worker.upload_event = make_event();
  upload_ = worker.upload_stream.get();
  event_ = worker.upload_event.get();
  IVF_CUDA_CHECK(cudaEventRecord(event_, search_));
  IVF_CUDA_CHECK(cudaStreamWaitEvent(upload_, event_, 0));
}

void QueryUpload::piece(void* dst, const void* src, std::size_t bytes) {
  IVF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, upload_));
  // One event serves every piece: a wait takes the event's state when it is enqueued, so
  // recording it again for the next piece does not disturb the wait before.
  cudaError_t e = cudaEventRecord(event_, upload_);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(search_, event_, 0);
  if (e != cudaSuccess) {
    // The search stream does not know about this copy: let it finish before the caller's
    // unwinding frees its destination.
    (void)cudaStreamSynchronize(upload_);
    IVF_CUDA_CHECK(e);
  }
}

}  // namespace ivfgpu::cuda
