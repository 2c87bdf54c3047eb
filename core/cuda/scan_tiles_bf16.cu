// The list scans for bf16 rows (scan_tiles.hpp, scan_tensor.hpp): one storage type per file so
// that the types compile in parallel.
#include "scan_seed_f16.cuh"
#include "scan_tensor.cuh"
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<BFloat16>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<BFloat16>&);
template void launch_tensor_scan<BFloat16>(const DeviceContext&, cudaStream_t, bool, const TileArgs<BFloat16>&, float*,
                                         const PruneState*);
template void launch_resident_scan<BFloat16>(const DeviceContext&, cudaStream_t, bool, const TileArgs<BFloat16>&,
                                            const PruneState&, bool);
template void launch_f16_seed<BFloat16>(const DeviceContext&, cudaStream_t, bool, const TileArgs<BFloat16>&, int64_t,
                                   const int32_t*, int64_t, const SeedValues&, const PruneState&, bool, bool);
template void launch_settle<BFloat16>(const DeviceContext&, cudaStream_t, bool, bool, const SettleArgs<BFloat16>&);
template void launch_refine<BFloat16>(const DeviceContext&, cudaStream_t, bool, bool, const RefineArgs<BFloat16>&);
}  // namespace ivfgpu::cuda::scan_detail
