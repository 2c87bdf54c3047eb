// The list-tile scan for bf16 rows (scan_tiles.hpp): one storage type per file so they compile in parallel.
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<BFloat16>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<BFloat16>&);
}  // namespace ivfgpu::cuda::scan_detail
