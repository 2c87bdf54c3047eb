// The list-tile scan for f16 rows (scan_tiles.hpp): one storage type per file so they compile in parallel.
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<Half>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<Half>&);
}  // namespace ivfgpu::cuda::scan_detail
