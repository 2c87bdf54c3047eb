// The list-tile scan for u8 rows (scan_tiles.hpp): one storage type per file so they compile in parallel.
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<uint8_t>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<uint8_t>&);
}  // namespace ivfgpu::cuda::scan_detail
