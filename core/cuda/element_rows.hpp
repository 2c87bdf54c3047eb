// Moving device rows between f32 and the storage types (issue 11), the device twin of
// element_convert.hpp: exact decoding, and encoding with the documented rounding and checks
// (f16/bf16 round to nearest even and refuse what overflows; uint8/int8 take only integers in
// range). An add converts f32 input here, on the GPU, before the rows reach the list store.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../element_type.hpp"
#include "device_context.hpp"

namespace ivfgpu::cuda {

// out (n * dim f32, device) = the n rows of `type` at in (device), decoded exactly.
void decode_rows_on_device(cudaStream_t stream, ElementType type, const void* in, int64_t n, int64_t dim, float* out);

// out (n * dim elements of `to`, device) = in (f32, device) encoded. A value `to` refuses fails
// with Errc::InvalidArgument naming its row and element, as encode_rows does (`what` prefixes
// the message). Synchronises `stream`.
void encode_rows_on_device(const DeviceContext& ctx, cudaStream_t stream, const float* in, int64_t n, int64_t dim,
                           ElementType to, void* out, const char* what);

}  // namespace ivfgpu::cuda
