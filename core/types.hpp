// Engine-side vocabulary: metrics, backends and the parameters an index is built with.
#pragma once

#include <cstdint>
#include <vector>

namespace ivfgpu {

// Values match the ABI's so that files and the C layer can convert by cast after a range check.
enum class Metric : int32_t { L2 = 0, InnerProduct = 1, Cosine = 2 };
enum class BackendKind : int32_t { Auto = 0, Cpu = 1, Cuda = 2 };
enum class MemoryKind : int32_t { Host = 0, Device = 1 };

// Cosine is inner product over unit vectors: every kernel only knows "smaller is better" (L2)
// or "larger is better" (inner product).
inline bool larger_is_better(Metric m) { return m != Metric::L2; }

struct BuildParams {
  int64_t nlist = 1024;
  Metric metric = Metric::L2;
  BackendKind backend = BackendKind::Auto;
  int64_t device = 0;
  int64_t kmeans_iters = 10;  // FAISS IVF default
  int64_t max_points_per_centroid = 256;  // FAISS's default training-sample cap
  int64_t seed = 1234;
  int64_t num_threads = 0;  // 0: all hardware threads
  int64_t nprobe = 8;       // default search nprobe
  bool unique_ids = false;  // every id names at most one vector
  int64_t device_budget = 0;  // bytes of device memory (CUDA); 0 = unlimited (no host tier)
  bool dynamic_batching = false;  // merge concurrent small searches (search_batcher.hpp)
  int64_t shards = 1;             // parts of one index (sharded_backend.hpp); 1: a plain index
  int64_t shard_mode = 0;         // ShardMode: 0 split the rows, 1 replicate them
  std::vector<int64_t> shard_devices;  // part -> CUDA device; absent or -1: device + part, wrapping
  int32_t storage = 0;            // ElementType of the stored rows (issue 11); 0 = f32
};

}  // namespace ivfgpu
