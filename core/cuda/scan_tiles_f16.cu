// The list scans for f16 rows (scan_tiles.hpp, scan_tensor.hpp): one storage type per file so
// that the types compile in parallel.
#include "scan_seed_f16.cuh"
#include "scan_tensor.cuh"
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<Half>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<Half>&);
template void launch_tensor_scan<Half>(const DeviceContext&, cudaStream_t, bool, const TileArgs<Half>&, float*,
                                         const PruneState*);
template void launch_resident_scan<Half>(const DeviceContext&, cudaStream_t, bool, const TileArgs<Half>&,
                                        const PruneState&, bool);
template void launch_f16_seed<Half>(const DeviceContext&, cudaStream_t, bool, const TileArgs<Half>&, int64_t,
                                   const int32_t*, int64_t, const SeedValues&, const PruneState&, bool, bool);
template void launch_settle<Half>(const DeviceContext&, cudaStream_t, bool, bool, const SettleArgs<Half>&);
template void launch_refine<Half>(const DeviceContext&, cudaStream_t, bool, bool, const RefineArgs<Half>&);
}  // namespace ivfgpu::cuda::scan_detail
