// The list scans for i8 rows (scan_tiles.hpp, scan_tensor.hpp): one storage type per file so
// that the types compile in parallel.
#include "scan_imma.cuh"
#include "scan_seed.cuh"
#include "scan_seed_f16.cuh"
#include "scan_tensor.cuh"
#include "scan_tiles.cuh"

namespace ivfgpu::cuda::scan_detail {
template void launch_scan<int8_t>(const DeviceContext&, cudaStream_t, int, bool, bool, const TileArgs<int8_t>&);
template void launch_tensor_scan<int8_t>(const DeviceContext&, cudaStream_t, bool, const TileArgs<int8_t>&, float*,
                                         const PruneState*);
template void launch_resident_scan<int8_t>(const DeviceContext&, cudaStream_t, bool, const TileArgs<int8_t>&,
                                          const PruneState&, bool);
template void launch_integer_scan<int8_t>(const DeviceContext&, cudaStream_t, bool, const TileArgs<int8_t>&,
                                           const PruneState&);
template void launch_pack_integer_queries<int8_t>(cudaStream_t, const float*, int64_t, int64_t, uint8_t*, int32_t*);
template void launch_int8_seed<int8_t>(const DeviceContext&, cudaStream_t, bool, const TileArgs<int8_t>&, int64_t,
                                        const int32_t*, int64_t, const SeedValues&, const PruneState&);
template void launch_f16_seed<int8_t>(const DeviceContext&, cudaStream_t, bool, const TileArgs<int8_t>&, int64_t,
                                   const int32_t*, int64_t, const SeedValues&, const PruneState&, bool, bool);
template void launch_settle<int8_t>(const DeviceContext&, cudaStream_t, bool, bool, const SettleArgs<int8_t>&);
template void launch_refine<int8_t>(const DeviceContext&, cudaStream_t, bool, bool, const RefineArgs<int8_t>&);
}  // namespace ivfgpu::cuda::scan_detail
