// The list scans for f32 rows (scan_tiles.hpp, scan_tensor.hpp): one storage type per file so
// that the types compile in parallel.
#include "scan_seed_f16.cuh"
#include "scan_tensor.cuh"
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<float>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<float>&);
template void launch_tensor_scan<float>(const DeviceContext&, cudaStream_t, bool, const TileArgs<float>&, float*,
                                         const PruneState*);
template void launch_resident_scan<float>(const DeviceContext&, cudaStream_t, bool, const TileArgs<float>&,
                                         const PruneState&, bool);
template void launch_f16_seed<float>(const DeviceContext&, cudaStream_t, bool, const TileArgs<float>&, int64_t,
                                   const int32_t*, int64_t, const SeedValues&, const PruneState&, bool, bool);
template void launch_settle<float>(const DeviceContext&, cudaStream_t, bool, bool, const SettleArgs<float>&);
template void launch_refine<float>(const DeviceContext&, cudaStream_t, bool, bool, const RefineArgs<float>&);
}  // namespace ivfgpu::cuda::scan_detail
