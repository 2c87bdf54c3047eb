// The list-tile scan for i8 rows (scan_tiles.hpp): one storage type per file so they compile in parallel.
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<int8_t>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<int8_t>&);
}  // namespace ivfgpu::cuda::scan_detail
