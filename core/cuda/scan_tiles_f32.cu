// The list-tile scan for f32 rows (scan_tiles.hpp): one storage type per file so they compile in parallel.
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<float>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<float>&);
}  // namespace ivfgpu::cuda::scan_detail
